"""OriginHealth on the fake clock: failures in a row mark the origin down for a while, then one try."""

from __future__ import annotations

from gateway.origin_health import OriginHealth


def test_down_after_failures_in_a_row_then_one_try(clock):
    h = OriginHealth(fail_threshold=3, down_for_s=10, clock=clock)
    h.failure("refused")
    h.failure("refused")
    h.success()  # the count is of failures in a row
    for _ in range(2):
        h.failure("refused")
    assert not h.down()
    h.failure("timeout")
    assert h.down() and h.report() == {"state": "down", "failures": 3, "retry_in_s": 10.0}
    clock.advance(9.9)
    assert h.down()
    clock.advance(0.1)
    assert not h.down()  # one request may try
    h.failure("refused")
    assert h.down() and h.marked_down == 2  # and a failure marks it down again at once
    clock.advance(10)
    h.success()
    assert h.report() == {"state": "up", "failures": 0}


def test_threshold_zero_never_marks_it_down(clock):
    h = OriginHealth(fail_threshold=0, clock=clock)
    for _ in range(100):
        h.failure("refused")
    assert not h.down() and h.failures == 100


def test_a_reload_keeps_the_count_unless_the_origin_changed(clock):
    h = OriginHealth(fail_threshold=2, down_for_s=5, clock=clock)
    h.failure("refused")
    h.failure("refused")
    h.configure(2, 30)
    assert h.down() and h.retry_in() == 5.0
    h.configure(2, 30, new_origin=True)
    assert not h.down() and h.failures == 0
