"""engine/shared_cache.py and its place in Decider: local cache → Redis → model, against a real redis-server.

Two Deciders sharing one Redis stand for two replicas. Faults are real: a Redis never started (connection
refused), one killed mid-run (connections reset), one paused with SIGSTOP (accepts, never answers). Time
that the cool-down counts comes from the fake clock; only Redis timeouts are real time, and the tests
check that no decide() waits longer than the timeout plus MARGIN_S.
"""

from __future__ import annotations

import asyncio
import functools
import time

import pytest
import redis

from engine.decide import Decider, EngineSettings
from engine.features import Features
from engine.shared_cache import FAILURES_TO_SKIP, MAX_WRITES, SKIP_S, SharedCache, decode, encode
from engine.verdict import Source, Verdict
from rules.engine import RuleEngine
from tests.factories import FakeModel
from tests.redis_server import RedisServer, free_port

PAGE = Features.build("GET", "/products", "page=2", {"User-Agent": "Mozilla/5.0"})
SQLI = Features.build("GET", "/", "id=1%27%20OR%201%3D1--")
MARGIN_S = 0.25  # event-loop scheduling on a busy CI machine; a hung Redis would take forever instead


def page(n: int) -> Features:
    return Features.build("GET", f"/products/{n}", "", {"User-Agent": "Mozilla/5.0"})


@functools.cache
def rules() -> RuleEngine:
    return RuleEngine.load(None)  # a second or so: loaded once for the module, it keeps no state per request


@pytest.fixture
async def deciders(clock):
    """make(url, **settings) → a Decider with a FakeModel on that Redis; all closed after the test."""
    made: list[Decider] = []

    def make(url: str, model: FakeModel | None = None, **settings) -> Decider:
        settings = {"timeout_ms": 1000, "shared_cache_url": url, "shared_cache_timeout_ms": 500, **settings}
        d = Decider(model or FakeModel({"cache": 0.8}), rules(), EngineSettings(**settings), clock=clock)
        made.append(d)
        return d

    yield make
    for d in made:
        await d.close()


async def timed_decide(d: Decider, features: Features, limit_s: float) -> Verdict:
    start = time.perf_counter()
    verdict = await asyncio.wait_for(d.decide(features), 5)  # a hang fails the test instead of stalling it
    assert time.perf_counter() - start < limit_s
    return verdict


def test_a_verdict_survives_the_round_trip_whole():
    scores = (0.9, 0.05, 0.03, 0.02)
    v = Verdict("block", 0.91234567, ("sqli", "auth"), Source.MODEL, "clef@3", truncated=True, scores=scores)
    assert decode(encode(v)) == v.from_cache()
    assert decode(encode(v)).source is Source.CACHE


async def test_two_replicas_share_a_verdict(redis_server, deciders, clock):
    a, b = deciders(redis_server.url), deciders(redis_server.url)
    first = await a.decide(PAGE)
    assert first.source is Source.MODEL
    await a.shared.flush()
    second = await b.decide(PAGE)
    assert second.source is Source.CACHE and second == first.from_cache()
    assert b.model.calls == 0 and b.shared.stats.hits == 1
    assert (await b.decide(PAGE)).source is Source.CACHE and b.shared.stats.hits == 1  # now from b's own cache
    key = "clef:decision:" + PAGE.cache_key(a.cache_id)  # the model's id, and the ruleset's (ensemble)
    with redis.Redis.from_url(redis_server.url) as r:
        assert 599_000 < r.pttl(key) <= 600_000  # the decision cache's TTL
    assert a.shared.stats.misses == 1 and a.shared.stats.writes == 1
    assert a.health()["shared_cache"] == "ok" and a.health()["status"] == "ok"


async def test_only_model_verdicts_are_shared(redis_server, deciders):
    d = deciders(redis_server.url, model=FakeModel(error=True), shared_cache_prefix="t:")
    assert (await d.decide(SQLI)).source is Source.RULES
    await d.shared.flush()
    with redis.Redis.from_url(redis_server.url) as r:
        assert r.dbsize() == 0


async def test_a_value_that_is_not_a_verdict_is_a_miss(redis_server, deciders):
    d = deciders(redis_server.url)
    with redis.Redis.from_url(redis_server.url) as r:
        r.set("clef:decision:" + PAGE.cache_key(d.cache_id), b"{not json")
    assert (await d.decide(PAGE)).source is Source.MODEL
    assert d.shared.stats.invalid == 1 and d.shared.failures == 0  # Redis itself is fine


