"""The informer (a local cache kept by LIST + WATCH) and the controller built on it.

:class:`Informer` is client-go's ``tools/cache/shared_informer.go`` in small:

* a :class:`Store` -- a thread-safe map from the key ``namespace/name`` (just
  ``name`` for cluster-scoped objects; :func:`~operatorlab.controllers.keys.meta_namespace_key`)
  to the newest object seen -- kept current by a
  :class:`~operatorlab.controllers.listwatch.Reflector` (the same LIST + WATCH
  code as lesson 02, not a copy);
* event handlers (``add_event_handler(on_add, on_update, on_delete)``, client-go's
  ``ResourceEventHandlerFuncs``) called after the store has changed, each on its
  own thread (:class:`~operatorlab.controllers.listener.Listener`, client-go's
  ``processorListener``), so a slow handler holds up neither the watch nor the
  other handlers;
* the cache's objects are never handed out: :meth:`Informer.get`,
  :meth:`Informer.list` and the handlers receive copies. client-go hands out
  the cached objects themselves and says "you must not modify anything
  returned by Get or List" (k8s.io/client-go v0.36.3
  ``tools/cache/thread_safe_store.go``); a mutation there corrupts the cache
  silently (``KUBE_CACHE_MUTATION_DETECTOR=true`` makes an informer check for
  one), here it cannot happen;
* a periodic **resync** that re-delivers every cached object to ``on_update``
  as ``(obj, obj)`` every ``resync_period`` seconds -- from the cache, without
  a request -- so a controller re-checks everything now and then
  (level-triggered insurance against a lost or mishandled event).

:class:`InformerController` is the shape of
kubernetes/sample-controller ``controller.go``: the informer's handlers only
*enqueue keys* into a rate-limited work queue
(:mod:`operatorlab.controllers.workqueue`); N worker threads run
``process_next_work_item``: get a key, read the object **from the cache**,
reconcile, then ``forget`` it on success, ``add_rate_limited`` it on a
temporary failure, drop it (recorded) on a permanent one, and always ``done``.
Because the queue stores a key once however often it is added, five rapid
updates of one Tenant cost at most a couple of reconciles, each against the
newest state.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
from kubernetes import client

from operatorlab.controllers.keys import meta_namespace_key, split_meta_namespace_key
from operatorlab.controllers.listener import Listener
from operatorlab.controllers.listwatch import TENANTS, ListerWatcher, ListWatch, Reflector, Resource, WatchEvent
from operatorlab.controllers.metrics import ControllerStats, CountingApiClient
from operatorlab.controllers.reconciler import TenantReconciler
from operatorlab.controllers.workqueue import QueueMetrics, RateLimiter, RateLimitingQueue

__all__ = [
    "DeletedFinalStateUnknown",
    "EventHandler",
    "Informer",
    "InformerController",
    "Store",
    "deletion_handling_key",
]

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class DeletedFinalStateUnknown:
    """A tombstone: the object was deleted while the watch was down, so its final state is unknown.

    client-go ``tools/cache/delta_fifo.go``. ``on_delete`` receives one when a
    relist no longer contains an object the store had; ``obj`` is the last
    state the store saw.
    """

    key: str
    obj: Obj = field(repr=False)


def deletion_handling_key(obj: Obj | DeletedFinalStateUnknown) -> str:
    """The key of an object or a tombstone (client-go ``DeletionHandlingMetaNamespaceKeyFunc``)."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return meta_namespace_key(obj)


