"""engine/cache.py: TTL expiry on the injected clock, bounded size, model version in the key."""

from engine.cache import DecisionCache
from engine.features import Features
from engine.verdict import Source, Verdict

V = Verdict("allow", 0.9, source=Source.MODEL, model="m@1")


def test_hit_then_expiry(clock):
    c = DecisionCache(ttl_s=600, max_entries=10, clock=clock)
    c.put("k", V)
    assert c.get("k") == V
    clock.advance(599)
    assert c.get("k") == V
    clock.advance(2)
    assert c.get("k") is None
    assert (c.hits, c.misses) == (2, 1)


def test_bounded_by_entries(clock):
    c = DecisionCache(ttl_s=600, max_entries=3, clock=clock)
    for i in range(10):
        c.put(str(i), V)
    assert len(c) == 3


def test_disabled_when_ttl_is_zero(clock):
    c = DecisionCache(ttl_s=0, max_entries=3, clock=clock)
    c.put("k", V)
    assert c.get("k") is None


def test_key_covers_model_version_and_what_the_model_sees():
    f = Features.build("GET", "/a", "x=1")
    assert f.cache_key("m@1") != f.cache_key("m@2")
    assert f.cache_key("m@1") != Features.build("GET", "/a", "x=2").cache_key("m@1")
    # what the model does not see (a quiet header, header order) does not split the cache
    g = Features.build("GET", "/a", "x=1", {"Accept": "text/html"})
    assert f.cache_key("m@1") == g.cache_key("m@1")
