"""The TTL decision cache: model verdicts keyed by the canonical text and the model version.

Only model verdicts go in (rules and overrides are cheap and may change on reload). Memory is bounded by
the entry limit; time comes from the injected clock so tests advance it instead of sleeping.
"""

from __future__ import annotations

from typing import Callable

from cachetools import TTLCache

from engine.verdict import Verdict


class DecisionCache:
    def __init__(self, ttl_s: float = 600.0, max_entries: int = 100_000, clock: Callable[[], float] | None = None):
        import time

        self.enabled = ttl_s > 0 and max_entries > 0
        self._cache: TTLCache = TTLCache(maxsize=max(1, max_entries), ttl=max(ttl_s, 1e-9), timer=clock or time.monotonic)
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Verdict | None:
        if not self.enabled:
            return None
        hit = self._cache.get(key)
        if hit is None:
            self.misses += 1
        else:
            self.hits += 1
        return hit

    def put(self, key: str, verdict: Verdict) -> None:
        if self.enabled:
            self._cache[key] = verdict

    def clear(self) -> None:
        self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)
