"""Two gateways (two replicas) sharing decisions through a real Redis, configured by `cache.redis.*`.

What a decision by one replica's model does for the other (x-clef-source: cache, its model never asked),
and what a Redis that dies does to both: requests still answered, /health still 200 naming it down.
"""

from __future__ import annotations

from tests.factories import FakeModel
from tests.redis_server import free_port


async def test_a_decision_made_by_one_replica_is_a_cache_hit_on_the_other(make_gateway, upstream, redis_server, clock):
    raw = {"cache": {"redis": {"url": redis_server.url, "timeout_ms": 500, "prefix": "gw:"}}}
    a = await make_gateway(raw, model=FakeModel({"origin": 0.9}), clock=clock)
    b = await make_gateway(raw, model=FakeModel({"origin": 0.9}), clock=clock)
    assert (await a.proxy.get("/products?page=2")).status == 200
    await a.decider.shared.flush()
    assert (await b.proxy.get("/products?page=2")).status == 200
    assert [s.header("x-clef-source") for s in upstream.seen] == ["model", "cache"]
    assert [s.header("x-clef-decision") for s in upstream.seen] == ["origin", "origin"]
    assert b.decider.model.calls == 0 and b.decider.shared.stats.hits == 1
    health = await (await b.admin.get("/health")).json()
    assert health["shared_cache"] == "ok"


async def test_a_dead_redis_leaves_the_gateway_answering_and_healthy(make_gateway, upstream, redis_server, clock):
    raw = {"cache": {"redis": {"url": redis_server.url, "timeout_ms": 50}}}
    gw = await make_gateway(raw, model=FakeModel({"origin": 0.9}), clock=clock)
    assert (await gw.proxy.get("/a")).status == 200
    redis_server.stop()
    for n in range(5):
        assert (await gw.proxy.get(f"/b{n}")).status == 200
    assert {s.header("x-clef-source") for s in upstream.seen} == {"model"}
    resp = await gw.admin.get("/health")
    health = await resp.json()
    assert resp.status == 200 and health["status"] == "ok"
    assert health["shared_cache"].startswith("down: ") and gw.decider.shared.stats.errors >= 3


async def test_health_names_a_redis_unreachable_at_start(make_gateway):
    raw = {"cache": {"redis": {"url": f"redis://127.0.0.1:{free_port()}/0"}}}
    gw = await make_gateway(raw, model=FakeModel())
    resp = await gw.admin.get("/health")  # before any request: the start-up ping found it
    health = await resp.json()
    assert resp.status == 200 and health["shared_cache"].startswith("down: ConnectionError")
