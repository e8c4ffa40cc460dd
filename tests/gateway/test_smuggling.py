"""Request smuggling and ambiguous framing, over raw sockets, with both of aiohttp's request parsers.

Each hostile request goes to a real gateway (real sockets, protocol.GatewayRunner) in front of the
recording origin, with a model that would let everything through: what stops these is the framing, not
a decision. For every one the client gets a 400 (431 for too many headers) of ours, the connection is
closed, the origin sees nothing at all, and the access log has one line naming the error. Many carry a
second request in their body, the way a smuggling attempt does; it must never be forwarded either.
"""

from __future__ import annotations

from types import SimpleNamespace

import aiohttp.http_parser
import pytest

from gateway.server import running
from tests.factories import FakeModel, make_config
from tests.gateway import rawhttp

SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
CHUNK = b"3\r\nabc\r\n0\r\n\r\n"
CLOSE = b"Connection: close"


def post(*headers: bytes, body: bytes = CHUNK, version: bytes = b"HTTP/1.1") -> bytes:
    return b"POST /upload " + version + b"\r\nHost: a\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


REFUSED = {
    # RFC 9112 §6.3: Content-Length and Transfer-Encoding together, either one read first
    "CL.TE": post(b"Content-Length: 6", b"Transfer-Encoding: chunked", body=b"0\r\n\r\n" + SMUGGLED),
    "TE.CL": post(b"Transfer-Encoding: chunked", b"Content-Length: 4", body=b"5c\r\n" + SMUGGLED + b"\r\n0\r\n\r\n"),
    "repeated Content-Length": post(b"Content-Length: 3", b"Content-Length: 3", body=b"abc"),
    "conflicting Content-Length": post(b"Content-Length: 3", b"Content-Length: 40", body=b"abc" + SMUGGLED),
    "Content-Length list": post(b"Content-Length: 3, 3", body=b"abc"),
    "signed Content-Length": post(b"Content-Length: +3", body=b"abc"),
    "Content-Length overflow": post(b"Content-Length: 99999999999999999999999", body=b"abc"),
    # chunk sizes
    "chunk size not hex": post(b"Transfer-Encoding: chunked", body=b"zz\r\nabc\r\n0\r\n\r\n"),
    "chunk size 0x": post(b"Transfer-Encoding: chunked", body=b"0x3\r\nabc\r\n0\r\n\r\n"),
    "chunk size negative": post(b"Transfer-Encoding: chunked", body=b"-3\r\nabc\r\n0\r\n\r\n"),
    "chunk size overflow": post(b"Transfer-Encoding: chunked", body=b"FFFFFFFFFFFFFFFFF\r\nabc\r\n0\r\n\r\n"),
    "chunk bare LF": post(b"Transfer-Encoding: chunked", body=b"3\nabc\n0\n\n"),
    # Transfer-Encoding other than exactly `chunked`
    "TE chunked, identity": post(b"Transfer-Encoding: chunked, identity"),
    "TE identity, chunked": post(b"Transfer-Encoding: identity, chunked"),
    "TE chunked, chunked": post(b"Transfer-Encoding: chunked, chunked"),
    "TE xchunked": post(b"Transfer-Encoding: xchunked"),
    "TE Chunked": post(b"Transfer-Encoding: Chunked"),
    "TE gzip": post(b"Transfer-Encoding: gzip"),
    "TE vertical tab": post(b"Transfer-Encoding:\x0bchunked"),
    "TE repeated": post(b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked"),
    "TE space before colon": post(b"Transfer-Encoding : chunked"),
    "TE name split by LF": post(b"Transfer-Encoding\n: chunked"),
    "TE on HTTP/1.0": post(b"Transfer-Encoding: chunked", version=b"HTTP/1.0"),
    # header syntax
    "obs-fold": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n  folded\r\n\r\n",
    "obs-fold hiding TE": post(b"X-A: 1", b" Transfer-Encoding: chunked", b"Content-Length: 13"),
    "bare CR in a value": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r2\r\n\r\n",
    "bare LF in a value": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\nTransfer-Encoding: chunked\r\n\r\n",
    "bare LF line ends": b"GET / HTTP/1.1\nHost: a\n\n",
    "NUL in a value": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\x002\r\n\r\n",
    "space in a name": b"GET / HTTP/1.1\r\nHost: a\r\nX A: 1\r\n\r\n",
    "empty name": b"GET / HTTP/1.1\r\nHost: a\r\n: 1\r\n\r\n",
    # not HTTP/1.x
    "TLS client hello": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32)) + b"\r\n\r\n",
    "HTTP/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "HTTP/0.9": b"GET /\r\n\r\n",
    "HTTP/1.2": b"GET / HTTP/1.2\r\nHost: a\r\n\r\n",
    "HTTP/3.0": b"GET / HTTP/3.0\r\nHost: a\r\n\r\n",
    "binary garbage": bytes(range(256)) * 4,
    # Host (RFC 9112 §3.2)
    "no Host on HTTP/1.1": b"GET / HTTP/1.1\r\n\r\n",
    "two Hosts": b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "empty Host": b"GET / HTTP/1.1\r\nHost: \r\n\r\n",
    "Host with userinfo": b"GET / HTTP/1.1\r\nHost: user@a\r\n\r\n",
    "Host with a space": b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
    "Host with a path": b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
    # request targets
    "absolute-form, other host": b"GET http://evil.example/x HTTP/1.1\r\nHost: a\r\n\r\n",
    "absolute-form, other scheme": b"GET ftp://a/x HTTP/1.1\r\nHost: a\r\n\r\n",
    "authority-form (CONNECT)": b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
    "asterisk-form": b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    "fragment in the target": b"GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n",
    "raw non-ASCII in the target": b"GET /caf\xc3\xa9/\xff HTTP/1.1\r\nHost: a\r\n\r\n",
    "space in the target": b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
    "NUL in the target": b"GET /a\x00b HTTP/1.1\r\nHost: a\r\n\r\n",
    # an Upgrade whose body aiohttp would parse as the next request once the upgrade is declined
    "Upgrade with a body": post(b"Upgrade: websocket", b"Connection: Upgrade", b"Content-Length: 35", body=SMUGGLED),
}


