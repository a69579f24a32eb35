"""LIST, then WATCH from the list's resourceVersion: the reflector, and a controller on it.

:class:`Reflector` is client-go's ``tools/cache/reflector.go`` ``ListAndWatch``
in Python, with threads:

1. **LIST** the collection. The list's ``metadata.resourceVersion`` is the
   point in the object history the list is a snapshot of.
2. **WATCH** from that resourceVersion: the server streams every change after
   it, in order, as JSON lines ``{"type": ..., "object": ...}`` of type
   ``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK`` (a progress marker that
   carries only a newer resourceVersion, sent because we ask with
   ``allowWatchBookmarks=true``) or ``ERROR`` (a ``Status`` object).
   kube-apiserver's watch cache sends a bookmark about 2 s before the watch's
   timeout and about once a minute, but only when its resourceVersion has moved
   past the one the watch started from (k8s.io/apiserver
   ``pkg/storage/cacher/cache_watcher.go``): no news, no bookmark.
3. Remember the resourceVersion of every event. When the stream ends -- the
   server's ``timeoutSeconds`` ran out, or the connection dropped -- WATCH
   again from that resourceVersion: nothing is missed and nothing is listed
   again.
4. If the server answers ``410 Gone`` (``reason: Expired``, "too old resource
   version"), the history we would resume from is no longer kept: LIST again
   (a *relist*) and watch from the new list. The 410 may come as an ``ERROR``
   event on an open stream (what kube-apiserver's watch cache sends) or as the
   HTTP status of the watch request; both are handled the same way.

Sources: Kubernetes API concepts, "Efficient detection of changes", "Watch
bookmarks" and "Resource versions"
(https://kubernetes.io/docs/reference/using-api/api-concepts/); client-go
``tools/cache/reflector.go`` (``ListAndWatch``, ``watchHandler``,
``isExpiredError``).

The raw stream (``watch=True`` with ``_preload_content=False``) is read here
instead of ``kubernetes.watch.Watch``, because that helper hides what the
lesson is about: it retries a first 410 by itself and turns other ERROR events
into exceptions.

:class:`ListWatchController` reconciles on every event it receives (no cache, no
work queue): the step between polling and the informer.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3
from kubernetes import client

from operatorlab.controllers.reconciler import TenantReconciler
from operatorlab.controllers.metrics import ControllerStats, CountingApiClient

__all__ = [
    "TENANTS",
    "ListWatchController",
    "Reflector",
    "ReflectorSink",
    "Resource",
    "WatchEvent",
]

log = logging.getLogger(__name__)

#: Watch event types the API server sends.
SERVER_EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
#: Markers the reflector adds to the timeline for what *it* did.
CLIENT_EVENT_TYPES = ("LIST", "WATCH", "CLOSED", "DROPPED")


@dataclass(frozen=True)
class Resource:
    """A custom resource collection to list and watch.

    Attributes:
        group, version, plural: as in the CRD (``hedronite.io``, ``v1``, ``tenants``).
        namespace: ``None`` for a cluster-scoped resource, or to list and watch
            a namespaced one across all namespaces.
    """

    group: str
    version: str
    plural: str
    namespace: str | None = None

    def list(self, api: client.CustomObjectsApi, **kwargs: Any) -> Any:
        """``list_cluster_custom_object`` or ``list_namespaced_custom_object``; kwargs passed on."""
        if self.namespace:
            return api.list_namespaced_custom_object(self.group, self.version, self.namespace, self.plural, **kwargs)
        return api.list_cluster_custom_object(self.group, self.version, self.plural, **kwargs)


#: hedronite.io/v1 Tenant (crds/tenant.yaml), cluster-scoped.
TENANTS = Resource("hedronite.io", "v1", "tenants")


@dataclass(frozen=True)
class WatchEvent:
    """One entry of the watch timeline.

    Attributes:
        type: a server event type (``ADDED``, ``MODIFIED``, ``DELETED``,
            ``BOOKMARK``, ``ERROR``) or a reflector marker: ``LIST`` (a list
            completed; ``resource_version`` is the list's), ``WATCH`` (a
            stream opened from ``resource_version``), ``CLOSED`` (the server
            ended the stream, normally at ``timeoutSeconds``), ``DROPPED`` (the
            connection broke).
        name, namespace: the object's; ``""`` for markers, bookmarks and errors.
        resource_version: the object's (or bookmark's, or list's) resourceVersion.
        time: ``time.time()`` when the reflector saw it.
        object: the object as the server sent it (``None`` for markers).
        code: for ``ERROR``, the Status code (410 means Gone: relist).
        detail: a short human-readable note (error message, item count).
    """

    type: str
    name: str = ""
    resource_version: str = ""
    time: float = field(default_factory=time.time)
    namespace: str = ""
    object: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    code: int | None = None
    detail: str = ""

    @property
    def from_server(self) -> bool:
        """True for events the API server sent, False for the reflector's markers."""
        return self.type in SERVER_EVENT_TYPES

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], *, at: float | None = None) -> WatchEvent:
        """Build one from a decoded watch line ``{"type": ..., "object": {...}}``."""
        obj = raw.get("object") or {}
        meta = obj.get("metadata") or {}
        kind = raw.get("type", "")
        code = obj.get("code") if kind == "ERROR" else None
        return cls(
            type=kind, name=meta.get("name", ""), namespace=meta.get("namespace", ""),
            resource_version=meta.get("resourceVersion", ""), time=time.time() if at is None else at,
            object=obj, code=code, detail=obj.get("message", "") if kind == "ERROR" else "",
        )


