from __future__ import annotations

import logging
import random

from gateway import observe
from tests.factories import FakeModel, make_exchange, raw_url

FIELDS = {
    "time", "client", "method", "path", "status", "bytes_in", "bytes_out", "decision", "confidence", "features",
    "source", "model", "tokens", "action", "intended", "mode", "route", "cache", "decision_ms", "upstream_status",
    "upstream_ms", "total_ms",
}  # fmt: skip


async def test_one_line_for_a_forwarded_request(make_gateway, access_log):
    gw = await make_gateway({"mode": "detect"})
    await gw.proxy.post("/api/notes?secret=1", data=b"hello")
    (line,) = access_log()
    assert set(line) >= FIELDS
    assert (line["method"], line["path"], line["status"], line["action"]) == ("POST", "/api/notes", 200, "forward")
    assert line["bytes_in"] == 5 and line["bytes_out"] > 0
    assert line["decision"] in ("block", "cache", "origin", "allow") and line["source"] == "model"
    assert line["decision_ms"] >= 0 and line["upstream_ms"] >= 0 and line["total_ms"] >= line["decision_ms"]
    assert "secret" not in str(line)  # the query is not logged by default
    assert "error" not in line
    assert (line["cache"], line["upstream_status"]) == ("BYPASS", 200) and line["tokens"] > 0
    assert "hello" not in str(line)  # nor ever a body


async def test_one_line_for_a_blocked_request(make_gateway, access_log):
    gw = await make_gateway()
    await gw.proxy.session.get(raw_url(gw.proxy, "/?id=1%27%20OR%201%3D1--"))
    (line,) = access_log()
    assert (line["status"], line["decision"], line["action"], line["upstream_ms"]) == (403, "block", "block", None)
    assert line["bytes_out"] == len(gw.config.actions.block_response.body)


async def test_one_line_for_a_failed_request(make_gateway, access_log):
    gw = await make_gateway({"mode": "detect"}, origin="http://127.0.0.1:9")  # discard port: nothing listens
    await gw.proxy.get("/")
    (line,) = access_log()
    assert line["status"] == 502 and line["decision"] is not None
    assert line["error"]["type"] == "upstream_unreachable"


async def test_one_line_for_a_request_refused_before_deciding(make_gateway, access_log):
    gw = await make_gateway({"limits": {"max_body_bytes": 10}})
    await gw.proxy.post("/", data=b"x" * 11)
    (line,) = access_log()
    assert (line["status"], line["decision"], line["error"]["type"]) == (413, None, "payload_too_large")


def test_access_log_can_be_turned_off(caplog):
    from tests.factories import make_config

    caplog.set_level(logging.INFO, logger="clef.access")
    observe.record(make_exchange(config=make_config({"logging": {"access_log": False}})))
    assert [r for r in caplog.records if r.name == "clef.access"] == []


def test_a_client_that_went_away_is_logged_as_499(caplog):
    caplog.set_level(logging.INFO, logger="clef.access")
    observe.record(make_exchange())
    assert '"status":499' in caplog.records[-1].getMessage()


async def test_the_query_is_logged_only_when_configured(make_gateway, access_log):
    gw = await make_gateway({"logging": {"log_query": True}}, model=FakeModel())
    await gw.proxy.get("/search?q=shoes&page=2")
    assert access_log()[-1]["path"] == "/search?q=shoes&page=2"


async def test_sampling_drops_allowed_requests_but_never_blocks_or_errors(make_gateway, access_log):
    overrides = [{"id": "deny-admin", "action": "deny", "path_prefix": "/admin"}]
    gw = await make_gateway({"logging": {"sample_allowed": 0.0}, "rules": {"overrides": overrides}}, model=FakeModel())
    for _ in range(5):
        await gw.proxy.get("/page")
    await gw.proxy.get("/admin/users")
    await gw.proxy.get("/hop")  # allowed too: not logged
    lines = access_log()
    assert [(line["path"], line["status"]) for line in lines] == [("/admin/users", 403)]


async def test_sampling_keeps_errors(make_gateway, access_log):
    gw = await make_gateway({"logging": {"sample_allowed": 0.0}}, model=FakeModel(), origin="http://127.0.0.1:9")
    await gw.proxy.get("/")
    assert [line["status"] for line in access_log()] == [502]


async def test_half_the_allowed_requests_are_logged_at_one_half(make_gateway, access_log):
    random.seed(1)
    gw = await make_gateway({"logging": {"sample_allowed": 0.5}}, model=FakeModel())
    for _ in range(60):
        await gw.proxy.get("/page")
    assert 15 <= len(access_log()) <= 45


async def test_a_cache_hit_is_logged_as_one(make_gateway, access_log, clock):
    gw = await make_gateway(model=FakeModel(scores={"cache": 1.0}), clock=clock)
    await gw.proxy.get("/static/app.js")
    await gw.proxy.get("/static/app.js")
    first, second = access_log()
    assert (first["cache"], first["upstream_status"]) == ("MISS", 200)
    assert (second["cache"], second["upstream_status"], second["upstream_ms"]) == ("HIT", None, None)
    assert second["bytes_out"] == first["bytes_out"] > 0
