"""What labs and exercises grade with: named checks, convergence timed against a budget.

A check grades behaviour, not a snapshot: it makes something happen (runs the learner's
code, deletes a child, kills an operator, forces an API fault) and then asks whether the
world converged, and how fast. :func:`converges` is that question, answered with the
evidence a learner can act on: how long it took, or what the world still looked like
when the budget ran out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """One named property: passed or not, and what to look at (evidence, never the answer)."""

    name: str
    passed: bool
    message: str = ""


@dataclass(frozen=True)
class Convergence:
    """The outcome of :func:`converges`: whether, after how long, and the last value seen."""

    ok: bool
    seconds: float
    last: Any


def converges(
    condition: Callable[[], Any], *, budget: float, interval: float = 0.1, clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep, give_up: Callable[[], bool] = lambda: False,
) -> Convergence:
    """Poll ``condition`` until it is truthy or ``budget`` seconds pass; never raises.

    An exception from ``condition`` counts as "not yet" and is kept as the last value,
    so a check can show it (a 404 while an object is still missing is normal).
    ``give_up`` ends the wait early when nothing can change any more (the learner's
    code raised, the operator exited), so a starter fails in a second, not a budget.
    """
    started = clock()
    last: Any = None
    while not give_up():
        try:
            last = condition()
        except Exception as e:  # noqa: BLE001 - "not yet"; kept as evidence
            last = e
        elapsed = clock() - started
        if last and not isinstance(last, BaseException):
            return Convergence(True, elapsed, last)
        if elapsed >= budget:
            return Convergence(False, elapsed, last)
        sleep(interval)
    return Convergence(False, clock() - started, last)


def within(name: str, condition: Callable[[], Any], *, budget: float, evidence: Callable[[Any], str] = repr,
           interval: float = 0.1, give_up: Callable[[], bool] = lambda: False) -> Check:
    """A :class:`Check` that ``condition`` holds within ``budget`` seconds, with the time or the evidence."""
    outcome = converges(condition, budget=budget, interval=interval, give_up=give_up)
    if outcome.ok:
        return Check(name, True, f"converged in {outcome.seconds:.1f} s (budget {budget:.0f} s)")
    if outcome.seconds < budget:  # gave up: nothing could change any more
        return Check(name, False, f"stopped after {outcome.seconds:.1f} s, as nothing more could change; "
                                  f"last seen: {evidence(outcome.last)}")
    return Check(name, False, f"not within {budget:.0f} s; last seen: {evidence(outcome.last)}")


def word_html(passed: bool) -> str:
    """PASS or FAIL in words, coloured as a courtesy (a browser without an emoji font shows ✅ and ❌ as one box)."""
    colour = "#1a7f37" if passed else "#cf222e"
    return f'<b style="color:{colour}">{"PASS" if passed else "FAIL"}</b>'


def loop_ended(ended: list[BaseException | None], *, returned: str) -> str:
    """Why a learner's loop, run in a thread that records how it ended, is no longer running.

    ``ended`` is empty while it runs, ``[None]`` once it returned (``returned`` says why
    that is wrong), ``[exception]`` once it died.
    """
    if not ended:
        return ""
    if ended[0] is None:
        return returned
    e = ended[0]
    return f"your loop died: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