class ReflectorSink(Protocol):
    """Where a :class:`Reflector` delivers what it learns (client-go: the Store / DeltaFIFO).

    Both are called on the reflector's thread, one at a time, in order.
    """

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        """A (re)list completed: ``objects`` is the whole collection at ``resource_version``."""

    def apply(self, event: WatchEvent) -> None:
        """One ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK`` event from the stream."""


class _WatchExpired(Exception):
    """The server said 410 Gone: the resourceVersion we resume from is too old."""


class _WatchFailed(Exception):
    """The server sent an ERROR event other than 410."""


class Reflector:
    """Keeps a :class:`ReflectorSink` in step with a collection by LIST + WATCH.

    Runs on one background thread (:meth:`start` / :meth:`stop`). Failed
    requests are retried after a backoff that doubles from ``backoff_initial``
    to ``backoff_max`` seconds (client-go: ``wait.BackoffUntil`` around
    ``ListAndWatch``); after an error other than a dropped connection it
    relists.

    Args:
        api_client: used for every request (a
            :class:`~operatorlab.controllers.metrics.CountingApiClient` counts them).
        resource: the collection.
        sink: receives the lists and events.
        watch_timeout: seconds; sent as the watch's ``timeoutSeconds``, so the
            server closes each stream after that long and we re-watch
            (client-go picks 5-10 minutes at random).
        connect_timeout: seconds to establish a connection.
        read_margin: seconds past ``watch_timeout`` after which a silent
            stream is taken as dead (the client-side read timeout).
        list_timeout: seconds for a LIST (client and ``timeoutSeconds``).
        backoff_initial, backoff_max: seconds, the retry backoff after errors.
        name: for thread names and logs.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        resource: Resource,
        sink: ReflectorSink,
        *,
        watch_timeout: float = 300.0,
        connect_timeout: float = 10.0,
        read_margin: float = 30.0,
        list_timeout: float = 60.0,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        name: str = "",
    ) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.resource = resource
        self.sink = sink
        self.watch_timeout = watch_timeout
        self.connect_timeout = connect_timeout
        self.read_margin = read_margin
        self.list_timeout = list_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.name = name or resource.plural
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._synced = threading.Event()
        self._relist_requested = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: urllib3.HTTPResponse | None = None
        self._dropping = False
        self._resource_version = ""
        self._next_watch_from: str | None = None  # one-shot override set by rewatch_from()
        self._observers: list[Callable[[WatchEvent], None]] = []
        self.lists = 0
        self.watches = 0
        self.events = 0
        self.expired = 0  # 410 Gone answers
        self.drops = 0  # streams that broke (not closed by the server)

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> Reflector:
        """Start the LIST + WATCH thread. Raises RuntimeError if already started."""
        if self._thread is not None:
            raise RuntimeError(f"reflector {self.name}: already started")
        self._stopping.clear()
        self._synced.clear()  # a restart lists again before it counts as synced
        self._relist_requested.clear()
        self._thread = threading.Thread(target=self._run, name=f"reflector-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop and join the thread (an open stream is closed at once).

        Raises:
            TimeoutError: the thread did not finish within ``timeout`` s (e.g. the
                sink is stuck in a long reconcile).
        """
        self._stopping.set()
        self._drop_stream()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"reflector {self.name}: thread still running after {timeout}s")

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def has_synced(self) -> bool:
        """True once the first LIST has been delivered to the sink."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until :meth:`has_synced`; False if ``timeout`` s passed first."""
        return self._synced.wait(timeout)

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (of a list, an event or a bookmark): where the next watch resumes."""
        with self._lock:
            return self._resource_version

    def on_event(self, observer: Callable[[WatchEvent], None]) -> None:
        """Call ``observer(event)`` for every server event and marker (for a timeline).

        Called on the reflector thread; exceptions are logged and ignored.
        """
        self._observers.append(observer)

    # -- teaching hooks ------------------------------------------------------------

    def relist(self) -> None:
        """LIST again as soon as possible (the open stream is closed)."""
        self._relist_requested.set()
        self._drop_stream()

    def rewatch_from(self, resource_version: str) -> None:
        """Resume the next watch from ``resource_version`` instead of the last seen one.

        With a very old one (e.g. ``"1"``) the server answers 410 Gone and the
        reflector relists: how a notebook forces the 410 path on a real server.
        """
        # Not written to _resource_version: events still arriving on the open stream
        # would overwrite it before the next watch starts.
        with self._lock:
            self._next_watch_from = resource_version
        self._drop_stream()

    def _drop_stream(self) -> bool:
        """Break the open watch connection from the client side, as a network failure would.

        The reflector sees the stream end, emits ``DROPPED`` and re-watches
        from the last resourceVersion it saw. Returns False if no stream was open.
        """
        with self._lock:
            response = self._response
            if response is None:
                return False
            self._dropping = True
        try:
            response.shutdown()  # urllib3 >= 2.3: shut the socket down, waking the blocked read
        except (AttributeError, ValueError, RuntimeError, OSError):
            try:
                response.close()
            except Exception:  # noqa: BLE001 - best effort: the read will fail either way
                pass
        return True

    # -- the loop -------------------------------------------------------------------

    def _run(self) -> None:
        backoff = self.backoff_initial
        need_list = True
        while not self._stopping.is_set():
            try:
                if need_list or self._relist_requested.is_set():
                    self._relist_requested.clear()
                    self._list_and_replace()
                    need_list = False
                self._watch()
                backoff = self.backoff_initial
            except _WatchExpired:
                need_list = True  # 410: relist at once, no backoff (client-go does the same)
            except (_WatchFailed, client.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as e:
                if self._stopping.is_set():
                    break
                if isinstance(e, client.ApiException) and e.status == 410:  # e.g. an expired LIST continue token
                    need_list = True
                    continue
                log.warning("reflector %s: %s; retrying in %.1fs", self.name, _describe(e), backoff)
                # A refused connection: keep what we had; a server error: relist, as ListAndWatch does.
                need_list = need_list or not isinstance(e, (urllib3.exceptions.HTTPError, OSError))
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self.backoff_max)

    def _list_and_replace(self) -> None:
        result = self.resource.list(
            self.api, timeout_seconds=int(self.list_timeout), _request_timeout=(self.connect_timeout, self.list_timeout + 5)
        )
        items = list(result.get("items") or [])
        resource_version = (result.get("metadata") or {}).get("resourceVersion", "")
        self.lists += 1
        self._emit(WatchEvent("LIST", resource_version=resource_version, detail=f"{len(items)} objects"))
        self._deliver(lambda: self.sink.replace(items, resource_version))
        with self._lock:
            self._resource_version = resource_version
            self._next_watch_from = None  # a fresh list supersedes any requested rewatch
        self._synced.set()

    def _watch(self) -> None:
        """One watch request, read to its end. Raises _WatchExpired on 410."""
        with self._lock:
            resource_version = self._next_watch_from or self._resource_version
            self._next_watch_from = None
        try:
            response = self.resource.list(
                self.api,
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=int(self.watch_timeout),
                _preload_content=False,
                _request_timeout=(self.connect_timeout, self.watch_timeout + self.read_margin),
            )
        except client.ApiException as e:
            if e.status == 410:  # the request itself refused as Gone
                self.expired += 1
                self._emit(WatchEvent("ERROR", resource_version=resource_version, code=410, detail=_describe(e)))
                raise _WatchExpired() from e
            raise
        self.watches += 1
        with self._lock:
            self._response, self._dropping = response, False
        if self._stopping.is_set():  # stop() ran before the stream was registered
            self._drop_stream()
        self._emit(WatchEvent("WATCH", resource_version=resource_version))
        ended = "CLOSED"
        try:
            for line in _lines(response):
                self._handle(json.loads(line))
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as e:
            ended, detail = "DROPPED", _describe(e)
        else:
            detail = "server closed the stream"
        finally:
            with self._lock:
                self._response = None
                dropped_by_us, self._dropping = self._dropping, False
            response.close()
            response.release_conn()
        if self._stopping.is_set():
            ended, detail = "CLOSED", "reflector stopped"
        elif dropped_by_us:
            ended, detail = "DROPPED", "connection closed by the client"
        if ended == "DROPPED":
            self.drops += 1
        self._emit(WatchEvent(ended, resource_version=self.resource_version, detail=detail))

    def _handle(self, raw: Mapping[str, Any]) -> None:
        event = WatchEvent.from_raw(raw)
        self.events += 1
        self._emit(event)
        if event.type == "ERROR":
            if event.code == 410:
                self.expired += 1
                raise _WatchExpired(event.detail)
            raise _WatchFailed(f"ERROR event {event.code}: {event.detail}")
        if event.type not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
            log.warning("reflector %s: ignoring unknown event type %r", self.name, event.type)
            return
        self._deliver(lambda: self.sink.apply(event))
        if event.resource_version:
            with self._lock:
                self._resource_version = event.resource_version

    def _deliver(self, call: Callable[[], None]) -> None:
        try:
            call()
        except Exception:  # a broken sink must not stop the stream
            log.exception("reflector %s: sink failed", self.name)

    def _emit(self, event: WatchEvent) -> None:
        for observer in tuple(self._observers):
            try:
                observer(event)
            except Exception:
                log.exception("reflector %s: event observer failed", self.name)


def _lines(response: urllib3.HTTPResponse) -> Iterator[bytes]:
    """The lines of a streamed body as they arrive (one JSON watch event each)."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def _describe(e: BaseException) -> str:
    if isinstance(e, client.ApiException):
        try:
            return f"{e.status}: {json.loads(e.body)['message']}"
        except (TypeError, ValueError, KeyError):
            return f"{e.status}: {e.reason}"
    return f"{type(e).__name__}: {e}"


