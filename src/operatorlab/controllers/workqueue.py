"""The work queue a hand-written controller drains: client-go's ``util/workqueue``.

A faithful Python port, with threads, of ``k8s.io/client-go/util/workqueue``:

* :class:`WorkQueue` -- ``queue.go`` (``Typed[T]``): a FIFO ``queue`` plus a
  ``dirty`` set (keys that need processing) and a ``processing`` set (keys a
  worker holds between :meth:`~WorkQueue.get` and :meth:`~WorkQueue.done`).
  A key is stored once however often it is added, and is never handed to two
  workers at the same time; a key added while it is being processed is
  parked and re-queued by ``done``.
* :class:`DelayingQueue` -- ``delaying_queue.go``: ``add_after`` via one
  background thread waiting on a min-heap of ready times.
* :class:`RateLimitingQueue` -- ``rate_limiting_queue.go``:
  ``add_rate_limited`` / ``forget`` / ``num_requeues`` over a
  :class:`RateLimiter`.
* :class:`ItemExponentialFailureRateLimiter`, :class:`BucketRateLimiter`,
  :class:`MaxOfRateLimiter` and :func:`default_controller_rate_limiter` --
  ``default_rate_limiters.go``.

Keys are any hashable value; controllers use ``"namespace/name"`` strings
(see :mod:`operatorlab.controllers.keys`). Durations are seconds as floats
where client-go uses ``time.Duration``.

Typical worker loop (client-go's ``processNextWorkItem``)::

    while True:
        key, shutdown = queue.get()
        if shutdown:
            return
        try:
            reconcile(key)
        except Exception:
            queue.add_rate_limited(key)   # retry later, with backoff
        else:
            queue.forget(key)             # success: reset the backoff
        finally:
            queue.done(key)               # always, or the key stays stuck
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = [
    "BucketRateLimiter",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "QueueMetrics",
    "RateLimiter",
    "RateLimitingQueue",
    "WorkQueue",
    "default_controller_rate_limiter",
]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

Listener = Callable[["QueueMetrics"], None]

# client-go delaying_queue.go maxWait: the waiting thread wakes at least this
# often, as insurance (and so an infinite delay never reaches Condition.wait).
_MAX_WAIT = 10.0


def _check_timeout(timeout: float | None) -> None:
    # threading treats -1 as "forever" and rejects other negatives obscurely.
    if timeout is not None and not timeout >= 0:
        raise ValueError(f"timeout must be None or >= 0 seconds, got {timeout}")


@dataclass(frozen=True, slots=True)
class QueueMetrics:
    """A consistent snapshot of one queue, for the course's queue panel.

    Names follow client-go ``util/workqueue/metrics.go`` where it has one.

    Gauges (values now):
        depth: keys waiting to be handed out -- client-go's ``depth`` gauge,
            which rises on a real add and falls on ``get``; equals the size
            of the ``dirty`` set, so it includes keys parked behind a worker
            that is still processing them.
        queued: keys in the FIFO right now, i.e. ``len()``; ``depth - queued``
            keys are parked until their worker calls ``done``.
        processing: keys handed out by ``get`` and not yet ``done``.
        waiting: keys scheduled by ``add_after`` whose delay has not passed.
        shutting_down: ``shut_down``/``shut_down_with_drain`` was called.

    Counters (totals since the queue was created):
        adds: ``add`` calls that marked a key dirty -- client-go's ``adds``
            (``workqueue_adds_total``), which skips deduplicated adds.
        deduplicated: ``add`` calls that were no-ops because the key was
            already dirty ("stored once").
        requeued_while_processing: the subset of ``adds`` made while the key
            was being processed; each is queued again on ``done``.
        retries: ``add_after`` calls, including every ``add_rate_limited``
            -- client-go's ``retries`` (``workqueue_retries_total``).
        processed: ``done`` calls.

    Adds ignored because the queue is shutting down count nowhere, as in
    client-go. Once the queue is idle, ``processed == adds``.
    """

    name: str
    depth: int
    queued: int
    processing: int
    waiting: int
    adds: int
    deduplicated: int
    requeued_while_processing: int
    retries: int
    processed: int
    shutting_down: bool


class WorkQueue(Generic[K]):
    """A de-duplicating FIFO work queue; client-go ``util/workqueue/queue.go``.

    Invariants (the comments on client-go's ``Typed`` struct): every key in
    the FIFO is dirty and not processing; a key is processing for at most one
    worker; a dirty key that is processing waits for ``done`` to be queued.

    Thread-safe: one lock guards all state. Getters, drain waiters and (in
    :class:`DelayingQueue`) the waiting thread sleep on separate condition
    variables over that lock, so a ``notify`` always reaches the kind of
    waiter it is meant for.

    Args:
        name: shown in :meth:`metrics` and thread names; client-go uses it to
            label Prometheus metrics.
    """

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # getters
        self._drained = threading.Condition(self._lock)  # shut_down_with_drain
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._shutting_down = False
        self._drain = False
        self._adds = 0
        self._deduplicated = 0
        self._requeued_while_processing = 0
        self._retries = 0
        self._processed = 0
        self._listeners: list[Listener] = []

    # -- client-go Interface -------------------------------------------------

    def add(self, key: K) -> None:
        """Mark ``key`` as needing processing (client-go ``Add``).

        No-op if the queue is shutting down, or if ``key`` is already dirty
        (queued, or re-added while processing): it is stored once. If
        ``key`` is being processed it is marked dirty but not queued;
        :meth:`done` queues it, so one key never reaches two workers.

        Raises:
            TypeError: ``key`` is not hashable.
        """
        with self._lock:
            self._add_locked(key)
            snapshot = self._snapshot_for_listeners_locked()
        self._notify(snapshot)

    def __len__(self) -> int:
        """Number of keys in the FIFO now (client-go ``Len``): ``len(queue)``.

        Informational only: another thread may change it at once. Keys
        parked behind a worker are not counted; see ``metrics().depth``.
        """
        with self._lock:
            return len(self._queue)

    def get(self, timeout: float | None = None) -> tuple[K | None, bool]:
        """Block until a key can be processed (client-go ``Get``).

        Moves the key from the FIFO to ``processing`` and clears its dirty
        mark. The caller must call :meth:`done` with it when finished.

        After a shutdown, keys still in the FIFO are still handed out (as in
        client-go); only when the FIFO is empty does ``get`` return
        ``(None, True)``, and the worker should then exit.

        Args:
            timeout: seconds to wait; ``None`` waits forever (client-go has
                no timeout; this one keeps notebook cells from hanging).

        Returns:
            ``(key, False)``, or ``(None, True)`` once shut down and empty.

        Raises:
            TimeoutError: ``timeout`` passed with nothing to hand out.
            ValueError: ``timeout`` is negative.
        """
        _check_timeout(timeout)
        with self._lock:
            if not self._cond.wait_for(lambda: bool(self._queue) or self._shutting_down, timeout):
                raise TimeoutError(f"workqueue {self.name!r}: nothing to get within {timeout}s")
            if not self._queue:
                return None, True
            key = self._queue.popleft()
            self._processing.add(key)
            self._dirty.discard(key)
            snapshot = self._snapshot_for_listeners_locked()
        self._notify(snapshot)
        return key, False

    def done(self, key: K) -> None:
        """Mark ``key`` as finished processing (client-go ``Done``).

        If it was added again while being processed, it is queued again now,
        even during a shutdown (so a drain also covers that re-add).

        Raises:
            ValueError: ``key`` is not being processed (``get`` did not
                return it, or ``done`` was already called). client-go
                silently accepts this and can then queue the key twice.
        """
        with self._lock:
            if key not in self._processing:
                raise ValueError(
                    f"workqueue {self.name!r}: done({key!r}) for a key that is not being processed"
                )
            self._processing.remove(key)
            self._processed += 1
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()
            elif not self._processing:
                # Like client-go, a drain waiter is woken only when the last
                # key finishes without being re-queued; a re-queued key is
                # handed out and drained too.
                self._drained.notify_all()
            snapshot = self._snapshot_for_listeners_locked()
        self._notify(snapshot)

    def shut_down(self) -> None:
        """Ignore new adds and tell workers to exit (client-go ``ShutDown``).

        Wakes every blocked :meth:`get`. Keys already queued are still handed
        out; ``get`` returns ``(None, True)`` once the FIFO is empty. Cancels
        a :meth:`shut_down_with_drain` in progress. Safe to call repeatedly.
        """
        with self._lock:
            self._drain = False
            self._begin_shutdown_locked()
            snapshot = self._snapshot_for_listeners_locked()
        self._stop_background()
        self._notify(snapshot)

    def shut_down_with_drain(self, timeout: float | None = None) -> bool:
        """Ignore new adds, then wait for workers to finish (client-go
        ``ShutDownWithDrain``).

        Returns once no key is being processed. As in client-go it watches the
        ``processing`` set, not the FIFO: keys still queued when no worker
        holds one do not delay it, but a key re-queued by ``done`` (added
        while processing) is waited for. Workers must keep calling ``get``
        and ``done`` or this waits forever -- hence ``timeout``.

        Args:
            timeout: seconds to wait; ``None`` waits as long as it takes.

        Returns:
            True if drained; False if ``timeout`` passed or :meth:`shut_down`
            cut the drain short while keys were still processing.

        Raises:
            ValueError: ``timeout`` is negative.
        """
        _check_timeout(timeout)
        with self._lock:
            self._drain = True
            self._begin_shutdown_locked()
            snapshot = self._snapshot_for_listeners_locked()
        self._stop_background()
        self._notify(snapshot)
        with self._lock:
            self._drained.wait_for(lambda: not self._processing or not self._drain, timeout)
            return not self._processing

    def shutting_down(self) -> bool:
        """True once :meth:`shut_down` or :meth:`shut_down_with_drain` ran
        (client-go ``ShuttingDown``)."""
        with self._lock:
            return self._shutting_down

    # -- observability -------------------------------------------------------

    def metrics(self) -> QueueMetrics:
        """A consistent snapshot of gauges and counters; see :class:`QueueMetrics`."""
        with self._lock:
            return self._snapshot_locked()

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(metrics_snapshot)`` after every change.

        Called on the thread that made the change, outside the queue's lock
        (so it may call back into the queue), possibly concurrently from
        several threads; snapshots from different threads may arrive out of
        order. Exceptions are logged and swallowed so a broken widget cannot
        break the controller.
        """
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``.

        Raises:
            ValueError: ``listener`` was not added.
        """
        with self._lock:
            self._listeners.remove(listener)

    # -- internals (call *_locked with self._lock held) ------------------------

    def _add_locked(self, key: K) -> None:
        if self._shutting_down:
            return
        if key in self._dirty:
            self._deduplicated += 1
            return
        self._adds += 1
        self._dirty.add(key)
        if key in self._processing:
            self._requeued_while_processing += 1
            return
        self._queue.append(key)
        self._cond.notify()

    def _begin_shutdown_locked(self) -> None:
        self._shutting_down = True
        self._cond.notify_all()
        self._drained.notify_all()

    def _stop_background(self) -> None:
        """Hook: stop helper threads after shutdown. Called without the lock."""

    def _waiting_count_locked(self) -> int:
        return 0

    def _snapshot_locked(self) -> QueueMetrics:
        return QueueMetrics(
            name=self.name,
            depth=len(self._dirty),
            queued=len(self._queue),
            processing=len(self._processing),
            waiting=self._waiting_count_locked(),
            adds=self._adds,
            deduplicated=self._deduplicated,
            requeued_while_processing=self._requeued_while_processing,
            retries=self._retries,
            processed=self._processed,
            shutting_down=self._shutting_down,
        )

    def _snapshot_for_listeners_locked(self) -> tuple[QueueMetrics, tuple[Listener, ...]] | None:
        # Skip building a snapshot when nobody listens (the common, hot case).
        if not self._listeners:
            return None
        return self._snapshot_locked(), tuple(self._listeners)

    @staticmethod
    def _notify(snapshot: tuple[QueueMetrics, Iterable[Listener]] | None) -> None:
        if snapshot is None:
            return
        metrics, listeners = snapshot
        for listener in listeners:
            try:
                listener(metrics)
            except Exception:
                log.exception("workqueue %r: listener %r failed", metrics.name, listener)


class DelayingQueue(WorkQueue[K]):
    """A :class:`WorkQueue` that can add a key later; client-go
    ``util/workqueue/delaying_queue.go``.

    One background thread (started on the first delayed add, stopped and
    joined by :meth:`shut_down`) sleeps until the earliest ready time in a
    min-heap, then :meth:`add`\\ s what is due. Delays are measured on
    ``time.monotonic``.
    """

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self._waiting_cond = threading.Condition(self._lock)  # the waiting thread
        # Heap entries are (ready_at, seq, key); seq keeps equal times FIFO and
        # never compares keys. _waiting maps each key to its live entry:
        # a superseded entry stays in the heap and is skipped when popped.
        self._heap: list[tuple[float, int, K]] = []
        self._waiting: dict[K, tuple[float, int, K]] = {}
        self._seq = itertools.count()
        self._waiting_thread: threading.Thread | None = None

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed (client-go ``AddAfter``).

        Ignored if shutting down; keys still waiting at shutdown are dropped.
        ``delay <= 0`` adds at once. If ``key`` is already waiting, the
        earlier of the two ready times wins. When the delay passes, the add
        is an ordinary :meth:`add`, so it is deduplicated against a key that
        is already dirty. Counts one ``retries``.

        Raises:
            ValueError: ``delay`` is NaN.
            TypeError: ``key`` is not hashable.
        """
        if math.isnan(delay):
            raise ValueError("add_after: delay must be a number of seconds, got NaN")
        with self._lock:
            if self._shutting_down:
                return
            self._retries += 1
            if delay <= 0:
                self._add_locked(key)
            else:
                self._schedule_locked(key, time.monotonic() + delay)
            snapshot = self._snapshot_for_listeners_locked()
        self._notify(snapshot)

    def _schedule_locked(self, key: K, ready_at: float) -> None:
        existing = self._waiting.get(key)
        if existing is not None and existing[0] <= ready_at:
            return  # client-go insert(): only ever move a key earlier
        entry = (ready_at, next(self._seq), key)
        heapq.heappush(self._heap, entry)
        self._waiting[key] = entry
        if self._waiting_thread is None:
            self._waiting_thread = threading.Thread(
                target=self._waiting_loop, name=f"workqueue-{self.name or id(self)}-waiting", daemon=True
            )
            self._waiting_thread.start()  # blocks on self._lock until we release it
        elif self._heap[0] is entry:
            self._waiting_cond.notify()  # new earliest deadline: recompute the sleep

    def _waiting_loop(self) -> None:
        """client-go ``waitingLoop``: add due keys, then sleep until the next one."""
        while True:
            with self._lock:
                if self._shutting_down:
                    return
                now = time.monotonic()
                fired = False
                while self._heap and self._heap[0][0] <= now:
                    entry = heapq.heappop(self._heap)
                    key = entry[2]
                    if self._waiting.get(key) is entry:
                        del self._waiting[key]
                        self._add_locked(key)
                        fired = True
                if fired:
                    snapshot = self._snapshot_for_listeners_locked()
                else:
                    snapshot = None
                    timeout = min(self._heap[0][0] - now, _MAX_WAIT) if self._heap else _MAX_WAIT
                    self._waiting_cond.wait(timeout)
            self._notify(snapshot)

    def _begin_shutdown_locked(self) -> None:
        super()._begin_shutdown_locked()
        self._heap.clear()
        self._waiting.clear()
        self._waiting_cond.notify_all()

    def _stop_background(self) -> None:
        thread = self._waiting_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _waiting_count_locked(self) -> int:
        return len(self._waiting)


class RateLimiter(Protocol[K_contra]):
    """How long a key waits before it is retried; client-go ``RateLimiter``
    (``default_rate_limiters.go``)."""

    def when(self, item: K_contra) -> float:
        """Seconds ``item`` should wait; records one more requeue of it."""
        ...

    def forget(self, item: K_contra) -> None:
        """Stop tracking ``item`` (it succeeded, or was given up on)."""
        ...

    def num_requeues(self, item: K_contra) -> int:
        """How many times ``item`` has been requeued since its last ``forget``."""
        ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """Per-key exponential backoff; client-go ``ItemExponentialFailureRateLimiter``.

    The n-th ``when(key)`` since the last ``forget(key)`` (n counted from 0)
    returns ``min(base_delay * 2**n, max_delay)``: 5 ms, 10 ms, 20 ms, ...
    up to 1000 s with the defaults of client-go's
    ``DefaultControllerRateLimiter``. Thread-safe.

    Args:
        base_delay: seconds for the first retry (client-go default 5 ms).
        max_delay: cap in seconds (client-go default 1000 s).

    Raises:
        ValueError: a delay is negative or NaN.
    """

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if not base_delay >= 0 or not max_delay >= 0:  # also rejects NaN
            raise ValueError(
                f"delays must be >= 0 seconds, got base_delay={base_delay}, max_delay={max_delay}"
            )
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._lock = threading.Lock()
        self._failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        """Seconds to wait before retrying ``item``; counts one failure."""
        with self._lock:
            exp = self._failures.get(item, 0)
            self._failures[item] = exp + 1
        try:
            backoff = self.base_delay * 2.0**exp
        except OverflowError:  # client-go caps at MaxInt64 nanoseconds the same way
            return self.max_delay
        return min(backoff, self.max_delay)

    def forget(self, item: K) -> None:
        """Reset ``item``'s failure count; the next ``when`` is ``base_delay``."""
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        """Failures counted for ``item`` since its last ``forget``."""
        with self._lock:
            return self._failures.get(item, 0)


class BucketRateLimiter(Generic[K]):
    """An overall token bucket shared by all keys; client-go ``BucketRateLimiter``
    over ``golang.org/x/time/rate.Limiter.Reserve().Delay()``.

    The bucket starts full with ``burst`` tokens and refills at ``qps``
    tokens per second. Each ``when`` takes a token, borrowing against the
    future when empty: it returns 0 while tokens last, then the seconds
    until its borrowed token is refilled. Thread-safe.

    Args:
        qps: refill rate, tokens per second (client-go default 10).
        burst: bucket size (client-go default 100).
        clock: seconds, monotonic; injectable for tests.

    Raises:
        ValueError: ``qps`` is not positive or ``burst`` is below 1.
    """

    def __init__(
        self, qps: float = 10.0, burst: int = 100, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not qps > 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps}, burst={burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = clock()

    def when(self, item: K) -> float:
        """Seconds until the bucket allows one more retry (of any key)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, item: K) -> None:
        """No-op: the bucket does not track keys."""

    def num_requeues(self, item: K) -> int:
        """Always 0: the bucket does not track keys."""
        return 0


class MaxOfRateLimiter(Generic[K]):
    """The worst (longest) answer of several limiters; client-go ``MaxOfRateLimiter``.

    ``when`` asks every limiter (so each records the retry) and returns the
    largest delay; ``num_requeues`` is the largest count; ``forget`` forgets
    in all.
    """

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        self.limiters = limiters

    def when(self, item: K) -> float:
        """Largest delay, in seconds, of all limiters (0.0 if there are none)."""
        return max((limiter.when(item) for limiter in self.limiters), default=0.0)

    def forget(self, item: K) -> None:
        """Forget ``item`` in every limiter."""
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: K) -> int:
        """Largest requeue count of all limiters (0 if there are none)."""
        return max((limiter.num_requeues(item) for limiter in self.limiters), default=0)


def default_controller_rate_limiter() -> MaxOfRateLimiter[Hashable]:
    """client-go ``DefaultControllerRateLimiter``: per-key exponential backoff
    (5 ms doubling to 1000 s) combined with an overall bucket (10 qps, burst
    100) that only limits retries."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(qps=10.0, burst=100),
    )


class RateLimitingQueue(DelayingQueue[K]):
    """A :class:`DelayingQueue` that retries keys with backoff; client-go
    ``util/workqueue/rate_limiting_queue.go``.

    Call :meth:`forget` when a key succeeds (or is given up on), or its
    failure count -- and so its next delay -- keeps growing.

    Args:
        rate_limiter: decides retry delays; default
            :func:`default_controller_rate_limiter`.
        name: see :class:`WorkQueue`.
    """

    def __init__(self, rate_limiter: RateLimiter[K] | None = None, name: str = "") -> None:
        super().__init__(name)
        self.rate_limiter: RateLimiter[K] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter()
        )

    def add_rate_limited(self, key: K) -> None:
        """``add_after(key, rate_limiter.when(key))`` (client-go ``AddRateLimited``).

        As in client-go, ``when`` is consulted (and counts a failure) even if
        the queue is shutting down and the add is then ignored.
        """
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (client-go ``Forget``). It does not remove
        the key from the queue; you still call :meth:`done`."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """Rate-limited requeues of ``key`` since its last :meth:`forget`
        (client-go ``NumRequeues``)."""
        return self.rate_limiter.num_requeues(key)
