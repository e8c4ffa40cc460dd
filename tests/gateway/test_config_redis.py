"""gateway/config_redis.py: the `cache.redis` keys, their checks, and how they reach the engine."""

from __future__ import annotations

import pytest

from gateway import config as configs
from gateway.errors import ConfigError


def load(raw, env=None):
    return configs.from_dict(raw, env=env or {})


def test_off_by_default():
    c = load({})
    assert not c.cache.redis.enabled
    s = c.engine_settings()
    assert (s.shared_cache_url, s.shared_cache_timeout_ms, s.shared_cache_prefix) == ("", 10.0, "clef:decision:")


def test_keys_reach_the_engine_settings():
    c = load({"cache": {"ttl_s": 30, "redis": {"url": "redis://redis:6379/2", "timeout_ms": 5, "prefix": "p:"}}})
    s = c.engine_settings()
    assert (s.shared_cache_url, s.shared_cache_timeout_ms, s.shared_cache_prefix) == ("redis://redis:6379/2", 5.0, "p:")
    assert s.cache_ttl_s == 30.0  # the shared entries expire with the local ones


def test_url_from_the_environment():
    c = load({}, env={"CLEF_REDIS_URL": "rediss://cache.internal:6380/0"})
    assert c.cache.redis.url == "rediss://cache.internal:6380/0" and c.cache.redis.enabled


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"url": "http://redis:6379"}, r"^cache\.redis\.url: must be empty or start with redis://"),
        ({"url": 6379}, r"^cache\.redis\.url: must be a string"),
        ({"timeout_ms": 0}, r"^cache\.redis\.timeout_ms: must be > 0 and <= 1000, got 0"),
        ({"timeout_ms": 5000}, r"^cache\.redis\.timeout_ms: must be > 0 and <= 1000"),
        ({"db": 1}, r"^cache\.redis\.db: unknown key \(expected one of: url, timeout_ms, prefix\)"),
    ],
)
def test_bad_values_name_the_full_key(raw, message):
    with pytest.raises(ConfigError, match=message):
        load({"cache": {"redis": raw}})


def test_bad_environment_value_names_the_variable():
    with pytest.raises(ConfigError, match=r"^cache\.redis\.url \(from CLEF_REDIS_URL\): must be empty"):
        load({}, env={"CLEF_REDIS_URL": "redis.internal:6379"})
