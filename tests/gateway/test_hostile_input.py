"""Hostile encodings over raw sockets: decided and logged, never a crash.

Invalid UTF-8 (escaped, and raw in header values), invalid percent-escapes, NULs, overlong paths, a
thousand query parameters, odd bodies: the request line and headers are well-formed HTTP, so they reach
the engine (the real rules and default model) and get a decision, forward or block, with one access-log
line that has it. None may end in a 500, and no log line may carry the request's body or query.
"""

from __future__ import annotations

import pytest

from gateway.server import running
from tests.factories import make_config
from tests.gateway import rawhttp

MANY = b"&".join(b"p%d=v%d" % (i, i) for i in range(700))


def get(target: bytes, *headers: bytes) -> bytes:
    head = b"GET " + target + b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
    return head + b"".join(h + b"\r\n" for h in headers) + b"\r\n"


def post(body: bytes, content_type: bytes = b"application/x-www-form-urlencoded") -> bytes:
    return (b"POST /form?secret=hunter2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Type: " + content_type
            + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip


HOSTILE = {
    "invalid UTF-8, escaped": get(b"/%ff%fe/%c0%af%c0%ae?q=%e0%80%af%ed%a0%80"),
    "overlong UTF-8 traversal": get(b"/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd"),
    "invalid percent-escapes": get(b"/%zz%/%?a=%G1&b=%%%&c=%"),
    "NUL, escaped": get(b"/a%00b.php%00.jpg?x=%00"),
    "overlong path": get(b"/" + b"a/" * 3500),
    "700 query parameters": get(b"/search?" + MANY),
    "raw invalid UTF-8 in a header": get(b"/", b"User-Agent: \xff\xfe\xfd caf\xc3\xa9 \xc0\xaf"),
    "many headers": get(b"/", *(b"X-H%d: %d" % (i, i) for i in range(100))),
    "NUL and invalid UTF-8 in a body": post(b"a=\x00\xff\xfe&b=%zz&c=%00%ff" + bytes(range(256))),
    "broken multipart": post(b'--x\r\nContent-Disposition: form-data; name="\xff"\r\n\r\n\x00', b"multipart/form-data"),
    "broken JSON": post(b'{"a": "\\ud800", "b": [1, 2, {"c":', b"application/json"),
    "huge number of form fields": post(MANY),
}


@pytest.fixture
async def gateway(upstream, real_model):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}}
    async with running(make_config(raw, origin=upstream.url), model=real_model()) as gw:
        yield gw


async def test_hostile_encodings_are_decided_and_logged(gateway, upstream, access_log, caplog):
    wrong = []
    for name, data in HOSTILE.items():
        before = len(access_log())
        reply = await rawhttp.send(gateway.proxy_url, data)
        lines = access_log()[before:]
        if reply.status not in (200, 403):
            wrong.append(f"{name}: answered {reply.status} {reply.body[:80]!r}")
        if len(lines) != 1 or lines[0]["decision"] not in ("block", "cache", "origin", "allow"):
            wrong.append(f"{name}: access log {lines}")
    assert not wrong, "\n".join(wrong)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "hunter2" not in logged and "\\u0000" not in logged and "p999=" not in logged
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
