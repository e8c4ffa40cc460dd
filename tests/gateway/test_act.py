"""Forwarding, end to end: a real origin on loopback, the real rules and default model in front of it.

Transport tests run on a detect-only route, so the model decides and annotates every request but a
benign upload can never be turned away by it: what they check is the plumbing, byte for byte.
"""

from __future__ import annotations

import gzip
import hashlib
import socket

import aiohttp

from tests.factories import MiB, payload, raw_url

DETECT = {"mode": "detect"}
CLEF = ("x-clef-decision", "x-clef-confidence", "x-clef-feature", "x-clef-source", "x-clef-model")


async def test_5mb_upload_reaches_the_origin_byte_for_byte_with_its_content_length(make_gateway, upstream):
    gw = await make_gateway(DETECT)
    data = payload(5 * MiB)
    resp = await gw.proxy.post("/upload", data=data, headers={"Content-Type": "application/octet-stream"})
    assert resp.status == 200
    seen = upstream.seen[-1]
    assert (seen.size, seen.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert seen.header("Content-Length") == str(len(data)) and not seen.chunked


async def test_chunked_upload_stays_chunked_and_whole(make_gateway, upstream):
    gw = await make_gateway({**DETECT, "model": {"inspect_bytes": 1000}})
    data = payload(3 * MiB, seed=3)

    async def stream():
        for i in range(0, len(data), 100_000):
            yield data[i : i + 100_000]

    resp = await gw.proxy.post("/upload", data=stream())
    assert resp.status == 200
    seen = upstream.seen[-1]
    assert seen.chunked and seen.header("Content-Length") is None
    assert (seen.size, seen.sha256) == (len(data), hashlib.sha256(data).hexdigest())


async def test_5mb_download_streams_back_intact(make_gateway):
    gw = await make_gateway(DETECT)
    resp = await gw.proxy.get(f"/download/{5 * MiB}")
    body = await resp.read()
    assert resp.status == 200
    assert len(body) == 5 * MiB and hashlib.sha256(body).hexdigest() == resp.headers["X-Sha256"]


async def test_origin_sees_the_decision_and_not_the_forged_one(make_gateway, upstream):
    gw = await make_gateway()
    forged = {"X-Clef-Decision": "allow", "x-clef-source": "override", "X-CLEF-Model": "mine", "x-clef-extra": "1"}
    resp = await gw.proxy.get("/", headers=forged)
    assert resp.status == 200
    seen = upstream.seen[-1]
    for name in CLEF:
        assert len(seen.all(name)) == 1, name
    assert seen.header("x-clef-source") in ("model", "cache", "rules", "override")
    assert seen.header("x-clef-model") == gw.decider.model_id
    assert "mine" not in seen.all("x-clef-model") and seen.header("x-clef-extra") is None
    assert 0.0 <= float(seen.header("x-clef-confidence")) <= 1.0
    assert "x-clef-decision" not in resp.headers  # echo is off by default


async def test_echo_puts_the_decision_on_the_response(make_gateway, upstream):
    gw = await make_gateway({"headers": {"echo": True}})
    resp = await gw.proxy.get("/")
    for name in CLEF:
        assert resp.headers[name] == upstream.seen[-1].header(name)


async def test_hop_by_hop_headers_are_dropped_both_ways(make_gateway, upstream):
    gw = await make_gateway(DETECT)
    sent = {
        "Connection": "keep-alive, X-Secret-Hop",
        "X-Secret-Hop": "1",
        "Keep-Alive": "timeout=5",
        "Proxy-Authorization": "Basic Zm9vOmJhcg==",
        "Proxy-Connection": "keep-alive",
        "TE": "trailers",
        "Trailer": "X-Checksum",
        "Upgrade": "h2c",
        "X-End-To-End": "kept",
    }
    resp = await gw.proxy.get("/hop", headers=sent)
    names = {k.lower() for k, _ in upstream.seen[-1].headers}
    for gone in ("x-secret-hop", "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer", "upgrade"):
        assert gone not in names, gone
    assert upstream.seen[-1].header("X-End-To-End") == "kept"
    assert resp.status == 200 and resp.headers["X-End"] == "kept"
    for gone in ("Keep-Alive", "Proxy-Authenticate", "X-Private"):
        assert gone not in resp.headers, gone


async def test_forwarding_headers(make_gateway, upstream):
    gw = await make_gateway(DETECT)
    await gw.proxy.get("/", headers={"X-Forwarded-For": "203.0.113.7", "Forwarded": "for=203.0.113.7"})
    seen = upstream.seen[-1]
    assert seen.header("X-Forwarded-For") == "203.0.113.7, 127.0.0.1"
    assert seen.header("X-Forwarded-Proto") == "http"
    client_host = f"127.0.0.1:{gw.proxy.port}"
    assert seen.header("X-Forwarded-Host") == client_host
    assert seen.header("Forwarded") == f'for=203.0.113.7, for=127.0.0.1;proto=http;host="{client_host}"'
    assert seen.header("Host") == upstream.url.removeprefix("http://")  # origin.host: origin


async def test_host_preserve_sends_the_clients_host(make_gateway, upstream):
    gw = await make_gateway({**DETECT, "origin": {"host": "preserve"}})
    await gw.proxy.get("/", headers={"Host": "shop.example"})
    assert upstream.seen[-1].header("Host") == "shop.example"


async def test_no_headers_the_client_did_not_send(make_gateway, upstream):
    gw = await make_gateway(DETECT)
    await gw.proxy.get("/", skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"))
    names = {k.lower() for k, _ in upstream.seen[-1].headers}
    assert not names & {"user-agent", "accept", "accept-encoding", "cookie", "content-type"}


async def test_repeated_set_cookie_and_status_relayed(make_gateway):
    gw = await make_gateway(DETECT)
    resp = await gw.proxy.get("/cookies")
    assert resp.headers.getall("Set-Cookie") == ["a=1; Path=/; HttpOnly", "b=2; Path=/; Secure"]
    resp = await gw.proxy.get("/no/such/thing", allow_redirects=False)
    assert resp.status == 200 and resp.headers["X-Origin"] == "yes"


async def test_content_encoding_passes_through_compressed(make_gateway):
    gw = await make_gateway(DETECT)
    async with aiohttp.ClientSession(auto_decompress=False) as s:
        async with s.get(gw.proxy.make_url("/gzip")) as resp:
            body = await resp.read()
    assert resp.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == b"hello " * 100


async def test_raw_request_target_reaches_the_origin_as_sent(make_gateway, upstream):
    gw = await make_gateway(DETECT)
    target = "/a/../b/%2e%2e/c?q=%27x%27&r=a+b"
    await gw.proxy.session.get(raw_url(gw.proxy, target))
    assert upstream.seen[-1].target == target


async def test_origin_down_is_502(make_gateway, access_log):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    gw = await make_gateway(DETECT, origin=f"http://127.0.0.1:{port}")
    resp = await gw.proxy.get("/")
    assert resp.status == 502 and (await resp.text()).startswith("502")
    assert access_log()[-1]["error"]["type"] == "upstream_unreachable"


async def test_origin_timeout_is_504(make_gateway, upstream, access_log):
    gw = await make_gateway({**DETECT, "origin": {"timeout_s": 0.2}})
    resp = await gw.proxy.get("/hang")
    assert resp.status == 504 and (await resp.text()).startswith("504")
    assert upstream.seen[-1].target == "/hang"
    assert access_log()[-1]["status"] == 504


async def test_body_over_the_limit_is_413_before_the_origin(make_gateway, upstream):
    gw = await make_gateway({**DETECT, "limits": {"max_body_bytes": 1000}})
    resp = await gw.proxy.post("/upload", data=b"x" * 1001)
    assert resp.status == 413 and upstream.seen == []


async def test_chunked_body_running_over_the_limit_is_413(make_gateway):
    gw = await make_gateway({**DETECT, "limits": {"max_body_bytes": 50_000}, "model": {"inspect_bytes": 1000}})

    async def stream():
        for _ in range(10):
            yield b"y" * 10_000

    resp = await gw.proxy.post("/upload", data=stream())
    assert resp.status == 413


async def test_head_keeps_the_origins_length_and_sends_no_body(make_gateway, upstream):
    gw = await make_gateway(DETECT)
    got = await gw.proxy.get("/thing")
    head = await gw.proxy.head("/thing")
    assert head.status == 200 and upstream.seen[-1].method == "HEAD"
    assert head.headers["Content-Length"] == got.headers["Content-Length"]
    assert await head.read() == b""


async def test_header_limits_refuse_before_the_origin(make_gateway, upstream):
    gw = await make_gateway({**DETECT, "limits": {"max_field_bytes": 200, "max_headers": 20}})
    assert (await gw.proxy.get("/", headers={"X-Big": "v" * 300})).status in (400, 431)
    many = {f"X-H{i}": "1" for i in range(30)}
    assert (await gw.proxy.get("/", headers=many)).status in (400, 431)
    assert upstream.seen == []
    assert (await gw.proxy.get("/", headers={"X-Small": "v" * 50})).status == 200
