"""The circuit breaker around the model (pybreaker), driven by an injected clock.

Closed: every request may call the model. After `failures_to_open` consecutive failures (errors or
timeouts) it opens: requests go straight to the rules for `reset_after_s`. Then one trial call is let
through (half-open): success closes it, failure opens it again.

pybreaker times the open state with the wall clock; the storage below translates the injected clock into
the `opened_at` that pybreaker compares against, so tests advance a fake clock instead of sleeping.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Callable

import pybreaker


class _ClockStorage(pybreaker.CircuitMemoryStorage):
    def __init__(self, clock: Callable[[], float]):
        super().__init__(pybreaker.STATE_CLOSED)
        self._clock = clock
        self._opened_clock: float | None = None

    @property
    def opened_at(self) -> datetime | None:
        if self._opened_clock is None:
            return None
        return datetime.now(timezone.utc) - timedelta(seconds=self._clock() - self._opened_clock)

    @opened_at.setter
    def opened_at(self, _wall: datetime) -> None:
        self._opened_clock = self._clock()


class _Failure(Exception):
    pass


def _fail() -> None:
    raise _Failure()


def _ok() -> None:
    return None


class Breaker:
    def __init__(self, failures_to_open: int = 5, reset_after_s: float = 30.0, clock: Callable[[], float] | None = None):
        self._clock = clock or time.monotonic
        self._storage = _ClockStorage(self._clock)
        self._cb = pybreaker.CircuitBreaker(
            fail_max=failures_to_open, reset_timeout=reset_after_s, state_storage=self._storage
        )
        self._trial = False  # a half-open trial call is in flight
        self.opened = 0  # times it opened, for metrics

    @property
    def state(self) -> str:
        """closed, open or half-open."""
        state = self._cb.current_state
        if state == pybreaker.STATE_OPEN and self._elapsed() >= self._cb.reset_timeout:
            return pybreaker.STATE_HALF_OPEN
        return state

    def _elapsed(self) -> float:
        opened = self._storage._opened_clock
        return float("inf") if opened is None else self._clock() - opened

    def allows(self) -> bool:
        """May this request call the model? In half-open, only one trial at a time."""
        state = self.state
        if state == pybreaker.STATE_CLOSED:
            return True
        if state == pybreaker.STATE_HALF_OPEN and not self._trial:
            if self._cb.current_state == pybreaker.STATE_OPEN:
                self._cb.half_open()
            self._trial = True
            return True
        return False

    def record_success(self) -> None:
        self._trial = False
        try:
            self._cb.call(_ok)
        except pybreaker.CircuitBreakerError:
            pass

    def record_failure(self) -> None:
        self._trial = False
        before = self._cb.current_state
        try:
            self._cb.call(_fail)
        except (_Failure, pybreaker.CircuitBreakerError):
            pass
        if before != pybreaker.STATE_OPEN and self._cb.current_state == pybreaker.STATE_OPEN:
            self.opened += 1

    @property
    def failures(self) -> int:
        return self._cb.fail_counter
