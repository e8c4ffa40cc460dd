"""Reloads in process: a new config and engine swapped in whole, a broken one refused, and requests in
flight finishing on the engine they started with (which closes only after them)."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest

from engine.verdict import Source, Verdict
from gateway import app as apps
from gateway.holder import Holder, reload, restart_only_changes
from gateway.server import running
from tests.factories import FakeModel, make_config

DENY_ADMIN = {"rules": {"overrides": [{"id": "deny-admin", "action": "deny", "path_prefix": "/admin"}]}}


class GatedModel(FakeModel):
    """A model whose answers wait for `gate`: a request can be held inside the engine."""

    def __init__(self, model_id: str):
        super().__init__(scores={"allow": 1.0})
        self.id = model_id
        self.gate = asyncio.Event()

    async def predict(self, features):  # type: ignore[override]
        self.calls += 1
        await self.gate.wait()
        return Verdict("allow", 1.0, source=Source.MODEL, model=self.id)


def config(upstream, **extra):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "model": {"timeout_ms": 30000}, **extra}
    return make_config(raw, origin=upstream.url)


async def test_a_valid_config_takes_effect(upstream):
    async with running(config(upstream), model=FakeModel()) as gw, aiohttp.ClientSession() as s:
        assert (await s.get(gw.proxy_url + "/admin/users")).status == 200
        assert await gw.reload(config(upstream, **DENY_ADMIN))
        resp = await s.get(gw.proxy_url + "/admin/users")
        assert resp.status == 403 and upstream.seen[-1].target == "/admin/users"  # the first one only
        health = await (await s.get(gw.admin_url + "/health")).json()
        assert health["status"] == "ok"
        metrics = await (await s.get(gw.admin_url + "/metrics")).text()
        assert "clef_config_generation 2.0" in metrics


async def test_a_broken_ruleset_is_refused_and_the_old_config_stays(upstream, tmp_path, caplog):
    broken = tmp_path / "rules.yaml"
    broken.write_text("rules: [this is not a ruleset\n")
    async with running(config(upstream, **DENY_ADMIN), model=FakeModel()) as gw, aiohttp.ClientSession() as s:
        before = gw.decider
        assert not await gw.reload(config(upstream, rules={"path": str(broken)}))
        assert gw.decider is before
        assert (await s.get(gw.proxy_url + "/admin/x")).status == 403  # the running overrides still apply
    assert any("reload refused" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)


async def test_a_bundle_that_does_not_load_is_refused(upstream):
    class Broken:  # what Decider.create returns when the bundle fails: rules only, with the reason
        model, model_error = None, "bundle.json is not valid JSON"

        async def close(self) -> None:
            self.closed = True

    holder = Holder(config(upstream), decider="running")
    broken = Broken()
    assert not await reload(holder, config(upstream), lambda c: broken)
    assert holder.decider == "running" and broken.closed


def test_what_needs_a_restart_is_named():
    old = make_config({"limits": {"max_in_flight": 10}})
    new = make_config({"limits": {"max_in_flight": 20}, "listen": "0.0.0.0:80", "mode": "detect"})
    assert restart_only_changes(old, new) == ["listen", "limits.max_in_flight"]


async def test_requests_in_flight_keep_their_engine_and_it_closes_after_them(upstream):
    old, new = GatedModel("old@1"), GatedModel("new@2")
    new.gate.set()
    async with running(config(upstream), model=old) as gw, aiohttp.ClientSession() as s:
        held = asyncio.create_task(s.get(gw.proxy_url + "/held"))
        while old.calls == 0:
            await asyncio.sleep(0.01)  # until the request waits inside the old model
        assert await apps.reload(gw.app, config(upstream, mode="detect"), model=new)
        fresh = await s.get(gw.proxy_url + "/fresh")
        assert fresh.status == 200 and upstream.seen[-1].header("x-clef-model") == "new@2"
        assert not old.closed  # its request is still in flight
        old.gate.set()
        assert (await held).status == 200
        assert upstream.seen[-1].target == "/held" and upstream.seen[-1].header("x-clef-model") == "old@1"
        assert upstream.seen[-1].header("x-clef-mode") == "enforce"  # and the config it started with
        for _ in range(100):
            if old.closed:
                break
            await asyncio.sleep(0.01)
        assert old.closed and not new.closed
    assert new.closed


@pytest.mark.parametrize("generations", [3])
async def test_reloads_under_load_fail_no_request(upstream, generations):
    async with running(config(upstream), model=FakeModel()) as gw, aiohttp.ClientSession() as s:
        stop = asyncio.Event()
        statuses: list[int] = []

        async def client(i: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                async with s.post(gw.proxy_url + f"/load/{i}/{n}", data=b"x" * (n % 7 * 1000)) as resp:
                    await resp.read()
                    statuses.append(resp.status)

        async def answered(more: int) -> None:  # requests keep flowing between swaps
            target = len(statuses) + more
            while len(statuses) < target:
                await asyncio.sleep(0.01)

        clients = [asyncio.create_task(client(i)) for i in range(8)]
        for g in range(generations):
            await answered(20)
            assert await apps.reload(gw.app, config(upstream, mode="detect" if g % 2 else "enforce"),
                                     model=FakeModel())  # fmt: skip
        await answered(20)
        stop.set()
        await asyncio.gather(*clients)
    assert statuses and set(statuses) == {200}
