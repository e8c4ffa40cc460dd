"""GET /metrics on the admin listener: the series exist and move as requests pass."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.factories import Asset, FakeModel, raw_url

STATIC_TO_CACHE = {"id": "static", "action": "cache", "path_prefix": "/static/"}
DENY_ADMIN = {"id": "deny-admin", "action": "deny", "path_prefix": "/admin"}


async def scrape(gw) -> dict[tuple[str, tuple], float]:
    resp = await gw.admin.get("/metrics")
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = await resp.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples, series, **labels) -> float | None:
    return samples.get((series, tuple(sorted(labels.items()))))


async def test_series_move_as_requests_are_blocked_forwarded_and_cached(make_gateway, upstream, clock):
    overrides = {"rules": {"overrides": [STATIC_TO_CACHE, DENY_ADMIN]}}
    gw = await make_gateway(overrides, model=FakeModel(scores={"allow": 0.9}), clock=clock)
    before = await scrape(gw)
    assert value(before, "clef_requests_in_flight") == 0
    assert value(before, "clef_model_info", name="fake", version="1") == 1
    assert value(before, "clef_breaker_state") == 0 and value(before, "clef_fallback_ratio") == 0
    assert value(before, "clef_edge_cache_hits_total") == 0 and value(before, "clef_edge_cache_bytes") == 0
    assert next(k for k in before if k[0] == "clef_config_info")[1][0][0] == "hash"

    assert (await gw.proxy.get("/admin/users")).status == 403
    assert (await gw.proxy.get("/page")).status == 200
    assert (await gw.proxy.get("/static/app.js")).headers["x-clef-cache"] == "MISS"
    assert (await gw.proxy.get("/static/app.js")).headers["x-clef-cache"] == "HIT"

    s = await scrape(gw)
    assert value(s, "clef_decisions_total", label="block", source="override", action="block") == 1
    assert value(s, "clef_decisions_total", label="allow", source="model", action="forward") == 1
    assert value(s, "clef_decisions_total", label="cache", source="override", action="cache") == 2
    assert value(s, "clef_decision_seconds_count", source="override") == 3
    assert value(s, "clef_requests_total", status="403") == 1 and value(s, "clef_requests_total", status="200") == 3
    assert value(s, "clef_upstream_responses_total", status="200") == 2  # the block and the hit never went
    assert value(s, "clef_upstream_seconds_count") == 2
    assert value(s, "clef_request_seconds_count") == 4
    assert value(s, "clef_edge_cache_requests_total", status="HIT") == 1
    assert value(s, "clef_edge_cache_requests_total", status="MISS") == 1
    assert value(s, "clef_edge_cache_requests_total", status="BYPASS") == 2
    assert value(s, "clef_edge_cache_hits_total") == 1 and value(s, "clef_edge_cache_misses_total") == 1
    assert value(s, "clef_edge_cache_entries") == 1 and value(s, "clef_edge_cache_bytes") > 0
    assert value(s, "clef_edge_cache_served_bytes_total") > 0
    assert value(s, "clef_decision_cache_misses_total") == 1  # only the model's decision is cached
    assert value(s, "clef_requests_in_flight") == 0


async def test_evictions_are_counted(make_gateway, upstream, clock):
    raw = {"cache": {"responses": {"max_bytes": 20_000, "max_object_bytes": 20_000}}}
    gw = await make_gateway(raw, model=FakeModel(scores={"cache": 1.0}), clock=clock)
    for name in "ab":
        upstream.assets[f"/static/{name}.js"] = Asset(body=b"x" * 15_000)
        await gw.proxy.get(f"/static/{name}.js")
    s = await scrape(gw)
    assert value(s, "clef_edge_cache_evictions_total") == 1 and value(s, "clef_edge_cache_entries") == 1


async def test_fallbacks_and_the_breaker(make_gateway, clock):
    gw = await make_gateway({"breaker": {"failures_to_open": 2}}, model=FakeModel(error=True), clock=clock)
    for _ in range(3):
        await gw.proxy.get("/")
    s = await scrape(gw)
    assert value(s, "clef_fallbacks_total", reason="error") == 2
    assert value(s, "clef_fallbacks_total", reason="breaker_open") == 1
    assert value(s, "clef_fallback_ratio") == 1.0
    assert value(s, "clef_breaker_state") == 2 and value(s, "clef_breaker_opened_total") == 1
    assert value(s, "clef_decisions_total", label="allow", source="rules", action="forward") == 3
    clock.advance(30)
    assert value(await scrape(gw), "clef_breaker_state") == 1  # half-open: the next request is a trial


async def test_model_tokens_and_batch_sizes_from_the_real_model(make_gateway):
    gw = await make_gateway({"mode": "detect"})
    await gw.proxy.get("/search?q=shoes")
    await gw.proxy.session.get(raw_url(gw.proxy, "/?id=1%27%20OR%201%3D1--"))
    s = await scrape(gw)
    assert value(s, "clef_model_input_tokens_count") == 2 and value(s, "clef_model_input_tokens_sum") > 10
    assert value(s, "clef_model_batch_size_count") == 2 and value(s, "clef_model_batch_size_sum") == 2
    assert value(s, "clef_model_info", name="clef-default", version=gw.decider.model.info()["version"]) == 1


async def test_each_app_counts_on_its_own_registry(make_gateway):
    one = await make_gateway(model=FakeModel())
    two = await make_gateway(model=FakeModel())
    await one.proxy.get("/")
    assert value(await scrape(one), "clef_requests_total", status="200") == 1
    assert value(await scrape(two), "clef_requests_total", status="200") is None
