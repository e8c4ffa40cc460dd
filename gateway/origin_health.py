"""Passive origin health: the origin's own failures, counted as requests meet them, mark it down a while.

Input: what act saw of each attempt to reach the origin: a failure (unreachable, timed out, reset before
or during its response) or a success (it answered, whatever the status: a 500 is the application's
answer, not a dead origin; nginx's max_fails counts the same way). Output: `down()`, asked before each
attempt, and `report()` for /health and the metrics.

After `fail_threshold` failures in a row the origin is down for `down_for_s` (by the injected clock):
requests answer 502 at once instead of each waiting for a connect timeout, or a stale copy from the edge
cache where stale-if-error allows. Then the next request tries again; one more failure marks it down
again at once, a success clears the count. fail_threshold 0 never marks it down.

Short-circuits: nothing itself; act raises UpstreamDown when `down()` says so.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

log = logging.getLogger("clef.gateway")


class OriginHealth:
    def __init__(self, fail_threshold: int = 5, down_for_s: float = 10.0, clock: Callable[[], float] | None = None):
        self.fail_threshold = fail_threshold
        self.down_for_s = down_for_s
        self.clock = clock or time.monotonic
        self.failures = 0  # consecutive
        self.down_until: float | None = None
        self.marked_down = 0  # times, for the metrics

    def configure(self, fail_threshold: int, down_for_s: float, new_origin: bool = False) -> None:
        """A reload's new settings. The count so far stands (an origin does not get better by a reload),
        unless the reload points at another origin: what the old one did says nothing about it."""
        self.fail_threshold, self.down_for_s = fail_threshold, down_for_s
        if new_origin:
            self.failures, self.down_until = 0, None

    def down(self) -> bool:
        if self.down_until is None:
            return False
        if self.clock() < self.down_until:
            return True
        self.down_until = None  # the wait is over: the next request tries the origin
        return False

    def retry_in(self) -> float:
        return 0.0 if self.down_until is None else max(0.0, self.down_until - self.clock())

    def failure(self, reason: str) -> None:
        self.failures += 1
        if self.fail_threshold and self.failures >= self.fail_threshold and self.down_until is None:
            self.down_until = self.clock() + self.down_for_s
            self.marked_down += 1
            log.warning("origin marked down for %gs after %d failures in a row (last: %s)",
                        self.down_for_s, self.failures, reason)  # fmt: skip

    def success(self) -> None:
        if self.failures >= self.fail_threshold > 0:
            log.info("origin answering again after %d failures in a row", self.failures)
        self.failures = 0
        self.down_until = None

    def report(self) -> dict[str, Any]:
        if self.down():
            return {"state": "down", "failures": self.failures, "retry_in_s": round(self.retry_in(), 3)}
        return {"state": "up", "failures": self.failures}