async def test_redis_down_at_start_then_back_after_the_cool_down(deciders, clock):
    server = RedisServer(free_port())  # nothing listens there yet
    d = deciders(server.url, shared_cache_timeout_ms=50)
    await d.start()
    assert d.health()["shared_cache"].startswith("down: ConnectionError")
    assert d.health()["status"] == "ok"  # the gateway decides as well without it
    for n in range(6):
        assert (await timed_decide(d, page(n), 0.05 + MARGIN_S)).source is Source.MODEL
    await d.shared.flush()
    stats = d.shared.stats
    # a write already in flight may fail too; once skipping, Redis is not even tried
    assert FAILURES_TO_SKIP <= stats.errors <= FAILURES_TO_SKIP + 1 and stats.skipped > 0
    errors = stats.errors
    assert (await timed_decide(d, page(6), MARGIN_S)).source is Source.MODEL
    assert stats.errors == errors and "skipped for the next" in d.health()["shared_cache"]
    # still down after the cool-down: one trial call at a time, the others skip
    clock.advance(SKIP_S)
    before = stats.skipped
    await asyncio.gather(d.shared.get("x"), d.shared.get("y"))
    assert stats.errors == errors + 1 and stats.skipped == before + 1
    try:
        server.start()
        clock.advance(SKIP_S)
        assert (await d.decide(page(100))).source is Source.MODEL
        await d.shared.flush()
        assert d.health()["shared_cache"] == "ok" and stats.writes == 1
    finally:
        server.stop()


async def test_redis_killed_mid_run_then_restarted(redis_server, deciders, clock):
    a, b = deciders(redis_server.url, shared_cache_timeout_ms=50), deciders(redis_server.url)
    await a.decide(page(0))
    await a.shared.flush()
    redis_server.stop()
    for n in range(1, 6):
        assert (await timed_decide(a, page(n), 0.05 + MARGIN_S)).source is Source.MODEL
    await a.shared.flush()
    assert a.shared.stats.errors >= FAILURES_TO_SKIP and a.health()["shared_cache"].startswith("down:")
    redis_server.start()  # same port, empty
    assert a.shared.skipping  # still within the cool-down: not used yet
    clock.advance(SKIP_S)
    assert (await a.decide(page(50))).source is Source.MODEL
    await a.shared.flush()
    assert a.health()["shared_cache"] == "ok"
    assert (await b.decide(page(50))).source is Source.CACHE and b.model.calls == 0


async def test_a_hung_redis_costs_at_most_the_timeout(redis_server, deciders, clock):
    d = deciders(redis_server.url, shared_cache_timeout_ms=20)
    redis_server.pause()  # accepts connections, never answers
    try:
        for n in range(8):
            assert (await timed_decide(d, page(n), 0.02 + MARGIN_S)).source is Source.MODEL
        await d.shared.flush()
        stats = d.shared.stats
        assert stats.timeouts >= FAILURES_TO_SKIP and stats.skipped > 0 and stats.hits == 0
        assert d.health()["shared_cache"].startswith("down: no answer within 20 ms")
    finally:
        redis_server.resume()
    clock.advance(SKIP_S)
    assert (await d.decide(page(0))).source is Source.CACHE  # local hit: Redis not even asked
    assert (await d.decide(page(99))).source is Source.MODEL
    await d.shared.flush()
    assert d.health()["shared_cache"] == "ok"


async def test_writes_in_flight_are_bounded(redis_server, clock):
    cache = SharedCache(redis_server.url, ttl_s=60, timeout_ms=20, clock=clock)
    verdict = Verdict("allow", 0.9, model="fake@1")
    redis_server.pause()
    try:
        for n in range(MAX_WRITES + 5):
            cache.put(f"k{n}", verdict)  # returns at once: nothing awaits Redis
        assert cache.stats.dropped == 5
        await cache.flush()
        assert cache.stats.timeouts == MAX_WRITES and cache.stats.writes == 0 and cache.skipping
        cache.put("later", verdict)
        assert cache.stats.skipped == 1 and not cache._writes  # no task while Redis is skipped
    finally:
        redis_server.resume()
        await cache.close()
