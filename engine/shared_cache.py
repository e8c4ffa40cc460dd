"""The shared decision cache: a second level in Redis behind the in-process DecisionCache.

With many replicas, each one's local cache learns the same verdicts again; Redis lets a verdict decided
by one replica answer the same request on every other. It is an optimisation, never a dependency:

- a read waits at most `timeout_ms`, then the request goes on to the model as on a miss;
- writes are fire-and-forget tasks, at most MAX_WRITES in flight (beyond, they are dropped and counted),
  so a response never waits for Redis;
- after FAILURES_TO_SKIP consecutive failures (errors or timeouts) Redis is skipped for SKIP_S seconds of
  the injected clock, then one trial call is let through: a dead Redis costs nothing per request.

Values are the verdict's JSON plus its scores, under `prefix` + the DecisionCache key (canonical text and
model version), expiring after the decision cache's TTL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeout

from engine.verdict import Source, Verdict

log = logging.getLogger("clef.engine")

FAILURES_TO_SKIP = 3  # consecutive failures before Redis is skipped
SKIP_S = 10.0  # how long it is skipped, before one trial call
MAX_WRITES = 64  # writes in flight at most; a slow Redis must not pile up tasks
MAX_CONNECTIONS = 128  # per replica; reads beyond it wait for a connection, within their timeout
FAILED = object()  # what _call returns when Redis was skipped or failed: neither a hit nor a miss


@dataclass
class SharedCacheStats:
    """Counters for the metrics: plain ints, only touched from the event loop."""

    hits: int = 0
    misses: int = 0
    errors: int = 0  # Redis answered with an error, or the connection failed
    timeouts: int = 0  # no answer within timeout_ms
    skipped: int = 0  # reads and writes not attempted while Redis was being skipped
    writes: int = 0  # verdicts stored
    dropped: int = 0  # writes not attempted because MAX_WRITES were already in flight
    invalid: int = 0  # values that were not a verdict (another version's, or garbage): read as misses


class SharedCache:
    def __init__(
        self,
        url: str,
        ttl_s: float,
        timeout_ms: float = 10.0,
        prefix: str = "clef:decision:",
        clock: Callable[[], float] | None = None,
        failures_to_skip: int = FAILURES_TO_SKIP,
        skip_s: float = SKIP_S,
    ):
        self.url = url
        self.prefix = prefix
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.timeout_s = timeout_ms / 1000.0
        self.clock = clock or time.monotonic
        self.failures_to_skip = failures_to_skip
        self.skip_s = skip_s
        self.stats = SharedCacheStats()
        self.failures = 0  # consecutive
        self.last_error: str | None = None
        self._skip_until = 0.0
        self._trial = False
        self._writes: set[asyncio.Task] = set()
        # No retries: one round trip per call, within our timeout (redis-py would back off and try again).
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=MAX_CONNECTIONS,
            socket_connect_timeout=max(self.timeout_s, 0.1),
            socket_timeout=max(self.timeout_s, 0.1),
            retry=Retry(NoBackoff(), 0),
        )
        self.client = Redis(connection_pool=pool)

    async def get(self, key: str) -> Verdict | None:
        """The stored verdict (source: cache), or None on a miss, a failure or while Redis is skipped."""
        raw = await self._call(lambda: self.client.get(self.prefix + key))
        if raw is FAILED:
            return None
        if raw is None:
            self.stats.misses += 1
            return None
        try:
            verdict = decode(raw)
        except (ValueError, TypeError, KeyError) as err:
            self.stats.invalid += 1
            log.warning("shared cache: ignoring a value that is not a verdict: %s", err)
            return None
        self.stats.hits += 1
        return verdict

    def put(self, key: str, verdict: Verdict) -> None:
        """Store in the background: the caller never waits."""
        if self.skipping:  # no task at all while Redis is known to be down
            self.stats.skipped += 1
            return
        if len(self._writes) >= MAX_WRITES:
            self.stats.dropped += 1
            return
        value = encode(verdict)
        task = asyncio.get_running_loop().create_task(self._write(self.prefix + key, value))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, key: str, value: bytes) -> None:
        if await self._call(lambda: self.client.set(key, value, px=self.ttl_ms)) is not FAILED:
            self.stats.writes += 1

    async def ping(self) -> bool:
        """One round trip, at startup: health says `down` from the start when Redis is unreachable."""
        return await self._call(self.client.ping) is not FAILED

    async def _call(self, command: Callable[[], Any]) -> Any:
        if not self._allowed():
            self.stats.skipped += 1
            return FAILED
        trial = self._trial
        try:
            result = await asyncio.wait_for(command(), self.timeout_s)
        except (asyncio.TimeoutError, RedisTimeout):
            self.stats.timeouts += 1
            self._failed(f"no answer within {self.timeout_s * 1000:g} ms")
            return FAILED
        except (RedisError, OSError) as err:
            self.stats.errors += 1
            self._failed(f"{type(err).__name__}: {err}")
            return FAILED
        except asyncio.CancelledError:  # the request went away: says nothing about Redis
            if trial:
                self._trial = False
            raise
        if self.last_error is not None:
            log.info("shared cache %s: answering again", self.url)
        self.failures, self._trial, self.last_error = 0, False, None
        return result

    @property
    def skipping(self) -> bool:
        return self.failures >= self.failures_to_skip and self.clock() < self._skip_until

    def _allowed(self) -> bool:
        if self.failures < self.failures_to_skip:
            return True
        if self._trial or self.clock() < self._skip_until:
            return False
        self._trial = True  # the cool-down is over: one call finds out whether Redis is back
        return True

    def _failed(self, reason: str) -> None:
        self._trial = False
        self.failures += 1
        if self.last_error is None:
            log.warning("shared cache %s: %s; deciding without it", self.url, reason)
        self.last_error = reason
        if self.failures >= self.failures_to_skip:
            self._skip_until = self.clock() + self.skip_s

    def health(self) -> str:
        """`ok`, or `down: <the last failure>` (and for how long it is skipped)."""
        if self.last_error is None:
            return "ok"
        left = f" (skipped for the next {self._skip_until - self.clock():.0f} s)" if self.skipping else ""
        return f"down: {self.last_error}{left}"

    async def flush(self) -> None:
        """Wait for the writes in flight (each is bounded by the timeout): at shutdown, and in tests."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    async def close(self) -> None:
        await self.flush()
        await self.client.aclose()


def encode(verdict: Verdict) -> bytes:
    # the full confidence, not to_json()'s rounded one: a hit here must equal a hit in the local cache
    doc = {**verdict.to_json(), "confidence": float(verdict.confidence), "scores": [float(s) for s in verdict.scores]}
    return json.dumps(doc, separators=(",", ":")).encode()


def decode(raw: bytes) -> Verdict:
    doc = json.loads(raw)
    return Verdict(
        label=doc["label"],
        confidence=float(doc["confidence"]),
        features=tuple(str(f) for f in doc["feature"]),
        source=Source.CACHE,
        model=str(doc["model"]),
        truncated=bool(doc.get("truncated", False)),
        scores=tuple(float(s) for s in doc.get("scores", ())),
    )
