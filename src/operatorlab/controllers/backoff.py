"""The reflector's backoff: client-go's ``wait.Backoff`` with ``DelayWithReset``, step for step.

A reflector that fails must not hammer the API server: every time it gives up
on a LIST or WATCH it waits a delay that doubles from 800 ms to a 30 s cap,
with jitter, before it tries again. The numbers and the arithmetic are
client-go's (read in k8s.io/client-go v0.36.3 ``tools/cache/reflector.go`` and
k8s.io/apimachinery v0.36.3 ``pkg/util/wait/backoff.go``):

* ``NewReflectorWithOptions`` builds ``wait.Backoff{Duration: 800ms, Cap: 30s,
  Steps: ceil(30s / 800ms) = 38, Factor: 2.0, Jitter: 1.0}`` and wraps it in
  ``DelayWithReset(clock, 2min)``.
* ``delay()``: each step returns the *current* duration plus jitter (a uniform
  extra of up to ``jitter * duration``), then multiplies the duration by the
  factor; once that would pass the cap, the duration becomes the cap and no
  more steps are taken. So the waits are drawn from [0.8, 1.6), [1.6, 3.2),
  [3.2, 6.4), [6.4, 12.8), [12.8, 25.6), [25.6, 51.2), then [30, 60) each time:
  one attempt every 30 to 60 seconds against a server that stays broken.
* ``backoffManager.Step()``: when more than ``resetInterval`` (2 min) has passed
  since the manager last reset (or was made), it starts again from 800 ms.
  Note what that is *not*: "2 minutes without a failure". The clock starts at
  the previous reset, not at the last failure, so a reflector failing without
  pause still drops back to 800 ms every two minutes.

The clock and the random source are parameters, so the arithmetic is tested
exactly (tests/unit/test_reflector_policy.py).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

__all__ = ["REFLECTOR_BACKOFF", "REFLECTOR_BACKOFF_RESET", "Backoff", "BackoffManager"]


@dataclass(frozen=True)
class Backoff:
    """client-go ``wait.Backoff``: the parameters, and one step of it (pure).

    Attributes:
        duration: seconds; the base of the next wait.
        factor: the duration is multiplied by it after each step (0: constant).
        jitter: each wait adds a uniform random extra in ``[0, jitter * duration)``.
        steps: how many more times the duration may grow; at 0 it stays put.
        cap: seconds; the duration never grows past it (0: no cap).
    """

    duration: float
    factor: float = 0.0
    jitter: float = 0.0
    steps: int = 0
    cap: float = 0.0

    def step(self, rand: float) -> tuple[float, Backoff]:
        """One step: the wait, and the backoff for the step after (apimachinery ``delay()``).

        Args:
            rand: a number in [0, 1), the jitter's random draw (``random.random()``).
        """
        if self.steps < 1:
            wait = self.duration + rand * self.jitter * self.duration if self.jitter > 0 else self.duration
            return wait, replace(self, steps=0)
        steps = self.steps - 1
        if self.factor:
            following = self.duration * self.factor
            if self.cap > 0 and following > self.cap:
                following, steps = self.cap, 0
        else:
            following = self.duration
        wait = self.duration + rand * self.jitter * self.duration if self.jitter > 0 else self.duration
        return wait, replace(self, duration=following, steps=steps)


#: client-go's reflector defaults (``defaultBackoffInit``/``Max``/``Factor``/``Jitter``).
REFLECTOR_BACKOFF = Backoff(duration=0.8, factor=2.0, jitter=1.0, steps=math.ceil(30.0 / 0.8), cap=30.0)
#: seconds; ``defaultBackoffReset``.
REFLECTOR_BACKOFF_RESET = 120.0


class BackoffManager:
    """client-go ``backoffManager`` (``Backoff.DelayWithReset``): a backoff that restarts now and then.

    Thread-safe. One manager is shared by everything a reflector backs off
    for (a failed LIST, a refused WATCH, a 429), as client-go shares its
    ``delayHandler``, so they all advance the same delay.

    Args:
        initial: the backoff to start from, and to go back to on a reset.
        reset_after: seconds since the last reset after which :meth:`step`
            resets first (0: every step starts from ``initial``).
        clock: monotonic seconds (``time.monotonic``).
        rand: the jitter's random draws in [0, 1) (``random.random``).
    """

    def __init__(
        self,
        initial: Backoff = REFLECTOR_BACKOFF,
        *,
        reset_after: float = REFLECTOR_BACKOFF_RESET,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.reset_after = reset_after
        self._clock = clock
        self._rand = rand
        self._lock = threading.Lock()
        self._backoff = initial
        self._last_start = clock()

    def step(self) -> float:
        """The next wait in seconds, advancing the backoff."""
        with self._lock:
            now = self._clock()
            if self.reset_after <= 0:
                self._backoff = self.initial
            elif now - self._last_start > self.reset_after:
                self._backoff, self._last_start = self.initial, now
            wait, self._backoff = self._backoff.step(self._rand())
            return wait