class ListWatchController:
    """Reconcile every Tenant on each watch event: LIST + WATCH, no cache, no queue.

    * On each (re)list it reconciles every Tenant (level-triggered catch-up),
      and cleans up Tenants it knew of that are no longer listed (deleted
      while its stream was down).
    * On ``ADDED``/``MODIFIED`` it reconciles that Tenant with the object in the
      event; on ``DELETED`` it deletes the Tenant's namespace; ``BOOKMARK`` only
      moves the resourceVersion on.

    Reconciles run on the reflector's thread, one at a time, so a slow
    reconcile delays every later event; a failed one (e.g. the namespace is
    still Terminating) is not retried until the next relist -- set
    ``relist_period`` for a periodic relist, or use the informer controller,
    whose work queue retries with backoff. A Tenant deleted while the
    controller was not running at all is never cleaned up (only the kopf
    operator's finalizer, or the polling controller's orphan sweep, catch that).

    Args:
        api_client: whose cluster and credentials to use (``None``: the current
            kubeconfig). The controller sends its requests through its own
            :class:`~operatorlab.controllers.metrics.CountingApiClient`.
        watch_timeout: seconds, the server-side timeout of each watch.
        relist_period: seconds between forced relists; ``None`` never relists
            on a timer (client-go's reflector does not either).
        reconciler: the reconcile to drive (default: the Tenant operator's).

    Use as a context manager, or :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        api_client: client.ApiClient | None = None,
        *,
        watch_timeout: float = 300.0,
        relist_period: float | None = None,
        reconciler: TenantReconciler | None = None,
    ) -> None:
        self.api = CountingApiClient.wrap(api_client)
        self.reconciler = reconciler or TenantReconciler(self.api)
        self.reflector = Reflector(self.api, TENANTS, self, watch_timeout=watch_timeout, name="listwatch")
        self.relist_period = relist_period
        self._known: set[str] = set()
        self._stopping = threading.Event()
        self._timer: threading.Thread | None = None

    # -- ReflectorSink -----------------------------------------------------------------

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        names = {obj["metadata"]["name"] for obj in objects}
        for name in sorted(self._known - names):
            self._sync(name, None)
        self._known = names
        for obj in objects:
            self._sync(obj["metadata"]["name"], obj)

    def apply(self, event: WatchEvent) -> None:
        if event.type in ("ADDED", "MODIFIED"):
            self._known.add(event.name)
            self._sync(event.name, event.object)
        elif event.type == "DELETED":
            self._known.discard(event.name)
            self._sync(event.name, None)

    def _sync(self, name: str, tenant: Mapping[str, Any] | None) -> None:
        try:
            self.reconciler.sync(name, tenant)
        except Exception as e:  # noqa: BLE001 - counted by the reconciler; retried at the next relist
            log.warning("listwatch: reconcile of tenant %s failed: %s", name, e)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, *, sync_timeout: float = 60.0) -> ListWatchController:
        """Start watching; return once the first LIST has been reconciled.

        Raises:
            TimeoutError: the first LIST did not complete within ``sync_timeout`` s.
        """
        self._stopping.clear()
        self.reflector.start()
        if not self.reflector.wait_for_sync(sync_timeout):
            self.stop()
            raise TimeoutError(f"listwatch: first LIST of tenants not done within {sync_timeout}s")
        if self.relist_period:
            self._timer = threading.Thread(target=self._relist_loop, name="listwatch-relist", daemon=True)
            self._timer.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop and join all threads. Raises TimeoutError if one does not finish in time."""
        self._stopping.set()
        if self._timer is not None:
            self._timer.join(timeout)
            self._timer = None
        self.reflector.stop(timeout)
        self.api.close()  # its connections; a later start() opens new ones

    def _relist_loop(self) -> None:
        assert self.relist_period
        while not self._stopping.wait(self.relist_period):
            self.reflector.relist()

    def on_event(self, observer: Callable[[WatchEvent], None]) -> None:
        """Hear every watch event and reflector marker (see :meth:`Reflector.on_event`)."""
        self.reflector.on_event(observer)

    def _drop_stream(self) -> bool:
        """Test hook: break the open watch connection (see :meth:`Reflector._drop_stream`)."""
        return self.reflector._drop_stream()

    def stats(self) -> ControllerStats:
        """Counters since creation; requests as measured by the controller's own client."""
        return ControllerStats.measure(
            self.api.counts(), **self.reconciler.counters(),
            events=self.reflector.events, relists=max(self.reflector.lists - 1, 0),
        )

    def __enter__(self) -> ListWatchController:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
