"""deploy/grafana-dashboard.json: a dashboard Grafana can import, over series the gateway really exports.

Every metric a panel queries, and every label it groups by, must appear on the admin listener's /metrics
of a running gateway with everything on (the model, a shadow bundle, the journal, the edge cache), after
a few requests. A renamed series breaks this test rather than a panel in production.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from engine import bundle as bundles
from gateway.server import running
from tests.factories import FakeModel, make_config

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"
SERIES = re.compile(r"\bclef_[a-z_]+\b")
GROUPING = re.compile(r"\bby \(([^)]*)\)")
OWN_LABELS = {"le"}  # histogram buckets


def queries() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_the_dashboard_is_importable():
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 30
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) >= 10
    for p in dash["panels"]:
        assert p["targets"] and p["datasource"]["uid"] == "${datasource}" and {"h", "w", "x", "y"} <= set(p["gridPos"])
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource"}


async def test_every_queried_series_and_label_is_exported(upstream, tmp_path):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"},
           "model": {"timeout_ms": 30000, "shadow_bundle": str(bundles.DEFAULT_BUNDLE)},
           "journal": {"path": str(tmp_path / "journal.db")}}  # fmt: skip
    async with running(make_config(raw, origin=upstream.url), model=FakeModel({"allow": 0.9})) as gw:
        async with aiohttp.ClientSession() as s:
            for path in ("/", "/static/app.css", "/search?q=shoes", "/admin/users"):
                assert (await s.get(gw.proxy_url + path)).status == 200
            await gw.decider.shadow.drain()
            text = await (await s.get(gw.admin_url + "/metrics")).text()
    families = list(text_string_to_metric_families(text))
    samples = [s for family in families for s in family.samples]
    # a labelled counter nothing has counted yet (fallbacks, refusals), or a histogram nothing has observed,
    # is declared with no sample to show its labels: its name is checked, its labels once it has samples
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}
    names = {s.name for s in samples} | {f.name + x for f in families for x in suffixes.get(f.type, ("",))}
    labels: dict[str, set[str]] = {}
    for s in samples:
        labels.setdefault(s.name, set()).update(s.labels)
    for expr in queries():
        used = set(SERIES.findall(expr))
        assert used, expr
        missing = used - names
        assert not missing, f"{expr}: not exported: {sorted(missing)}"
        grouped = {g.strip() for m in GROUPING.findall(expr) for g in m.split(",") if g.strip()} - OWN_LABELS
        if not all(n in labels for n in used):
            continue
        have = set().union(*(labels[n] for n in used))
        assert grouped <= have, f"{expr}: grouped by labels the series lack: {sorted(grouped - have)}"
