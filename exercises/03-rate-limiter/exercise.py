"""Lesson 03: a per-key exponential rate limiter, graded inside the real RateLimitingQueue.

What a rate limiter does is timing: the check measures when the queue hands a failing key
back with the learner's limiter in it, and probes the rules that make it per-key and safe.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import ModuleType

from operatorlab.controllers.workqueue import RateLimitingQueue
from operatorlab.exercises import Exercise
from operatorlab.grading import Check

BASE, CAP = 0.05, 0.4


class RateLimiter(Exercise):
    lesson = "03"
    title = "ExponentialBackoff: when, forget, num_requeues, per key"
    subject = "ExponentialBackoff"
    budget = 5.0
    hints = (
        "The delay depends on how often this one key has failed since its last success. Where do you keep "
        "that count, and for which keys?",
        "Keep a dict key -> failures. when(key): delay = base_delay * 2 ** failures, then failures += 1; cap "
        "at max_delay. forget(key) drops the key's count; num_requeues reads it.",
        "Mind the edges: min(base * 2.0 ** n, max_delay) overflows for n near 1024 (catch OverflowError and "
        "return max_delay), and workers call when() from several threads (a threading.Lock).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        limiter = learner.ExponentialBackoff(BASE, CAP)
        queue: RateLimitingQueue[str] = RateLimitingQueue(limiter, name="exercise")
        try:
            queue.add("acme")
            queue.get(timeout=self.budget)
            returned_after: list[float] = []
            for _ in range(5):  # acme fails five times: back after 0.05, 0.1, 0.2, 0.4 (the cap), 0.4 s
                failed_at = time.monotonic()  # before the call: the queue's clock starts inside it
                queue.add_rate_limited("acme")
                queue.done("acme")
                queue.get(timeout=self.budget)
                returned_after.append(round(time.monotonic() - failed_at, 2))
            queue.done("acme")
            expected = [BASE, 2 * BASE, 4 * BASE, CAP, CAP]
            ok = all(e * 0.9 <= r <= e + 0.25 for e, r in zip(expected, returned_after, strict=True))
            yield Check("in the real queue, a failing key comes back after 0.05, 0.1, 0.2 s, then 0.4 s "
                        "(the cap)", ok, f"came back after {returned_after} s")
            count = limiter.num_requeues("acme")
            yield Check("num_requeues counts the key's failures", count == 5, f"num_requeues = {count}")
            for _ in range(100):
                limiter.when("busy")
            other = limiter.when("quiet")
            yield Check("each key has its own count: another key starts at base_delay", other == BASE,
                        f"after 100 failures of 'busy', when('quiet') = {other}")
            limiter.forget("acme")
            after = (limiter.num_requeues("acme"), limiter.when("acme"))
            yield Check("forget starts the key over", after == (0, BASE),
                        f"after forget: num_requeues = {after[0]}, next when = {after[1]}")
            try:
                for _ in range(2000):
                    far = limiter.when("flapping")
                yield Check("two thousand failures stay at the cap (no overflow)", far == CAP,
                            f"when = {far}")
            except OverflowError as e:
                yield Check("two thousand failures stay at the cap (no overflow)", False,
                            f"OverflowError: {e}")
        finally:
            queue.shut_down()
