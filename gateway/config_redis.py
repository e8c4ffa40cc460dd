"""Config of the shared decision cache, `cache.redis`: a frozen dataclass checked at start.

Kept apart from config.py, as the edge cache's keys are (config_cache.py), so that module stays one
screenful; config.py nests RedisCacheConfig under `cache` and hands its keys to EngineSettings. The engine
uses it in engine/shared_cache.py; an empty URL leaves it off.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.schema import check

SCHEMES = ("redis://", "rediss://", "unix://")


@dataclass(frozen=True)
class RedisCacheConfig:
    url: str = ""  # e.g. redis://redis:6379/0; "" (the default): no shared cache, each replica its own
    timeout_ms: float = 10.0  # longest wait for Redis per request; past it the request goes on without it
    prefix: str = "clef:decision:"  # in front of every key, to share a Redis with other users

    def __post_init__(self) -> None:
        ok = not self.url or self.url.startswith(SCHEMES)
        check(ok, "url", f"must be empty or start with {', '.join(SCHEMES)}", self.url)
        # past a second it is no longer a cache lookup but a stall: the model itself takes milliseconds
        check(0 < self.timeout_ms <= 1000, "timeout_ms", "must be > 0 and <= 1000", self.timeout_ms)

    @property
    def enabled(self) -> bool:
        return bool(self.url)
