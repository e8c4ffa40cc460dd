"""The edge response cache, end to end: requests decided `cache` in front of an origin that counts its hits.

Most tests pass a FakeModel that answers `cache` for every request, so what they check is the cache, not
the model; the first one routes /static/ to `cache` with an operator override, as a deployment would, in
front of the real model. Time is the FakeClock: ages and expiry move only when a test advances it.
"""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from gateway.exchange import EDGE
from tests.factories import Asset, FakeModel, MiB

STATIC_TO_CACHE = {"rules": {"overrides": [{"id": "static", "action": "cache", "path_prefix": "/static/"}]}}


async def cache_gateway(make_gateway, clock, raw=None, **responses):
    raw = dict(raw or {})
    if responses:
        raw["cache"] = {"responses": responses}
    return await make_gateway(raw, model=FakeModel(scores={"cache": 1.0}), clock=clock)


async def get(gw, path, method="GET", **headers):
    gw.proxy.session.cookie_jar.clear()  # each request a new client: only the headers given here are sent
    resp = await gw.proxy.request(method, path, headers=headers, allow_redirects=False)
    return resp, await resp.read()


async def test_static_asset_is_fetched_once_then_hit_with_a_growing_age_until_it_expires(make_gateway, upstream, clock):
    gw = await make_gateway(STATIC_TO_CACHE, clock=clock)  # the real model, the override routes /static/
    upstream.assets["/static/app.js"] = Asset(etag=None)
    resp, body = await get(gw, "/static/app.js")
    assert (resp.status, resp.headers["x-clef-cache"], body) == (200, "MISS", Asset().body)
    assert upstream.seen[-1].header("x-clef-decision") == "cache"
    ages = []
    for step in (0, 10, 45):
        clock.advance(step)
        resp, again = await get(gw, "/static/app.js")
        assert (resp.headers["x-clef-cache"], again) == ("HIT", body)
        ages.append(int(resp.headers["Age"]))
    assert ages == [0, 10, 55]
    assert upstream.hits("/static/app.js") == 1
    clock.advance(6)  # 61 s old: past max-age=60
    resp, again = await get(gw, "/static/app.js")
    assert (resp.headers["x-clef-cache"], again) == ("EXPIRED", body)
    assert upstream.hits("/static/app.js") == 2
    resp, _ = await get(gw, "/static/app.js")
    assert (resp.headers["x-clef-cache"], resp.headers["Age"]) == ("HIT", "0")


@pytest.mark.parametrize(
    "asset, fresh_until",
    [
        (Asset(cache_control="max-age=20", etag=None), 20),
        (Asset(cache_control="max-age=5, s-maxage=40", etag=None), 40),  # a shared cache's own max-age wins
        (Asset(cache_control=None, expires_in=30, etag=None), 30),
        (Asset(cache_control=None, etag=None), 7),  # the origin says nothing: default_ttl_s
    ],
)
async def test_freshness_comes_from_the_origin_or_the_default(make_gateway, upstream, clock, asset, fresh_until):
    gw = await cache_gateway(make_gateway, clock, default_ttl_s=7.0)
    upstream.assets["/static/a.js"] = asset
    await get(gw, "/static/a.js")
    clock.advance(fresh_until - 1)
    assert (await get(gw, "/static/a.js"))[0].headers["x-clef-cache"] == "HIT"
    clock.advance(2)
    assert (await get(gw, "/static/a.js"))[0].headers["x-clef-cache"] == "EXPIRED"
    assert upstream.hits("/static/a.js") == 2


@pytest.mark.parametrize(
    "asset",
    [
        Asset(cache_control="no-store"),
        Asset(cache_control="private, max-age=60"),
        Asset(set_cookie=True),
        Asset(vary="*"),
        Asset(status=500),
        Asset(status=302, headers={"Location": "/elsewhere"}),
    ],
)
async def test_responses_a_shared_cache_must_not_store_go_to_the_origin_every_time(make_gateway, upstream, clock, asset):
    gw = await cache_gateway(make_gateway, clock)
    upstream.assets["/static/a.js"] = asset
    for _ in range(2):
        resp, _ = await get(gw, "/static/a.js")
        assert resp.status == asset.status and resp.headers["x-clef-cache"] == "MISS"
    assert upstream.hits("/static/a.js") == 2
    assert len(gw.app[EDGE]) == 0


