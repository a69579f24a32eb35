"""Convergence timed against a budget: passes with its time, fails with the last thing seen, gives up early."""

from __future__ import annotations

from operatorlab.grading import converges, within


class Clock:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_converges_returns_the_time_it_took_and_the_value() -> None:
    clock = Clock()
    outcome = converges(lambda: clock.now >= 1.0 and "done", budget=5, interval=0.5, clock=clock, sleep=clock.sleep)
    assert (outcome.ok, outcome.seconds, outcome.last) == (True, 1.0, "done")


def test_an_exception_is_not_yet_and_is_kept_as_evidence() -> None:
    clock = Clock()

    def missing() -> None:
        raise LookupError("404 not found")

    outcome = converges(missing, budget=2, interval=0.5, clock=clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.seconds >= 2 and isinstance(outcome.last, LookupError)


def test_give_up_ends_the_wait_before_the_budget() -> None:
    clock = Clock()
    outcome = converges(lambda: False, budget=30, interval=0.5, clock=clock, sleep=clock.sleep,
                        give_up=lambda: clock.now >= 1.0)
    assert not outcome.ok and outcome.seconds == 1.0


def test_within_says_passed_stopped_or_ran_out_in_words() -> None:
    assert within("holds", lambda: True, budget=1).message.startswith("converged in")
    assert "stopped after" in within("gave up", lambda: False, budget=10, give_up=lambda: True).message
    assert within("never", lambda: False, budget=0.2, interval=0.05).message.startswith("not within 0 s")
