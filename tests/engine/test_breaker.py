"""engine/breaker.py: opens after consecutive failures, half-opens after the reset time, one trial."""

from engine.breaker import Breaker


def test_opens_after_consecutive_failures(clock):
    b = Breaker(failures_to_open=3, reset_after_s=30, clock=clock)
    for _ in range(2):
        assert b.allows()
        b.record_failure()
    b.record_success()  # a success resets the count: failures must be consecutive
    for _ in range(3):
        assert b.allows()
        b.record_failure()
    assert b.state == "open" and not b.allows()
    assert b.opened == 1


def test_half_open_lets_one_trial_through_then_closes(clock):
    b = Breaker(failures_to_open=1, reset_after_s=30, clock=clock)
    b.record_failure()
    clock.advance(29.9)
    assert not b.allows()
    clock.advance(0.2)
    assert b.state == "half-open"
    assert b.allows()  # the trial
    assert not b.allows()  # only one at a time
    b.record_success()
    assert b.state == "closed" and b.allows()


def test_failed_trial_opens_again_for_a_full_period(clock):
    b = Breaker(failures_to_open=1, reset_after_s=10, clock=clock)
    b.record_failure()
    clock.advance(10)
    assert b.allows()
    b.record_failure()
    assert b.state == "open"
    clock.advance(9)
    assert not b.allows()
    clock.advance(1)
    assert b.allows()
