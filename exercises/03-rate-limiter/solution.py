"""Reference solution: client-go's ItemExponentialFailureRateLimiter (as operatorlab.controllers.workqueue has it)."""

import threading


class ExponentialBackoff:
    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay, self.max_delay = base_delay, max_delay
        self._failures: dict = {}
        self._lock = threading.Lock()  # workers call it from several threads

    def when(self, item) -> float:
        with self._lock:
            failures = self._failures.get(item, 0)
            self._failures[item] = failures + 1
        try:
            return min(self.base_delay * 2.0**failures, self.max_delay)
        except OverflowError:  # 2.0**2000 does not fit a float
            return self.max_delay

    def forget(self, item) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item) -> int:
        with self._lock:
            return self._failures.get(item, 0)
