"""Shadow evaluation: a second bundle decides the live traffic beside the model in force, off its path.

`Shadow.submit(features, live, done)` is called after a request was decided (the gateway calls it once
the request is answered). It returns at once: the shadow's decision is made in a task of its own, on the
shadow model's own batcher and threads, and handed to `done(verdict)` (None when it was dropped or
failed). Nothing the shadow does reaches the request: its verdict is only counted, journaled and logged.
At most `max_pending` requests wait for the shadow; more are dropped and counted, so a slow or busy
shadow model costs a bounded amount of memory and never queues up behind live traffic. Its verdicts are
cached by canonical text like the live model's, so repeated requests cost it nothing.

Counters for the metrics: `agreement[(live label, shadow label)]`, `dropped`, `failed`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any, Callable

from engine.cache import DecisionCache
from engine.errors import EngineError
from engine.features import Features
from engine.verdict import Verdict

log = logging.getLogger("clef.shadow")


class Shadow:
    def __init__(self, runner: Any, max_pending: int = 64, cache_ttl_s: float = 600.0,
                 cache_max_entries: int = 10_000, clock: Callable[[], float] | None = None):  # fmt: skip
        self.runner = runner  # engine.decide.ModelRunner (or a fake with predict/info/close)
        self.id = runner.id
        self.max_pending = max_pending
        self.cache = DecisionCache(cache_ttl_s, cache_max_entries, clock=clock)
        self.pending = 0
        self.agreement: Counter[tuple[str, str]] = Counter()
        self.dropped = 0
        self.failed = 0
        self._tasks: set[asyncio.Task] = set()

    def info(self) -> dict[str, Any]:
        return self.runner.info()

    def submit(self, features: Features, live: Verdict, done: Callable[[Verdict | None], None] | None = None) -> bool:
        """Decide `features` with the shadow model in the background; False when dropped (busy)."""
        if self.pending >= self.max_pending:
            self.dropped += 1
            if done is not None:
                done(None)
            return False
        self.pending += 1
        task = asyncio.get_running_loop().create_task(self._decide(features, live, done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _decide(self, features: Features, live: Verdict, done: Callable[[Verdict | None], None] | None) -> None:
        verdict = None
        try:
            key = features.cache_key(self.id)
            verdict = self.cache.get(key)
            if verdict is None:
                verdict = await self.runner.predict(features)
                self.cache.put(key, verdict)
        except EngineError:  # its queue was full, or it failed: the live decision stands either way
            self.failed += 1
        finally:
            self.pending -= 1
        if verdict is not None:
            self.agreement[(live.label, verdict.label)] += 1
        if done is not None:
            try:
                done(verdict)
            except Exception:  # a journal that fails must not fail the shadow
                log.exception("shadow: the hand-off of a decision failed")

    async def drain(self) -> None:
        """Wait for the decisions in flight (tests, and a retiring engine that lets them finish)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.runner.close()
