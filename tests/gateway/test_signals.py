"""A real `clef-gateway serve` process under SIGHUP and SIGTERM.

SIGHUP re-reads the config file: a valid change (a new override) takes effect, an invalid config or a
bundle that does not load is refused with a log line and the running set keeps serving, and requests
sent meanwhile all succeed. SIGTERM stops the listener, lets the request in flight finish (an answer
the origin holds back, or an upload still arriving) and exits 0. These wait for a real process, so they
poll, briefly, for what it does.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest
import yaml

from tests.gateway import rawhttp

pytestmark = pytest.mark.slow


def write(path: Path, upstream_url: str, **extra) -> None:
    doc = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "origin": {"url": upstream_url},
           "shutdown": {"grace_s": 10}, **extra}  # fmt: skip
    path.write_text(yaml.safe_dump(doc))


async def status_of(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url) as resp:
        await resp.read()
        return resp.status


async def test_sighup_applies_a_valid_config_and_refuses_broken_ones(serve, upstream, tmp_path):
    config = tmp_path / "gateway.yaml"
    write(config, upstream.url)
    gw = await serve(config)
    async with aiohttp.ClientSession() as s:
        assert await status_of(s, gw.proxy + "/admin/users") == 200
        deny = {"rules": {"overrides": [{"id": "deny-admin", "action": "deny", "path_prefix": "/admin"}]}}
        write(config, upstream.url, **deny)
        gw.signal(signal.SIGHUP)
        await gw.logged(r"reload: config generation 2")
        assert await status_of(s, gw.proxy + "/admin/users") == 403

        write(config, upstream.url, breaker={"failures_to_open": 0}, **deny)  # not a valid config
        gw.signal(signal.SIGHUP)
        await gw.logged(r"reload refused.*breaker.failures_to_open: must be > 0")
        broken = tmp_path / "bundle"
        broken.mkdir()
        (broken / "bundle.json").write_text("{not json")
        write(config, upstream.url, model={"bundle": str(broken)})  # loads as a config; its model does not
        gw.signal(signal.SIGHUP)
        await gw.logged(r"reload refused.*model")
        assert await status_of(s, gw.proxy + "/admin/users") == 403  # generation 2 still serves
        health = await (await s.get(gw.admin + "/health")).json()
        assert health["status"] == "ok" and health["model"]["name"] == "clef-default"
    assert gw.proc.returncode is None


async def test_no_request_fails_while_sighup_swaps_config_and_bundle(serve, upstream, tmp_path):
    config = tmp_path / "gateway.yaml"
    write(config, upstream.url, mode="detect")
    gw = await serve(config)
    statuses: list[int | str] = []
    stop = asyncio.Event()
    async with aiohttp.ClientSession() as s:
        async def client(i: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    async with s.post(f"{gw.proxy}/load/{i}/{n}", data=b"x" * (n % 5 * 4000)) as resp:
                        await resp.read()
                        statuses.append(resp.status)
                except aiohttp.ClientError as err:
                    statuses.append(type(err).__name__)

        clients = [asyncio.create_task(client(i)) for i in range(6)]
        for generation in range(2, 5):
            write(config, upstream.url, mode="detect", cache={"ttl_s": generation})  # a new engine each time
            gw.signal(signal.SIGHUP)
            await gw.logged(rf"reload: config generation {generation}")
        stop.set()
        await asyncio.gather(*clients)
    assert len(statuses) > 20 and set(statuses) == {200}


async def test_sigterm_lets_requests_in_flight_finish_then_exits_0(serve, upstream, tmp_path):
    config = tmp_path / "gateway.yaml"
    write(config, upstream.url, mode="detect")
    gw = await serve(config)
    upstream.gate = asyncio.Event()  # the origin holds /static/ answers
    host, port = gw.proxy.removeprefix("http://").rsplit(":", 1)
    body = b"u" * 200_000
    async with aiohttp.ClientSession() as s:
        held = asyncio.create_task(s.get(gw.proxy + "/static/held.js"))
        reader, writer = await asyncio.open_connection(host, port)  # an upload, half sent
        writer.write(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:100_000])
        await writer.drain()
        while not upstream.seen:
            await asyncio.sleep(0.02)
        gw.signal(signal.SIGTERM)
        await gw.logged(r"stopping")
        while True:  # the listener closes at once
            try:
                _, w = await asyncio.open_connection(host, port)
                w.close()
                await asyncio.sleep(0.05)
            except ConnectionError:
                break
        assert gw.proc.returncode is None  # still draining
        writer.write(body[100_000:])  # the rest of the upload, after SIGTERM
        reply = rawhttp.parse_reply(await asyncio.wait_for(reader.read(), 10), True)
        assert reply.status == 200
        upstream.gate.set()
        assert (await asyncio.wait_for(held, 10)).status == 200
    assert await asyncio.wait_for(gw.proc.wait(), 15) == 0
    assert sorted(x.size for x in upstream.seen) == [0, len(body)]
