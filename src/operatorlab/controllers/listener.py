"""One event handler on its own thread: client-go's ``processorListener``.

A shared informer must not let a handler hold up the watch: while a handler
runs, events keep arriving, the store keeps up, and other handlers keep
hearing of them. client-go (k8s.io/client-go v0.36.3
``tools/cache/shared_informer.go``) gives every registered handler a
``processorListener``: ``add`` hands a notification to the listener's ``pop``
goroutine, which keeps it in an unbounded ring buffer while the handler is
behind, and its ``run`` goroutine calls the handler with each notification,
in order, one at a time. A slow handler only delays itself: its buffer grows.

:class:`Listener` is that, with one thread per handler.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

__all__ = ["Listener"]

log = logging.getLogger(__name__)

Notification = Callable[[], None]


class Listener:
    """Runs the notifications given to :meth:`add` on its own thread, in order.

    The thread starts with the first notification (or :meth:`start`) and ends
    at :meth:`stop`; notifications still buffered then are dropped, as
    client-go's listener drops its buffer when the informer stops. A
    notification that raises is logged; the next one runs.

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Condition()
        self._buffer: deque[Notification] = deque()
        self._busy = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.delivered = 0

    def add(self, notification: Notification) -> None:
        """Buffer one notification and return at once (client-go ``processorListener.add``)."""
        with self._lock:
            if self._stopped:
                return
            self._buffer.append(notification)
            self._start_locked()
            self._lock.notify_all()

    def start(self) -> None:
        """Run (again) after :meth:`stop`."""
        with self._lock:
            self._stopped = False
            self._start_locked()

    def stop(self, timeout: float | None = None) -> None:
        """Drop what is buffered and end the thread once the running notification returns.

        Raises:
            TimeoutError: a notification still runs after ``timeout`` s.
        """
        with self._lock:
            self._stopped = True
            self._buffer.clear()
            self._lock.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"listener {self.name}: handler still running after {timeout}s")

    def pending(self) -> int:
        """Notifications buffered or running now."""
        with self._lock:
            return len(self._buffer) + self._busy

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is buffered or running; False if ``timeout`` s passed first."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._buffer and not self._busy, timeout)

    def _start_locked(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._buffer or self._stopped)
                if self._stopped:
                    self._lock.notify_all()
                    return
                notification = self._buffer.popleft()
                self._busy = True
            try:
                notification()
            except Exception:
                log.exception("listener %s: event handler failed", self.name)
            finally:
                with self._lock:
                    self._busy = False
                    self.delivered += 1
                    self._lock.notify_all()
