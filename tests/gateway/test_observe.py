from __future__ import annotations

import logging

from gateway import observe
from tests.factories import make_exchange, raw_url

FIELDS = {
    "time", "client", "method", "path", "status", "bytes_in", "bytes_out", "decision", "confidence", "features",
    "source", "model", "action", "intended", "mode", "route", "decision_ms", "upstream_ms", "total_ms",
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
    assert "secret" not in str(line)  # the query is never logged
    assert "error" not in line


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