async def test_set_cookie_still_reaches_the_client_that_caused_it(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    upstream.assets["/static/a.js"] = Asset(set_cookie=True)
    resp, _ = await get(gw, "/static/a.js")
    assert resp.headers.getall("Set-Cookie") == ["session=s3cr3t; Path=/; HttpOnly"]
    resp, _ = await get(gw, "/static/a.js")
    assert resp.headers["x-clef-cache"] == "MISS"  # never from the store: the next client gets its own


async def test_no_cache_is_revalidated_on_every_use(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    upstream.assets["/static/a.js"] = Asset(cache_control="no-cache")
    await get(gw, "/static/a.js")
    for _ in range(2):
        resp, body = await get(gw, "/static/a.js")
        assert (resp.status, resp.headers["x-clef-cache"], body) == (200, "REVALIDATED", Asset().body)
        assert upstream.seen[-1].header("If-None-Match") == '"v1"'
    assert upstream.hits("/static/a.js") == 3


@pytest.mark.parametrize("validator", ["etag", "last_modified"])
async def test_a_stale_entry_is_revalidated_and_a_304_refreshes_it(make_gateway, upstream, clock, validator):
    gw = await cache_gateway(make_gateway, clock)
    lm = "Sun, 01 Nov 2026 10:00:00 GMT"
    upstream.assets["/static/a.js"] = Asset(cache_control="max-age=10", etag='"v1"' if validator == "etag" else None,
                                            last_modified=lm if validator == "last_modified" else None)  # fmt: skip
    await get(gw, "/static/a.js")
    clock.advance(11)
    resp, body = await get(gw, "/static/a.js")
    assert (resp.status, resp.headers["x-clef-cache"], body) == (200, "REVALIDATED", Asset().body)
    sent = upstream.seen[-1]
    assert sent.header("If-None-Match" if validator == "etag" else "If-Modified-Since") == ('"v1"' if validator == "etag" else lm)
    clock.advance(9)  # the 304 made it fresh again for another max-age
    resp, _ = await get(gw, "/static/a.js")
    assert (resp.headers["x-clef-cache"], resp.headers["Age"]) == ("HIT", "9")
    assert upstream.hits("/static/a.js") == 2


async def test_a_changed_resource_replaces_the_stale_entry(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    upstream.assets["/static/a.js"] = Asset(cache_control="max-age=10")
    await get(gw, "/static/a.js")
    upstream.assets["/static/a.js"] = Asset(cache_control="max-age=10", etag='"v2"', body=b"v2")
    clock.advance(11)
    resp, body = await get(gw, "/static/a.js")
    assert (resp.headers["x-clef-cache"], body) == ("EXPIRED", b"v2")
    resp, body = await get(gw, "/static/a.js")
    assert (resp.headers["x-clef-cache"], body, resp.headers["ETag"]) == ("HIT", b"v2", '"v2"')


async def test_vary_keeps_one_variant_per_header_value(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    upstream.assets["/static/a.js"] = Asset(vary="Accept-Encoding")
    seen = []
    for encoding in ("gzip", "br", "gzip", "br", "gzip,  br"):
        resp, body = await get(gw, "/static/a.js", **{"Accept-Encoding": encoding})
        seen.append((resp.headers["x-clef-cache"], body.removeprefix(Asset().body).decode()))
    assert seen == [("MISS", "gzip"), ("MISS", "br"), ("HIT", "gzip"), ("HIT", "br"), ("MISS", "gzip,  br")]
    assert upstream.hits("/static/a.js") == 3


async def test_key_sorts_the_query_and_includes_the_host(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    await get(gw, "/static/a.js?b=2&a=1")
    assert (await get(gw, "/static/a.js?a=1&b=2"))[0].headers["x-clef-cache"] == "HIT"
    assert (await get(gw, "/static/a.js?a=1&b=2", Host="other.example"))[0].headers["x-clef-cache"] == "MISS"
    assert (await get(gw, "/static/a.js?a=1"))[0].headers["x-clef-cache"] == "MISS"


async def test_configured_key_headers_separate_entries(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock, key={"headers": ["X-Tenant"], "query": "ignored"})
    await get(gw, "/static/a.js?v=1", **{"X-Tenant": "a"})
    assert (await get(gw, "/static/a.js?v=2", **{"X-Tenant": "a"}))[0].headers["x-clef-cache"] == "HIT"
    assert (await get(gw, "/static/a.js?v=1", **{"X-Tenant": "b"}))[0].headers["x-clef-cache"] == "MISS"


async def test_head_is_served_from_a_stored_get_and_never_stored_itself(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    resp, _ = await get(gw, "/static/h.js", method="HEAD")
    assert resp.headers["x-clef-cache"] == "MISS"
    assert (await get(gw, "/static/h.js"))[0].headers["x-clef-cache"] == "MISS"  # the HEAD stored nothing
    resp, body = await get(gw, "/static/h.js", method="HEAD")
    assert (resp.status, resp.headers["x-clef-cache"], body) == (200, "HIT", b"")
    assert resp.headers["Content-Length"] == str(len(Asset().body))
    assert [s.method for s in upstream.seen] == ["HEAD", "GET"]


async def test_a_matching_conditional_request_is_answered_304_from_the_store(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    lm = "Sun, 01 Nov 2026 10:00:00 GMT"
    upstream.assets["/static/a.js"] = Asset(last_modified=lm)
    await get(gw, "/static/a.js")
    resp, body = await get(gw, "/static/a.js", **{"If-None-Match": 'W/"v0", "v1"'})
    assert (resp.status, resp.headers["x-clef-cache"], body, resp.headers["ETag"]) == (304, "HIT", b"", '"v1"')
    resp, _ = await get(gw, "/static/a.js", **{"If-Modified-Since": lm})
    assert resp.status == 304
    resp, body = await get(gw, "/static/a.js", **{"If-None-Match": '"v0"'})
    assert (resp.status, body) == (200, Asset().body)
    assert upstream.hits("/static/a.js") == 1
    # a miss asks the origin for the whole response, never the client's conditional one
    resp, body = await get(gw, "/static/b.js", **{"If-None-Match": '"v1"'})
    assert (resp.status, body) == (200, Asset().body) and upstream.seen[-1].header("If-None-Match") is None


async def test_fifty_concurrent_misses_make_one_origin_request(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    upstream.gate = asyncio.Event()
    edge = gw.app[EDGE]
    tasks = [asyncio.ensure_future(get(gw, "/static/hot.js")) for _ in range(50)]
    await until(lambda: upstream.hits("/static/hot.js") == 1 and edge.stats.coalesced == 49)
    upstream.gate.set()
    results = await asyncio.gather(*tasks)
    assert upstream.hits("/static/hot.js") == 1
    assert all(resp.status == 200 and body == Asset().body for resp, body in results)
    statuses = sorted(resp.headers["x-clef-cache"] for resp, _ in results)
    assert statuses == ["HIT"] * 49 + ["MISS"]


async def test_waiters_go_to_the_origin_themselves_when_the_response_is_not_storable(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    upstream.assets["/static/live.js"] = Asset(cache_control="no-store")
    upstream.gate = asyncio.Event()
    edge = gw.app[EDGE]
    tasks = [asyncio.ensure_future(get(gw, "/static/live.js")) for _ in range(10)]
    await until(lambda: upstream.hits("/static/live.js") == 1 and edge.stats.coalesced == 9)
    upstream.gate.set()
    results = await asyncio.gather(*tasks)
    assert all(resp.status == 200 and resp.headers["x-clef-cache"] == "MISS" for resp, _ in results)
    assert upstream.hits("/static/live.js") == 10


@pytest.mark.parametrize("failure", ["503", "unreachable"])
async def test_stale_if_error_serves_the_stale_copy_within_its_window(make_gateway, upstream, clock, failure):
    gw = await cache_gateway(make_gateway, clock, stale_if_error_s=60.0)
    upstream.assets["/static/a.js"] = Asset(cache_control="max-age=10")
    await get(gw, "/static/a.js")
    clock.advance(30)
    if failure == "503":
        upstream.fail = 503
    else:
        await upstream.server.close()
    resp, body = await get(gw, "/static/a.js")
    assert (resp.status, resp.headers["x-clef-cache"], body) == (200, "STALE", Asset().body)
    assert resp.headers["Age"] == "30"
    clock.advance(41)  # 71 s old: past max-age plus the window
    resp, _ = await get(gw, "/static/a.js")
    assert resp.status == (503 if failure == "503" else 502) and resp.headers.get("x-clef-cache") != "STALE"


async def test_stale_if_error_from_the_origin_and_a_timeout(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock, {"origin": {"timeout_s": 0.2}})  # window from the origin only
    upstream.assets["/static/a.js"] = Asset(cache_control="max-age=10, stale-if-error=20", etag=None)
    await get(gw, "/static/a.js")
    clock.advance(25)
    upstream.gate = asyncio.Event()  # the origin goes silent: a 504 the stale copy stands in for
    resp, body = await get(gw, "/static/a.js")
    assert (resp.status, resp.headers["x-clef-cache"], body) == (200, "STALE", Asset().body)
    upstream.gate.set()


async def test_must_revalidate_is_never_served_stale_without_the_origins_leave(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock, stale_if_error_s=60.0)
    upstream.assets["/static/a.js"] = Asset(cache_control="max-age=10, must-revalidate")
    await get(gw, "/static/a.js")
    clock.advance(11)
    upstream.fail = 503
    assert (await get(gw, "/static/a.js"))[0].status == 503


async def test_purge_by_url_and_by_prefix(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    for target in ("/static/a.js", "/static/b.js?x=1&y=2", "/img/c.png"):
        await get(gw, target)
    purged = await gw.admin.post("/v1/cache/purge", json={"url": "/static/b.js?y=2&x=1"})
    assert (purged.status, await purged.json()) == (200, {"purged": 1})
    assert (await get(gw, "/static/b.js?x=1&y=2"))[0].headers["x-clef-cache"] == "MISS"
    purged = await gw.admin.post("/v1/cache/purge", json={"prefix": "/static/"})
    assert await purged.json() == {"purged": 2}
    assert (await get(gw, "/static/a.js"))[0].headers["x-clef-cache"] == "MISS"
    assert (await get(gw, "/img/c.png"))[0].headers["x-clef-cache"] == "HIT"


async def test_a_purge_during_a_fill_keeps_its_response_out(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    upstream.gate = asyncio.Event()
    task = asyncio.ensure_future(get(gw, "/static/a.js"))
    await until(lambda: upstream.hits("/static/a.js") == 1)
    await gw.admin.post("/v1/cache/purge", json={"prefix": "/static/"})
    upstream.gate.set()
    assert (await task)[0].headers["x-clef-cache"] == "MISS"
    assert (await get(gw, "/static/a.js"))[0].headers["x-clef-cache"] == "MISS"


@pytest.mark.parametrize(
    "body, status",
    [({}, 422), ({"url": "/a", "prefix": "/b"}, 422), ({"prefix": "static"}, 422), ({"host": "/a"}, 422), ([], 400)],
)
async def test_purge_refuses_a_bad_request(make_gateway, body, status):
    gw = await make_gateway(model=FakeModel())
    resp = await gw.admin.post("/v1/cache/purge", json=body)
    assert resp.status == status and "error" in await resp.json()


async def test_memory_is_bounded_least_recently_used_out_first(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock, max_bytes=50_000, max_object_bytes=20_000)
    for name in "abc":
        upstream.assets[f"/static/{name}.js"] = Asset(body=name.encode() * 20_000)
    edge = gw.app[EDGE]
    await get(gw, "/static/a.js")
    await get(gw, "/static/b.js")
    await get(gw, "/static/a.js")  # a is now the most recently used
    await get(gw, "/static/c.js")  # three do not fit: b goes
    assert edge.stats.evictions == 1 and edge.bytes <= 50_000
    assert (await get(gw, "/static/a.js"))[0].headers["x-clef-cache"] == "HIT"
    assert (await get(gw, "/static/c.js"))[0].headers["x-clef-cache"] == "HIT"
    assert (await get(gw, "/static/b.js"))[0].headers["x-clef-cache"] == "MISS"


async def test_a_response_over_the_object_limit_streams_through_unstored(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock, max_object_bytes=MiB)
    for _ in range(2):
        resp, body = await get(gw, f"/download/{3 * MiB}")
        assert resp.headers["x-clef-cache"] == "MISS"
        assert len(body) == 3 * MiB and hashlib.sha256(body).hexdigest() == resp.headers["X-Sha256"]
    assert upstream.hits(f"/download/{3 * MiB}") == 2 and len(gw.app[EDGE]) == 0


@pytest.mark.parametrize(
    "headers", [{"Authorization": "Bearer alice"}, {"Cookie": "session=alice"}, {"Proxy-Authorization": "Basic x"}]
)
async def test_a_credentialed_request_is_never_served_nor_fills_from_the_cache(make_gateway, upstream, clock, headers):
    gw = await cache_gateway(make_gateway, clock)
    resp, _ = await get(gw, "/static/me.js", **headers)
    assert resp.headers["x-clef-cache"] == "BYPASS"
    assert (await get(gw, "/static/me.js"))[0].headers["x-clef-cache"] == "MISS"  # the credentialed one stored nothing
    resp, _ = await get(gw, "/static/me.js", **headers)
    assert resp.headers["x-clef-cache"] == "BYPASS"  # nor is it served the anonymous copy
    assert upstream.hits("/static/me.js") == 3
    name = next(iter(headers))
    if name != "Proxy-Authorization":  # hop-by-hop: never forwarded anyway
        assert upstream.seen[-1].header(name) == headers[name]


async def test_cookies_can_be_ignored_under_static_prefixes(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock, ignore_cookies_under=["/static/"])
    resp, _ = await get(gw, "/static/a.js", Cookie="session=alice")
    assert resp.headers["x-clef-cache"] == "MISS" and upstream.seen[-1].header("Cookie") is None
    assert (await get(gw, "/static/a.js", Cookie="session=bob"))[0].headers["x-clef-cache"] == "HIT"
    assert (await get(gw, "/api/me", Cookie="session=bob"))[0].headers["x-clef-cache"] == "BYPASS"


@pytest.mark.parametrize(
    "method, scores, status", [("GET", {"allow": 1.0}, "BYPASS"), ("POST", {"cache": 1.0}, "BYPASS"),
                               ("GET", {"block": 1.0}, "BYPASS")],
)  # fmt: skip
async def test_other_decisions_and_unsafe_methods_bypass(make_gateway, upstream, clock, method, scores, status):
    # the block names an attack class: a model block of a page asset as a mere probe would be the rules' to decide
    gw = await make_gateway(model=FakeModel(scores=scores, features=("xss",)), clock=clock)
    for _ in range(2):
        resp, _ = await get(gw, "/static/a.js", method=method)
        assert resp.headers["x-clef-cache"] == status
    assert upstream.hits("/static/a.js") == (0 if "block" in scores else 2)


async def test_an_origins_own_x_clef_cache_is_replaced(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock)
    upstream.assets["/static/a.js"] = Asset(headers={"x-clef-cache": "HIT"}, cache_control="no-store")
    resp, _ = await get(gw, "/static/a.js")
    assert resp.headers.getall("x-clef-cache") == ["MISS"]


async def test_the_cache_can_be_turned_off(make_gateway, upstream, clock):
    gw = await cache_gateway(make_gateway, clock, max_bytes=0)
    for _ in range(2):
        assert (await get(gw, "/static/a.js"))[0].headers["x-clef-cache"] == "BYPASS"
    assert upstream.hits("/static/a.js") == 2


async def until(condition, turns: int = 100_000) -> None:
    """Yield to the event loop (never the wall clock) until `condition` holds."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")