class Store:
    """A thread-safe map from key to object (client-go ``thread_safe_store.go``).

    It returns the objects it holds, not copies: it is the informer's own,
    and the informer copies what it hands out.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}

    def get(self, key: str) -> Obj | None:
        """The cached object with this key, or None."""
        with self._lock:
            return self._items.get(key)

    def items(self) -> list[Obj]:
        """Every cached object."""
        with self._lock:
            return list(self._items.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def put(self, obj: Obj) -> Obj | None:
        """Add or update an object; return the one it replaced, if any."""
        key = meta_namespace_key(obj)
        with self._lock:
            old = self._items.get(key)
            self._items[key] = obj
            return old

    def delete(self, key: str) -> Obj | None:
        """Remove a key; return the object it had, if any."""
        with self._lock:
            return self._items.pop(key, None)

    def replace(self, objects: Iterable[Obj]) -> dict[str, Obj]:
        """Make the store exactly ``objects``; return what it held before."""
        new = {meta_namespace_key(obj): obj for obj in objects}
        with self._lock:
            old, self._items = self._items, new
            return old


@dataclass(frozen=True)
class EventHandler:
    """client-go ``ResourceEventHandlerFuncs``: any of the three may be None.

    ``on_add(obj)``, ``on_update(old, new)`` (old is new on a resync),
    ``on_delete(obj_or_tombstone)`` (a :class:`DeletedFinalStateUnknown` when the
    deletion was only noticed by a relist).
    """

    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj | DeletedFinalStateUnknown], None] | None = None


class Informer:
    """A local cache of one collection kept by LIST + WATCH, with event handlers and resync.

    The reflector's thread updates the store, then hands each handler its
    notification, a copy of the object, through the handler's own
    :class:`~operatorlab.controllers.listener.Listener` thread. Each handler
    hears every change once, in order, one at a time, after the store has it;
    a slow one delays only itself. Exceptions from handlers are logged and
    ignored.

    Args:
        list_watch: the LIST and WATCH calls (:meth:`for_resource` builds them
            for a collection).
        resync_period: seconds between resyncs; ``None`` or 0 disables them.
        watch_timeout: seconds, passed to the reflector.
        name: for thread names.
    """

    def __init__(
        self,
        list_watch: ListerWatcher,
        *,
        resync_period: float | None = None,
        watch_timeout: float = 300.0,
        name: str = "informer",
    ) -> None:
        self.store = Store()
        self.resync_period = resync_period
        self.name = name
        self.reflector = Reflector(list_watch, self, watch_timeout=watch_timeout, name=name)
        self._listeners: list[tuple[EventHandler, Listener]] = []
        self._dispatch = threading.RLock()  # the store and the listeners' buffers change together, in order
        self._stopping = threading.Event()
        self._resync_thread: threading.Thread | None = None
        self.resyncs = 0

    @classmethod
    def for_resource(cls, api_client: client.ApiClient, resource: Resource = TENANTS, **kwargs: Any) -> Informer:
        """An informer on ``resource`` through ``api_client``; kwargs as for the class."""
        return cls(ListWatch(api_client, resource), **{"name": f"informer-{resource.plural}", **kwargs})

    # -- handlers ---------------------------------------------------------------------

    def add_event_handler(
        self,
        on_add: Callable[[Obj], None] | None = None,
        on_update: Callable[[Obj, Obj], None] | None = None,
        on_delete: Callable[[Obj | DeletedFinalStateUnknown], None] | None = None,
    ) -> EventHandler:
        """Register handlers, each set on its own thread. As in client-go, a handler
        added after the cache has synced first hears ``on_add`` for every object already cached."""
        handler = EventHandler(on_add, on_update, on_delete)
        listener = Listener(f"{self.name}-handler-{len(self._listeners)}")
        with self._dispatch:
            self._listeners.append((handler, listener))
            if self.has_synced() and on_add:
                for obj in self.store.items():
                    listener.add(_call(on_add, copy.deepcopy(obj)))
        return handler

    def wait_for_handlers(self, timeout: float | None = None) -> bool:
        """Wait until every handler has heard of every change so far; False if ``timeout`` s passed first."""
        with self._dispatch:
            listeners = [listener for _, listener in self._listeners]
        return all(listener.wait_idle(timeout) for listener in listeners)

    def pending_notifications(self) -> int:
        """Notifications buffered or running in the handlers' threads now."""
        with self._dispatch:
            return sum(listener.pending() for _, listener in self._listeners)

    # -- ReflectorSink: keeps the store, then tells the handlers -----------------------

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        """A (re)list: store := objects; adds, updates, and tombstones for what vanished."""
        with self._dispatch:
            old = self.store.replace(objects)
            for obj in objects:
                previous = old.get(meta_namespace_key(obj))
                if previous is None:
                    self._notify_add(obj)
                else:
                    self._notify_update(previous, obj)
            new_keys = {meta_namespace_key(obj) for obj in objects}
            for key, gone in old.items():
                if key not in new_keys:
                    self._notify_delete(DeletedFinalStateUnknown(key, gone))

    def apply(self, event: WatchEvent) -> None:
        """One watch event: update the store, then the handlers (BOOKMARKs change nothing).

        The store keeps its own copy: the event's object is also the one the
        reflector's observers (a timeline) were given.
        """
        if event.object is None or event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        obj = copy.deepcopy(dict(event.object))
        with self._dispatch:
            if event.type == "DELETED":
                self.store.delete(meta_namespace_key(obj))
                self._notify_delete(obj)
                return
            previous = self.store.put(obj)
            if previous is None:
                self._notify_add(obj)
            else:
                self._notify_update(previous, obj)

    def resync(self) -> int:
        """Re-deliver every cached object as ``on_update(obj, obj)``; return how many."""
        with self._dispatch:
            objects = self.store.items()
            for obj in objects:
                self._notify_update(obj, obj)
            self.resyncs += 1
        return len(objects)

    def _notify_add(self, obj: Obj) -> None:
        for handler, listener in self._listeners:
            if handler.on_add:
                listener.add(_call(handler.on_add, copy.deepcopy(obj)))

    def _notify_update(self, old: Obj, new: Obj) -> None:
        for handler, listener in self._listeners:
            if handler.on_update:
                new_copy = copy.deepcopy(new)
                listener.add(_call(handler.on_update, new_copy if old is new else copy.deepcopy(old), new_copy))

    def _notify_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        for handler, listener in self._listeners:
            if handler.on_delete:
                listener.add(_call(handler.on_delete, copy.deepcopy(obj)))

    # -- reading the cache -----------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        """A copy of the cached object for ``key`` (``"name"`` or ``"namespace/name"``), or None."""
        obj = self.store.get(key)
        return None if obj is None else copy.deepcopy(obj)

    def list(self) -> list[Obj]:
        """Copies of every cached object."""
        return copy.deepcopy(self.store.items())

    def has_synced(self) -> bool:
        """True once the first LIST is in the store (client-go ``HasSynced``)."""
        return self.reflector.has_synced()

    def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Block until :meth:`has_synced`; False if ``timeout`` s passed first (client-go ``WaitForCacheSync``)."""
        return self.reflector.wait_for_sync(timeout)

    def on_event(self, observer: Callable[[WatchEvent], None]) -> None:
        """Hear every watch event and reflector marker (for a timeline)."""
        self.reflector.on_event(observer)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Informer:
        """Start the reflector, the handlers' threads and, if configured, the resync timer (does not wait for sync)."""
        self._stopping.clear()
        with self._dispatch:
            for _, listener in self._listeners:
                listener.start()
        self.reflector.start()
        if self.resync_period:
            self._resync_thread = threading.Thread(target=self._resync_loop, name="informer-resync", daemon=True)
            self._resync_thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop and join the threads. Raises TimeoutError if one does not finish in time."""
        self._stopping.set()
        if self._resync_thread is not None:
            self._resync_thread.join(timeout)
            self._resync_thread = None
        self.reflector.stop(timeout)
        for _, listener in self._listeners:
            listener.stop(timeout)

    def _resync_loop(self) -> None:
        assert self.resync_period
        while not self._stopping.wait(self.resync_period):
            if self.has_synced():
                self.resync()

    def __enter__(self) -> Informer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class InformerController:
    """The sample-controller loop over Tenants: informer -> work queue -> workers -> reconcile.

    * The informer's handlers enqueue the Tenant's key on add, update (and so
      on every resync) and delete, each on its handler's own thread; the
      watch thread only hands the notifications over.
    * ``workers`` threads each run :meth:`process_next_work_item` until the
      queue shuts down. The queue never hands one key to two workers.
    * :meth:`sync_handler` reads the Tenant **from the informer's cache** and
      calls the shared reconcile (which reads the namespace and quota with GET
      and writes only what differs); a key missing from the cache means the
      Tenant was deleted, so its namespace is deleted.
    * Errors: ``kopf.PermanentError`` -- the key is dropped (``forget``) and the
      message kept in :attr:`permanent_failures`; anything else
      (``kopf.TemporaryError``, ``ApiException``, a network error) -- retried
      with ``add_rate_limited`` (per-key exponential backoff, client-go's
      defaults: 5 ms doubling to 1000 s). Success -- ``forget`` resets the backoff.

    With ``workers=0`` nothing drains the queue by itself: call
    :meth:`process_next_work_item` or :meth:`drain` (a lesson uses this to show
    five updates becoming one queued key).

    Args:
        api_client: whose cluster and credentials to use (``None``: the current
            kubeconfig); requests go through the controller's own
            :class:`~operatorlab.controllers.metrics.CountingApiClient`.
        workers: worker threads.
        resync_period: seconds between informer resyncs (``None``: never).
        watch_timeout: seconds, the server-side timeout of each watch.
        rate_limiter: the queue's retry policy (default client-go's).
        reconciler: the reconcile to drive (default: the Tenant operator's).
    """

    def __init__(
        self,
        api_client: client.ApiClient | None = None,
        *,
        workers: int = 2,
        resync_period: float | None = 30.0,
        watch_timeout: float = 300.0,
        rate_limiter: RateLimiter[Hashable] | None = None,
        reconciler: TenantReconciler | None = None,
    ) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.api = CountingApiClient.wrap(api_client)
        self.reconciler = reconciler or TenantReconciler(self.api)
        self.informer = Informer.for_resource(
            self.api, TENANTS, resync_period=resync_period, watch_timeout=watch_timeout)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(rate_limiter, name="tenants")
        self.workers = workers
        self.permanent_failures: dict[str, str] = {}
        self._lock = threading.Lock()
        self._retries = 0
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.informer.add_event_handler(
            on_add=self.enqueue,
            on_update=lambda old, new: self.enqueue(new),
            on_delete=self.enqueue,
        )

    def enqueue(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        """Queue the object's key (what every informer handler does)."""
        self.queue.add(deletion_handling_key(obj))

    # -- workers ------------------------------------------------------------------------

    def process_next_work_item(self, timeout: float | None = None) -> bool:
        """Take one key from the queue and reconcile it.

        Args:
            timeout: seconds to wait for a key; ``None`` waits as long as it takes.

        Returns:
            False once the queue is shut down (the worker should exit), else True.

        Raises:
            TimeoutError: no key arrived within ``timeout``.
        """
        key, shutdown = self.queue.get(timeout)
        if shutdown or key is None:
            return False
        try:
            if self._stopping.is_set():
                return False
            self.sync_handler(key)
        except kopf.PermanentError as e:
            log.error("informer controller: giving up on %s: %s", key, e)
            with self._lock:
                self.permanent_failures[key] = str(e)
            self.queue.forget(key)
        except Exception as e:  # noqa: BLE001 - TemporaryError, ApiException, network: retry with backoff
            log.warning("informer controller: %s failed, retrying with backoff: %s", key, e)
            with self._lock:
                self._retries += 1
            self.queue.add_rate_limited(key)
        else:
            with self._lock:
                self.permanent_failures.pop(key, None)
            self.queue.forget(key)
        finally:
            self.queue.done(key)
        return True

    def sync_handler(self, key: str) -> None:
        """Reconcile one key against the cache (sample-controller ``syncHandler``).

        Raises what the reconcile raises (see
        :meth:`~operatorlab.controllers.reconciler.TenantReconciler.sync`).
        """
        _, name = split_meta_namespace_key(key)
        self.reconciler.sync(name, self.informer.get(key))

    def drain(self, limit: int | None = None) -> int:
        """Process keys already queued without waiting; return how many (for ``workers=0``)."""
        done = 0
        while (limit is None or done < limit) and len(self.queue) > 0:
            try:
                if not self.process_next_work_item(timeout=0):
                    break
            except TimeoutError:
                break
            done += 1
        return done

    def _run_worker(self) -> None:
        while self.process_next_work_item():
            pass

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, *, sync_timeout: float = 60.0) -> InformerController:
        """Start the informer, wait for its cache to sync, then start the workers.

        Raises:
            TimeoutError: the cache did not sync within ``sync_timeout`` s.
            RuntimeError: it was stopped before: its queue is shut down for good;
                create a new controller (a restarted process starts empty too).
        """
        if self.queue.shutting_down():
            raise RuntimeError("a stopped InformerController cannot start again: create a new one")
        self._stopping.clear()
        self.informer.start()
        if not self.informer.wait_for_cache_sync(sync_timeout):
            self.stop()
            raise TimeoutError(f"informer controller: cache not synced within {sync_timeout}s")
        self._threads = [
            threading.Thread(target=self._run_worker, name=f"tenant-worker-{i}", daemon=True)
            for i in range(self.workers)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the queue down, join the workers, stop the informer.

        Keys still queued are not processed. Raises TimeoutError if a thread
        does not finish within ``timeout`` s (e.g. a reconcile hangs).
        """
        self._stopping.set()
        self.queue.shut_down()
        for thread in self._threads:
            thread.join(timeout)
        stuck = [t.name for t in self._threads if t.is_alive()]
        self._threads = []
        self.informer.stop(timeout)
        self.api.close()
        if stuck:
            raise TimeoutError(f"informer controller: workers still running after {timeout}s: {stuck}")

    # -- observing ----------------------------------------------------------------------

    def stats(self) -> ControllerStats:
        """Counters since creation; requests as measured by the controller's own client."""
        with self._lock:
            retries = self._retries
        return ControllerStats.measure(
            self.api.counts(), **self.reconciler.counters(), retries=retries,
            events=self.informer.reflector.events, relists=max(self.informer.reflector.lists - 1, 0),
        )

    def queue_metrics(self) -> QueueMetrics:
        """The work queue's gauges and counters (depth, adds, deduplicated, retries...)."""
        return self.queue.metrics()

    def on_event(self, observer: Callable[[WatchEvent], None]) -> None:
        """Hear every watch event and reflector marker (for a timeline)."""
        self.informer.on_event(observer)

    @property
    def reflector(self) -> Reflector:
        """The informer's reflector (its LIST + WATCH), e.g. for ``rewatch_from``."""
        return self.informer.reflector

    def __enter__(self) -> InformerController:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _call(fn: Callable[..., None], *args: Any) -> Callable[[], None]:
    """A notification: ``fn(*args)`` when the listener gets to it."""
    return lambda: fn(*args)
