"""The origin failing: refused, silent, cut mid-response, and down for a while (passive health).

Our own answers (502, 504) are one short line with `x-clef-error` and the decision headers when they are
echoed. A response cut mid-body is cut for the client too, never ended as if complete: with a
Content-Length the client reads fewer bytes, chunked it never gets the final chunk. After
origin.fail_threshold failures in a row the origin is down for origin.down_for_s (the fake clock's):
requests get 502 at once without trying it, or a stale copy from the edge cache, and /health and the
metrics say so.
"""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest

from tests.factories import Asset, FakeModel

DETECT = {"mode": "detect", "headers": {"echo": True}}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: nothing listens there


async def test_our_502_and_504_are_short_and_say_so(make_gateway, upstream):
    gw = await make_gateway({**DETECT, "origin": {"timeout_s": 0.2}})
    resp = await gw.proxy.get("/hang")
    assert resp.status == 504 and await resp.text() == "504 Gateway Timeout\n"
    assert resp.headers["x-clef-error"] == "upstream_timeout" and resp.headers["Server"] == "clef-gateway"
    assert resp.headers["x-clef-decision"] in ("block", "cache", "origin", "allow")  # echo is on
    gw = await make_gateway(DETECT, origin=f"http://127.0.0.1:{closed_port()}")
    resp = await gw.proxy.get("/")
    assert resp.status == 502 and await resp.text() == "502 Bad Gateway\n"
    assert resp.headers["x-clef-error"] == "upstream_unreachable" and "x-clef-source" in resp.headers


async def test_reset_before_the_response_is_502(make_gateway, access_log):
    gw = await make_gateway(DETECT)
    resp = await gw.proxy.get("/reset/head")
    assert resp.status == 502 and resp.headers["x-clef-error"] == "upstream_unreachable"
    assert access_log()[-1]["error"]["type"] == "upstream_unreachable"


@pytest.mark.parametrize("how", ["length", "chunked"])
async def test_reset_mid_response_is_never_presented_as_complete(make_gateway, access_log, how):
    gw = await make_gateway(DETECT)
    resp = await gw.proxy.get(f"/reset/{how}")
    assert resp.status == 200  # the headers had gone to the client already
    with pytest.raises(aiohttp.ClientPayloadError):  # a short read, or no final chunk: never a clean end
        await resp.read()
    line = access_log()[-1]
    assert line["error"]["type"] == "upstream_unreachable" and "mid-response" in line["error"]["message"]


async def test_the_origin_is_marked_down_after_failures_in_a_row(make_gateway, upstream, clock):
    gw = await make_gateway({"origin": {"fail_threshold": 3, "down_for_s": 10}}, model=FakeModel(), clock=clock)
    for _ in range(3):  # (aiohttp's client may retry a GET once on a fresh connection: one failure still)
        assert (await gw.proxy.get("/reset/head")).status == 502
    tried = len(upstream.seen)
    down = await gw.proxy.get("/reset/head")
    assert down.status == 502 and down.headers["x-clef-error"] == "upstream_down"
    assert len(upstream.seen) == tried  # answered at once: the origin was not tried
    health = await (await gw.admin.get("/health")).json()
    assert health["origin"] == {"state": "down", "failures": 3, "retry_in_s": 10.0}
    metrics = await (await gw.admin.get("/metrics")).text()
    assert "clef_origin_up 0.0" in metrics and "clef_errors_total{kind=\"upstream_down\"} 1.0" in metrics
    clock.advance(10)
    assert (await gw.proxy.get("/reset/head")).status == 502 and len(upstream.seen) > tried  # tried once more
    assert (await gw.proxy.get("/anything")).headers["x-clef-error"] == "upstream_down"  # and down again at once
    clock.advance(10)
    assert (await gw.proxy.get("/anything")).status == 200  # it answers: up, and the count starts over
    assert (await (await gw.admin.get("/health")).json())["origin"] == {"state": "up", "failures": 0}


async def test_an_origin_answering_500_is_not_down(make_gateway, upstream, clock):
    gw = await make_gateway({"origin": {"fail_threshold": 2}}, model=FakeModel(), clock=clock)
    upstream.fail = 500
    for _ in range(4):
        assert (await gw.proxy.get("/static/a.js")).status == 500  # the origin's own answer, relayed
    assert len(upstream.seen) == 4


async def test_while_down_a_stale_copy_stands_in(make_gateway, upstream, clock):
    cached = FakeModel(scores={"cache": 1.0})
    upstream.assets["/static/app.js"] = Asset(cache_control="public, max-age=5, stale-if-error=600")
    gw = await make_gateway({"origin": {"fail_threshold": 2, "down_for_s": 30}}, model=cached, clock=clock)
    assert (await gw.proxy.get("/static/app.js")).headers["x-clef-cache"] == "MISS"
    clock.advance(60)  # stale now; the origin crashes
    upstream.reset = True
    for _ in range(2):
        resp = await gw.proxy.get("/static/app.js")
        assert resp.status == 200 and resp.headers["x-clef-cache"] == "STALE"
    tried = len(upstream.seen)
    resp = await gw.proxy.get("/static/app.js")  # down: not tried, and the stale copy still answers
    assert resp.status == 200 and resp.headers["x-clef-cache"] == "STALE" and len(upstream.seen) == tried
    assert (await gw.proxy.get("/static/other.js")).status == 502  # nothing stored for this one


async def test_a_client_that_hangs_up_cancels_its_request_and_is_logged_499(make_gateway, upstream, access_log):
    gw = await make_gateway(DETECT)
    with pytest.raises(asyncio.TimeoutError):
        await gw.proxy.get("/hang", timeout=aiohttp.ClientTimeout(total=0.3))
    for _ in range(200):  # the gateway notices the closed connection on its next turn of the loop
        if access_log():
            break
        await asyncio.sleep(0.01)
    assert access_log()[-1]["status"] == 499 and upstream.seen[-1].target == "/hang"
