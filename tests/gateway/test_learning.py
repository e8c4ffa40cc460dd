"""gateway/learning.py through a running gateway: decisions journaled (sampled, redacted, with the access
log's id), a shadow bundle deciding beside the live model (counted, journaled, reloaded, refused when
broken), and a journal that cannot be opened stopping the start."""

from __future__ import annotations

import json
import logging

import aiohttp
import pytest

from engine import bundle as bundles
from engine.journal import Journal
from gateway.errors import ConfigError
from gateway.exchange import JOURNAL, request_id
from gateway.server import running
from tests.factories import FakeModel, make_config

SECRET = "hunter2hunter2"


def config(upstream, tmp_path, journal=None, **extra):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "model": {"timeout_ms": 30000},
           "journal": {"path": str(tmp_path / "journal.db"), "sample_other": 1.0, **(journal or {})}, **extra}  # fmt: skip
    return make_config(raw, origin=upstream.url)


def access_lines(caplog) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "clef.access"]


async def test_each_decision_is_journaled_with_the_id_of_its_log_line(upstream, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="clef.access")
    async with running(config(upstream, tmp_path), model=FakeModel({"allow": 0.9})) as gw, aiohttp.ClientSession() as s:
        headers = {"Cookie": f"sid={SECRET}", "Authorization": f"Bearer {SECRET}"}
        assert (await s.get(gw.proxy_url + f"/login?user=bob&password={SECRET}", headers=headers)).status == 200
        assert (await s.post(gw.proxy_url + "/api/items", json={"name": "shoe", "token": SECRET})).status == 200
        writer = gw.app[JOURNAL]
        writer.flush()
        metrics = await (await s.get(gw.admin_url + "/metrics")).text()
        assert "clef_journal_written_total 2.0" in metrics and "clef_journal_dropped_total 0.0" in metrics
    lines = access_lines(caplog)
    with Journal(tmp_path / "journal.db") as j:
        rows = {e["id"]: e for e in j.entries()}
        assert set(rows) == {line["id"] for line in lines} and len(rows) == 2
        raw = [tuple(r) for r in j.db.execute("SELECT query, headers, body, canonical FROM decisions")]
    assert SECRET not in json.dumps([[str(c) for c in r] for r in raw])
    login = next(e for e in rows.values() if e["path"] == "/login")
    assert login["label"] == "allow" and login["model"] == "fake@1" and "q password = [ID]" in login["canonical"]


async def test_samples_follow_the_label_and_a_reload_changes_them(upstream, tmp_path):
    cfg = config(upstream, tmp_path, journal={"sample_other": 0.0})
    async with running(cfg, model=FakeModel({"allow": 0.9})) as gw, aiohttp.ClientSession() as s:
        await s.get(gw.proxy_url + "/a")
        assert await gw.reload(config(upstream, tmp_path, journal={"sample_other": 1.0}))
        await s.get(gw.proxy_url + "/b")
        gw.app[JOURNAL].flush()
        with Journal(tmp_path / "journal.db") as j:
            assert [e["path"] for e in j.entries()] == ["/b"]


async def test_blocks_are_journaled_even_when_nothing_else_is(upstream, tmp_path):
    cfg = config(upstream, tmp_path, journal={"sample_other": 0.0})
    async with running(cfg, model=FakeModel({"block": 0.9}, features=("sqli",))) as gw, aiohttp.ClientSession() as s:
        assert (await s.get(gw.proxy_url + "/search?q=1%27or%201=1--")).status == 403
        gw.app[JOURNAL].flush()
        with Journal(tmp_path / "journal.db") as j:
            (e,) = j.entries(feature="sqli")
            assert e["label"] == "block" and e["path"] == "/search"


async def test_a_shadow_bundle_decides_beside_the_live_model(upstream, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="clef.shadow")
    # the ensemble off: the rules would block this attack themselves, and their decisions are not compared
    cfg = config(upstream, tmp_path, journal={"sample_other": 0.0, "sample_blocked": 0.0}, rules={"ensemble": False},
                 model={"timeout_ms": 30000, "shadow_bundle": str(bundles.DEFAULT_BUNDLE)})  # fmt: skip
    attack = "/search?q=1%27%20UNION%20SELECT%20username%2C%20password%20FROM%20users--"
    async with running(cfg, model=FakeModel({"allow": 0.99})) as gw, aiohttp.ClientSession() as s:
        assert (await s.get(gw.proxy_url + attack)).status == 200  # the live (fake) model lets it through
        await gw.decider.shadow.drain()
        gw.app[JOURNAL].flush()
        metrics = await (await s.get(gw.admin_url + "/metrics")).text()
        health = await (await s.get(gw.admin_url + "/health")).json()
        models = (await (await s.get(gw.admin_url + "/v1/models")).json())["models"]
    (e,) = Journal(tmp_path / "journal.db").entries()  # not sampled, but journaled: the two disagreed
    assert (e["label"], e["shadow_label"], e["shadow_model"]) == ("allow", "block", models[1]["name"] + "@" + models[1]["version"])
    assert 'clef_shadow_agreement_total{live="allow",shadow="block"} 1.0' in metrics
    assert health["shadow"]["agreement"] == 0.0 and models[1]["shadow"] is True
    (logged,) = [json.loads(r.getMessage()) for r in caplog.records if r.name == "clef.shadow"]
    assert (logged["id"], logged["live"], logged["shadow"]) == (e["id"], "allow", "block")


async def test_a_reload_with_a_shadow_bundle_that_does_not_load_is_refused(upstream, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    async with running(config(upstream, tmp_path), model=FakeModel()) as gw:
        before = gw.decider
        assert not await gw.reload(config(upstream, tmp_path, model={"shadow_bundle": str(empty)}))
        assert gw.decider is before
        assert await gw.reload(config(upstream, tmp_path, model={"shadow_bundle": str(bundles.DEFAULT_BUNDLE)}))
        assert gw.decider.shadow is not None
        assert await gw.reload(config(upstream, tmp_path))  # and taken away again
        assert gw.decider.shadow is None


async def test_a_journal_that_cannot_be_opened_stops_the_start(upstream, tmp_path):
    (tmp_path / "journal.db").write_text("not a database, but a text file that happens to be long enough " * 20)
    with pytest.raises(ConfigError, match="journal.path: .*cannot open"):
        async with running(config(upstream, tmp_path), model=FakeModel()):
            pass


def test_request_ids_are_unique_and_short():
    ids = {request_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) <= 20 for i in ids)
