"""No log line, at any level and from any logger, carries a request's body, query or cookie values:
not for a forwarded or blocked request, not for one aiohttp's parser or the strict checks refuse (whose
own messages would quote the offending header line), not when the origin fails, not for a bug."""

from __future__ import annotations

import logging

import pytest

from gateway import annotate
from gateway.server import running
from tests.factories import FakeModel, make_config
from tests.gateway import rawhttp

SECRET = "K7rTq9ZsecretZ"


def request(path: str = "/page", *extra: bytes, body: bytes = b"") -> bytes:
    head = (f"POST {path}?token={SECRET} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
            f"Cookie: session={SECRET}; theme=dark\r\nAuthorization: Bearer {SECRET}\r\n").encode()  # fmt: skip
    return head + b"".join(h + b"\r\n" for h in extra) + b"Content-Length: %d\r\n\r\n" % len(body) + body


CASES = {
    "forwarded": request(body=SECRET.encode()),
    "blocked": request("/search", body=f"q=1' UNION SELECT {SECRET} FROM users--".encode()),
    "refused by the parser": request(b"X-Bad: " + SECRET.encode() + b"\x00", body=SECRET.encode()),
    "refused by strict checks": request(b"Transfer-Encoding: chunked", body=SECRET.encode()),
    "invalid Host": request().replace(b"Host: a", f"Host: {SECRET}/x".encode()),
}


@pytest.fixture
async def gateway(upstream, real_model, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, every level
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}}
    async with running(make_config(raw, origin=upstream.url), model=real_model()) as gw:
        yield gw


def leaked(caplog) -> list[str]:
    out = []
    for r in caplog.records:
        text = r.getMessage() + (r.exc_text or "") + (str(r.exc_info[1]) if r.exc_info else "")
        if SECRET in text:
            out.append(f"{r.name} {r.levelname}: {text[:200]}")
    return out


async def test_no_log_line_carries_request_secrets(gateway, caplog):
    statuses = {name: (await rawhttp.send(gateway.proxy_url, data)).status for name, data in CASES.items()}
    assert statuses["forwarded"] in (200, 403) and statuses["blocked"] == 403  # as the model decides
    assert {statuses[k] for k in ("refused by the parser", "refused by strict checks", "invalid Host")} == {400}
    assert leaked(caplog) == []


async def test_nor_when_the_origin_fails_or_the_gateway_has_a_bug(upstream, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}}
    async with running(make_config(raw, origin="http://127.0.0.1:9"), model=FakeModel()) as gw:
        assert (await rawhttp.send(gw.proxy_url, request(body=SECRET.encode()))).status == 502

        def broken(action, verdict, echo=False):
            raise ValueError(f"a bug that quotes the request: {SECRET}")

        monkeypatch.setattr(annotate, "headers", broken)
        reply = await rawhttp.send(gw.proxy_url, request(body=SECRET.encode()))
        assert reply.status == 500 and SECRET.encode() not in reply.raw
    assert any("unhandled ValueError" in r.getMessage() for r in caplog.records)  # the bug is logged, with frames
    assert leaked(caplog) == []
