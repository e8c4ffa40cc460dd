"""`clef-gateway serve --workers 2` as real processes: both workers answer on the one proxy port, the
parent's /health and /metrics speak for both, SIGHUP reaches each, a killed worker is started again while
the other serves, SIGTERM lets requests in flight finish and exits 0, and a worker that cannot start ends
the gateway with its exit code. These wait for real processes, so they poll, briefly."""

from __future__ import annotations

import asyncio
import os
import re
import signal

import aiohttp
import pytest

from tests.gateway.serving import Serving
from tests.gateway.test_signals import write

pytestmark = pytest.mark.slow
DENY_ADMIN = {"rules": {"overrides": [{"id": "deny-admin", "action": "deny", "path_prefix": "/admin"}]}}
NO_MODEL = {"model": {"enabled": False}}  # the rules decide: workers start in a second, not a model load


def pids(gw: Serving) -> list[int]:
    line = next(x for x in gw.errors if "workers 2 (pids" in x)
    return [int(p) for p in re.search(r"\(pids ([\d, ]+)\)", line).group(1).split(", ")]


async def fresh(url: str, n: int) -> list[int]:
    """`n` GETs, each on a connection of its own, so the kernel spreads them over the workers."""
    statuses = []
    for _ in range(n):
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
            async with s.get(url) as resp:
                await resp.read()
                statuses.append(resp.status)
    return statuses


def served_by(metrics: str) -> dict[str, float]:
    """Requests answered per worker, from the parent's /metrics."""
    out: dict[str, float] = {}
    for m in re.finditer(r'^clef_requests_total\{status="\d+",worker="(\d)"\} (\S+)$', metrics, re.M):
        out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
    return out


async def health(s: aiohttp.ClientSession, gw: Serving) -> tuple[int, dict]:
    async with s.get(gw.admin + "/health") as resp:
        return resp.status, await resp.json()


async def test_two_workers_share_the_port_and_the_parent_speaks_for_both(serve, upstream, tmp_path):
    config = tmp_path / "gateway.yaml"
    write(config, upstream.url, mode="detect")
    gw = await serve(config, workers=2)
    a, b = pids(gw)
    assert await fresh(gw.proxy + "/products", 40) == [200] * 40
    async with aiohttp.ClientSession() as s:
        metrics = await (await s.get(gw.admin + "/metrics")).text()
        assert set(served_by(metrics)) == {"0", "1"} and sum(served_by(metrics).values()) == 40  # both answered
        status, report = await health(s, gw)
        assert status == 200 and report["model"]["name"] == "clef-default"
        assert [(w["worker"], w["pid"], w["state"], w["model"]["name"]) for w in report["workers"]] == [
            (0, a, "up", "clef-default"), (1, b, "up", "clef-default")]  # each with its own model  # fmt: skip

        write(config, upstream.url, mode="enforce", **DENY_ADMIN)
        gw.signal(signal.SIGHUP)
        await gw.logged(r"\[worker \d\]: reload: config generation 2", count=2)  # each worker reloaded
        assert await fresh(gw.proxy + "/admin/x", 20) == [403] * 20
        metrics = await (await s.get(gw.admin + "/metrics")).text()
        assert all(f'clef_config_generation{{worker="{i}"}} 2.0' in metrics for i in (0, 1))
        decision = await s.post(gw.admin + "/v1/decision", json={"input": "1 UNION SELECT password FROM users--"})
        assert decision.status == 200 and (await decision.json())["decision"]["source"] in ("model", "rules")


async def test_a_killed_worker_is_started_again_while_the_other_serves(serve, upstream, tmp_path):
    config = tmp_path / "gateway.yaml"
    write(config, upstream.url, mode="detect", **NO_MODEL)
    gw = await serve(config, workers=2)
    first, other = pids(gw)
    os.kill(first, signal.SIGKILL)
    await gw.logged(r"worker 0 \(pid \d+\) exited -9")
    async with aiohttp.ClientSession() as s:
        status, report = await health(s, gw)
        if report["workers"][0]["state"] != "up":  # it may be up again already
            assert status == 503 and report["reason"].startswith("worker 0:")
        assert await fresh(gw.proxy + "/during", 10) == [200] * 10  # the other worker takes every connection
        await gw.logged(r"worker 0 \(pid \d+\) is up again \(restart 1\)")
        status, report = await health(s, gw)
        assert status == 200
        assert [(w["state"], w["restarts"]) for w in report["workers"]] == [("up", 1), ("up", 0)]
        assert report["workers"][0]["pid"] not in (first, other) and report["workers"][1]["pid"] == other
        assert await fresh(gw.proxy + "/after", 40) == [200] * 40
        metrics = await (await s.get(gw.admin + "/metrics")).text()
        assert served_by(metrics).get("0", 0) > 0  # the new worker 0 serves too
        assert 'clef_worker_restarts_total{worker="0"} 1.0' in metrics


async def test_sigterm_lets_requests_in_flight_finish_on_every_worker_then_exits_0(serve, upstream, tmp_path):
    config = tmp_path / "gateway.yaml"
    write(config, upstream.url, mode="detect", **NO_MODEL)
    gw = await serve(config, workers=2)
    upstream.gate = asyncio.Event()  # the origin holds /static/ answers

    async def held(i: int) -> int:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
            async with s.get(f"{gw.proxy}/static/held{i}.js") as resp:
                await resp.read()
                return resp.status

    requests = [asyncio.create_task(held(i)) for i in range(8)]
    while len(upstream.seen) < 8:
        await asyncio.sleep(0.02)
    gw.signal(signal.SIGTERM)
    await gw.logged(r"stopping: no new connections", count=2)  # both workers were told
    assert gw.proc.returncode is None  # waiting for the workers, which wait for their requests
    upstream.gate.set()
    assert await asyncio.wait_for(asyncio.gather(*requests), 15) == [200] * 8
    assert await asyncio.wait_for(gw.proc.wait(), 30) == 0


async def test_a_worker_that_cannot_start_ends_the_gateway_with_its_code(serve, upstream, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: [{id: 1, not: a rule}]\n")  # a config that loads; a ruleset that does not
    config = tmp_path / "gateway.yaml"
    write(config, upstream.url, rules={"path": str(rules)}, **NO_MODEL)
    gw = await serve(config, workers=2, wait=False)
    assert await asyncio.wait_for(gw.proc.wait(), 60) == 2
    await gw.logged(r"worker \d could not start \(exit 2\); stopping")
    assert not any("clef-gateway: proxy" in line for line in gw.errors)  # it never said it was serving

