"""What one client may cost: slow heads and bodies, header bytes, connections and requests in flight.

Real sockets against a real gateway (protocol.GatewayRunner) with tight limits. The timeouts here are
the listener's own timers on the event loop, so these tests wait for them (a few tenths of a second); a
slow client is simulated by writing a byte at a time, which is the behaviour under test, not a wait.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from gateway.server import running
from tests.factories import FakeModel, make_config
from tests.gateway import rawhttp

TIGHT = {
    "header_timeout_s": 0.4, "idle_timeout_s": 0.5, "body_idle_timeout_s": 0.4, "body_timeout_s": 1.0,
    "max_header_bytes": 2000, "max_in_flight": 2, "max_connections": 6, "retry_after_s": 2.0,
}  # fmt: skip


@pytest.fixture
async def gateway(upstream, access_log):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "limits": TIGHT, "shutdown": {"grace_s": 1},
           "model": {"inspect_bytes": 8}}  # fmt: skip
    async with running(make_config(raw, origin=upstream.url), model=FakeModel(scores={"allow": 1.0})) as gw:
        yield gw


async def trickle(
    url: str, data: bytes, every_s: float, limit_s: float = 5.0, first: bytes = b""
) -> tuple[rawhttp.Reply, float]:
    """Write `first` at once, then `data` a byte every `every_s` seconds until the server answers or
    closes; (reply, seconds)."""
    reader, writer = await asyncio.open_connection(*url.removeprefix("http://").rsplit(":", 1))
    started, raw = time.monotonic(), b""
    writer.write(first)
    try:
        for byte in data:
            try:
                writer.write(bytes([byte]))
                await writer.drain()
                raw += await asyncio.wait_for(reader.read(65536), every_s)
                break  # the server answered (or closed: b"")
            except asyncio.TimeoutError:
                if time.monotonic() - started > limit_s:
                    break
            except ConnectionError:
                break
        raw += await asyncio.wait_for(reader.read(), 2.0)
        return rawhttp.parse_reply(raw, True), time.monotonic() - started
    finally:
        writer.close()


async def test_a_trickled_head_is_cut_at_the_header_timeout(gateway, upstream, access_log):
    head = b"GET /slow HTTP/1.1\r\nHost: a\r\n" + b"X-Pad: " + b"a" * 200 + b"\r\n\r\n"
    reply, took = await trickle(gateway.proxy_url, head, every_s=0.05)
    assert reply.status == 408 and reply.header("x-clef-error") == "request_timeout"
    assert 0.3 < took < 2.0  # the head was still coming, a byte every 50 ms: the total counts, not the gaps
    assert upstream.seen == []
    assert access_log()[-1]["status"] == 408


async def test_a_silent_connection_is_closed_without_a_word(gateway, access_log):
    reader, writer = await asyncio.open_connection(*gateway.proxy_url.removeprefix("http://").rsplit(":", 1))
    assert await asyncio.wait_for(reader.read(), 3.0) == b""  # closed after header_timeout_s, nothing sent
    writer.close()
    assert access_log() == []  # a connection that never sent a byte is not a request


async def test_an_idle_kept_alive_connection_is_closed(gateway):
    reader, writer = await asyncio.open_connection(*gateway.proxy_url.removeprefix("http://").rsplit(":", 1))
    writer.write(b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n")
    first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3.0)
    assert first.startswith(b"HTTP/1.1 200")
    started = time.monotonic()
    await asyncio.wait_for(reader.read(), 3.0)  # the rest of the body, then EOF once idle_timeout_s passed
    assert time.monotonic() - started < 2.0
    writer.close()


@pytest.mark.parametrize("every_s, reason", [(0.0, "body_idle_timeout_s"), (0.2, "body_timeout_s")])
async def test_a_slow_body_is_408_and_the_origin_never_gets_it_whole(gateway, upstream, access_log, every_s, reason):
    head = b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n"
    if every_s == 0.0:  # 20 bytes (past inspect_bytes: forwarding has begun), then silence
        reply = await rawhttp.send(gateway.proxy_url, head + b"x" * 20)
    else:  # a byte every 0.2 s: never silent for body_idle_timeout_s, but not done within body_timeout_s
        reply, _ = await trickle(gateway.proxy_url, b"x" * 100, every_s=every_s, first=head)
    assert reply.status == 408 and reply.header("x-clef-error") == "request_timeout"
    await asyncio.sleep(0)  # let the origin's handler see its request cut
    assert upstream.seen == []  # it got a request cut short, which it never completes, not a whole one
    assert reason in access_log()[-1]["error"]["message"]


async def test_too_many_header_bytes_is_431(gateway, upstream):
    head = b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 100) for i in range(30)) + b"\r\n"
    reply = await rawhttp.send(gateway.proxy_url, head)
    assert reply.status == 431 and upstream.seen == []


async def test_requests_beyond_max_in_flight_are_shed_with_retry_after(gateway, upstream, access_log):
    upstream.gate = asyncio.Event()  # the origin holds /static/ answers: two requests stay in flight
    async with aiohttp.ClientSession() as s:
        held = [asyncio.create_task(s.get(gateway.proxy_url + f"/static/{i}.js")) for i in range(2)]
        while len(upstream.seen) < 2:
            await asyncio.sleep(0.01)
        shed = await s.get(gateway.proxy_url + "/static/third.js")
        assert shed.status == 503 and shed.headers["Retry-After"] == "2"
        assert shed.headers["x-clef-error"] == "overloaded" and (await shed.text()).startswith("503")
        upstream.gate.set()
        assert [(await r).status for r in held] == [200, 200]
        assert (await s.get(gateway.proxy_url + "/static/fourth.js")).status == 200  # room again
    assert [s.target for s in upstream.seen].count("/static/third.js") == 0
    assert any(line["status"] == 503 for line in access_log())


async def test_connections_beyond_max_connections_get_503_and_are_closed(gateway, access_log):
    host, port = gateway.proxy_url.removeprefix("http://").rsplit(":", 1)
    opened = [await asyncio.open_connection(host, port) for _ in range(6)]
    await asyncio.sleep(0.05)  # let the server register them
    extra_reader, extra_writer = await asyncio.open_connection(host, port)
    answer = await asyncio.wait_for(extra_reader.read(), 3.0)
    assert answer.startswith(b"HTTP/1.1 503") and b"Retry-After: 2" in answer
    for _, w in opened + [(None, extra_writer)]:
        w.close()
    await asyncio.sleep(0.05)
    reply = await rawhttp.send(gateway.proxy_url, b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert reply.status == 200  # with the others gone, there is room again
    assert any(line["error"] and line["error"]["type"] == "overloaded" for line in access_log())