# Where the pure-Python parser differs: it takes both of these as a (very large) body, which the limits then
# stop before anything is forwarded: the declared length over limits.max_body_bytes (413), and a chunk
# of 2**68 bytes that never comes (408 after limits.body_idle_timeout_s).
PY_PARSER = {"Content-Length overflow": 413, "chunk size overflow": 408}


@pytest.fixture(params=["c", "py"])
async def gateway(request, upstream, access_log):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "shutdown": {"grace_s": 1.0},
           "limits": {"body_idle_timeout_s": 1.0}}  # fmt: skip
    with rawhttp.parser(request.param):
        async with running(make_config(raw, origin=upstream.url), model=FakeModel(scores={"allow": 1.0})) as gw:
            yield SimpleNamespace(proxy_url=gw.proxy_url, parser=request.param)


def test_the_parsers_are_the_ones_named():
    assert aiohttp.http_parser.HttpRequestParser.__module__ == "aiohttp._http_parser"  # llhttp, in C
    assert aiohttp.http_parser.HttpRequestParserPy.__module__ == "aiohttp.http_parser"


async def test_ambiguous_and_broken_requests_are_refused_and_never_forwarded(gateway, upstream, access_log):
    wrong = []
    for name, data in REFUSED.items():
        before = len(access_log())
        reply = await rawhttp.send(gateway.proxy_url, data)
        lines = access_log()[before:]
        if gateway.parser == "py" and name in PY_PARSER:
            if reply.status != PY_PARSER[name] or upstream.seen:
                wrong.append(f"{name}: answered {reply.status} under the Python parser, origin saw {upstream.seen}")
            continue
        if reply.status not in (400, 431) or not reply.closed:
            wrong.append(f"{name}: answered {reply.status}, closed={reply.closed}")
        elif reply.header("x-clef-error") is None or reply.header("server") != "clef-gateway":
            wrong.append(f"{name}: not our answer: {reply.raw[:200]!r}")
        elif len(reply.body) > 40 or b"smuggled" in reply.raw:
            wrong.append(f"{name}: the answer says too much: {reply.body!r}")
        if len(lines) != 1 or lines[0]["status"] != reply.status or "error" not in lines[0]:
            wrong.append(f"{name}: access log {lines}")
        if upstream.seen:
            wrong.append(f"{name}: the origin saw {[s.target for s in upstream.seen]}")
            upstream.seen.clear()
    assert not wrong, "\n".join(wrong)


async def test_what_is_legal_and_unambiguous_is_forwarded_whole(gateway, upstream):
    cases = {
        # optional whitespace around a value is stripped by both parsers (RFC 9110 §5.5): the value is chunked
        "TE with extra whitespace": post(b"Transfer-Encoding:  chunked", CLOSE),
        "TE with a tab": post(b"Transfer-Encoding:\tchunked", CLOSE),
        "chunk extension": post(b"Transfer-Encoding: chunked", CLOSE, body=b"3;name=value\r\nabc\r\n0\r\n\r\n"),
        "Content-Length with leading zeros": post(b"Content-Length: 003", CLOSE, body=b"abc"),
        "HTTP/1.0 without Host": b"POST /upload HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc",
    }
    for name, data in cases.items():
        reply = await rawhttp.send(gateway.proxy_url, data)
        assert reply.status == 200 and reply.closed, name
        assert upstream.seen[-1].size == 3 and upstream.seen[-1].target == "/upload", name
    assert len(upstream.seen) == len(cases)  # and never a second request out of a body


async def test_absolute_form_for_this_host_is_forwarded_in_origin_form(gateway, upstream):
    host = gateway.proxy_url.removeprefix("http://")
    data = f"GET http://{host}/a/b?c=1 HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    reply = await rawhttp.send(gateway.proxy_url, data)
    assert reply.status == 200 and upstream.seen[-1].target == "/a/b?c=1"


async def test_a_pipelined_request_after_a_refused_one_is_never_read(gateway, upstream):
    data = post(b"Content-Length: 3", b"Content-Length: 3", body=b"abc") + SMUGGLED
    reply = await rawhttp.send(gateway.proxy_url, data)
    assert reply.status == 400 and reply.closed and reply.raw.count(b"HTTP/1.") == 1
    assert upstream.seen == []
