from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway import hops
from gateway.annotate import Annotations

NOTES = Annotations(upstream=(("x-clef-decision", "allow"),), client=())


@pytest.mark.parametrize(
    "headers, kept",
    [
        ([("Connection", "close"), ("A", "1")], ["A"]),
        ([("Connection", "X-Foo, x-bar"), ("X-Foo", "1"), ("X-Bar", "2"), ("X-Baz", "3")], ["X-Baz"]),
        ([("Connection", "a"), ("Connection", "b"), ("A", "1"), ("B", "2"), ("C", "3")], ["C"]),
        ([("Keep-Alive", "5"), ("TE", "trailers"), ("Trailer", "X"), ("Transfer-Encoding", "chunked")], []),
        ([("Upgrade", "h2c"), ("Proxy-Authorization", "x"), ("Proxy-Authenticate", "y")], []),
        ([("Proxy-Connection", "keep-alive"), ("A", "1")], ["A"]),
        ([("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")], ["Set-Cookie", "Set-Cookie"]),
    ],
)
def test_end_to_end(headers, kept):
    assert [k for k, _ in hops.end_to_end(headers)] == kept


def request(headers, **kw):
    return make_mocked_request("POST", "/p?q=1", headers=headers, **kw)


def test_request_headers_forwarding_and_hygiene():
    sent = {
        "Host": "shop.example",
        "X-Forwarded-For": "198.51.100.1",
        "X-Forwarded-Proto": "https",
        "X-Clef-Decision": "allow",
        "Expect": "100-continue",
        "Cookie": "a=1",
    }
    out = hops.request_headers(request(sent), preserve_host=False, annotations=NOTES)
    assert "Host" not in out and "Expect" not in out
    assert out["X-Forwarded-For"].startswith("198.51.100.1, ")
    assert out["X-Forwarded-Proto"] == "http" and out["X-Forwarded-Host"] == "shop.example"
    assert out.getall("x-clef-decision") == ["allow"]  # ours only
    assert out["Cookie"] == "a=1"
    assert hops.request_headers(request(sent), preserve_host=True, annotations=NOTES)["Host"] == "shop.example"


def test_ipv6_client_is_bracketed_and_quoted_in_forwarded():
    assert hops._node("::1") == '"[::1]"' and hops._node("10.0.0.1") == "10.0.0.1"


def test_response_headers_keep_repeats_and_drop_hops():
    upstream = [(b"Set-Cookie", b"a=1"), (b"Set-Cookie", b"b=2"), (b"Connection", b"close"), (b"X-Clef-Decision", b"x")]
    out = hops.response_headers(upstream, NOTES)
    assert out.getall("Set-Cookie") == ["a=1", "b=2"] and "Connection" not in out
    assert out["X-Clef-Decision"] == "x"  # not echoing: the origin's own headers are its business
    echo = Annotations(upstream=NOTES.upstream, client=(("x-clef-decision", "allow"),))
    assert hops.response_headers(upstream, echo).getall("x-clef-decision") == ["allow"]
