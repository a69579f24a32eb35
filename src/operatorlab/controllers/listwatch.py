"""LIST, then WATCH from the list's resourceVersion: the reflector, and a controller on it.

:class:`Reflector` is client-go's ``tools/cache/reflector.go`` in Python, with
threads (read in k8s.io/client-go v0.36.3):

1. **LIST** the collection, in pages (:mod:`~operatorlab.controllers.pager`).
   The list's ``metadata.resourceVersion`` is the point in the object history
   the list is a snapshot of. Which resourceVersion the LIST *asks* for
   matters: ``"0"`` the first time (whatever the API server's watch cache
   holds, served from memory), ``""`` for the newest state (a consistent
   read; since Kubernetes 1.34 also served from the watch cache, once the
   cache has caught up with etcd), or the last one seen, for a relist
   (:func:`~operatorlab.controllers.reflector_policy.list_resource_version`).
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
4. Anything else -- ``410 Gone`` (the history we would resume from is no
   longer kept), another error, a stream that ended at once -- is decided by
   :func:`~operatorlab.controllers.reflector_policy.decide`, client-go's rules
   row by row: back off (800 ms doubling to 30 s, with jitter:
   :mod:`~operatorlab.controllers.backoff`), then LIST again (a *relist*), or,
   for ``429 Too Many Requests`` and a refused connection, WATCH again from the
   same resourceVersion. A 410 may come as an ``ERROR`` event on an open stream
   (what kube-apiserver's watch cache sends) or as the HTTP status of the watch
   request; either way the reflector backs off, then relists.

The reflector is given its LIST and WATCH calls (a :class:`ListerWatcher`,
client-go's ``cache.ListerWatcher``), so its loop runs the same against the
API server (:class:`ListWatch`) and against scripted answers in a unit test.

The raw stream (``watch=True`` with ``_preload_content=False``) is read here
instead of ``kubernetes.watch.Watch``, because that helper hides what the
lesson is about: it retries a first 410 by itself and turns other ERROR events
into exceptions.

Feature gates, as read in k8s.io/apiserver and k8s.io/client-go v0.36.3: the
server's ``ConsistentListFromCache`` (a LIST at resourceVersion ``""`` served
from the watch cache) was alpha in 1.28, on by default since 1.31 and is GA,
always on, since 1.34; its ``WatchList`` (the initial state sent as watch
events) is beta, on by default since 1.34 (it was on in 1.32 and off again in
1.33); client-go's ``WatchListClient`` is beta, on by default since 1.35.

**Streaming list** (``watch_list=True``, lesson 13; client-go's ``watchList``, KEP-3157):
instead of step 1, one WATCH with ``sendInitialEvents=true``,
``resourceVersionMatch=NotOlderThan`` and ``allowWatchBookmarks=true``, from ``""``
(a consistent read) or, after a failure, from the last resourceVersion seen. Its
``ADDED`` events go into a temporary store
(:class:`~operatorlab.controllers.streaming.InitialEvents`) until the bookmark
annotated ``k8s.io/initial-events-end: "true"``; then the sink's ``replace`` gets the
collection at that bookmark's resourceVersion, the reflector counts as synced, and
the *same* stream goes on with the changes since, as step 2's watch would. A stream
that ends or fails before that bookmark is a failed list: back off, then stream
again. As in client-go, a server that refuses the request (a 4xx other than 429 and
410: an old server without the ``WatchList`` gate answers a plain watch or an
Invalid) makes this reflector fall back to one LIST + WATCH, and it tries the stream
again at its next list.

Where client-go does more: its watch timeout is random in [5, 10) minutes
(here: ``watch_timeout``, fixed); since 1.35 its reflector streams by default
(the ``WatchListClient`` feature, beta, on by default since 1.35), where this one
streams only when asked (``watch_list=True``, default off: lessons 02-03 teach the
LIST); client-go also checks a streamed state against a LIST when
``KUBE_WATCHLIST_INCONSISTENCY_DETECTOR`` is set, which this reflector does not; and
a server that sends a plain watch (no initial events, no end bookmark) is told apart
by client-go only by waiting, as here (the stream ends without the bookmark: back off,
then stream again).

Sources: Kubernetes API concepts, "Efficient detection of changes", "Watch
bookmarks", "Retrieving large results sets in chunks" and "Resource versions"
(https://kubernetes.io/docs/reference/using-api/api-concepts/); client-go
``tools/cache/reflector.go`` and ``tools/pager/pager.go``.

:class:`ListWatchController` reconciles on every event it receives (no cache, no
work queue): the step between polling and the informer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import urllib3
from kubernetes import client

from operatorlab import tenants
from operatorlab.controllers.backoff import BackoffManager
from operatorlab.controllers.metrics import ControllerStats, CountingApiClient
from operatorlab.controllers.pager import DEFAULT_PAGE_SIZE, list_pages
from operatorlab.controllers.reconciler import TenantReconciler
from operatorlab.controllers.reflector_policy import (
    Attempt,
    Decision,
    Failure,
    Interrupt,
    Next,
    Outcome,
    RequestFailed,
    decide,
    list_resource_version,
)
from operatorlab.controllers.streaming import InitialEvents, watch_list_query

__all__ = [
    "TENANTS",
    "ListWatch",
    "ListWatchController",
    "ListerWatcher",
    "Reflector",
    "ReflectorSink",
    "Resource",
    "StreamBroken",
    "StreamingListerWatcher",
    "WatchEvent",
    "WatchStream",
    "failure_of",
]

log = logging.getLogger(__name__)


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
        """LIST: ``list_cluster_custom_object`` or ``list_namespaced_custom_object``; kwargs passed on."""
        if self.namespace:
            return api.list_namespaced_custom_object(self.group, self.version, self.namespace, self.plural, **kwargs)
        return api.list_cluster_custom_object(self.group, self.version, self.plural, **kwargs)

    def watch(self, api: client.CustomObjectsApi, **kwargs: Any) -> urllib3.BaseHTTPResponse:
        """WATCH: the same call with ``watch=True``; returns the open, unread HTTP response."""
        response: urllib3.BaseHTTPResponse = self.list(api, watch=True, _preload_content=False, **kwargs)
        return response


#: hedronite.io/v1 Tenant (crds/tenant.yaml), cluster-scoped.
TENANTS = Resource(tenants.GROUP, tenants.VERSION, tenants.PLURAL)


@dataclass(frozen=True)
class WatchEvent:
    """One entry of the watch timeline.

    Attributes:
        type: a server event type (``ADDED``, ``MODIFIED``, ``DELETED``,
            ``BOOKMARK``, ``ERROR``) or a reflector marker: ``LIST`` (a list
            completed; ``resource_version`` is the list's), ``WATCH`` (a
            stream opened from ``resource_version``), ``CLOSED`` (the server
            ended the stream, normally at ``timeoutSeconds``), ``DROPPED`` (the
            connection broke), ``BACKOFF`` (the reflector waits before its next
            request; ``detail`` says how long and why). A failed request is an
            ``ERROR`` marker with the answer's ``code``.
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


# -- the LIST and WATCH calls a reflector is given ------------------------------------------


class StreamBroken(Exception):
    """The connection of an open watch broke (no end-of-stream from the server)."""


class WatchStream(Protocol):
    """An open watch: its events as they arrive, and a way to close it from another thread."""

    def events(self) -> Generator[Mapping[str, Any], None, None]:
        """Each decoded event ``{"type": ..., "object": ...}``, until the stream ends.

        Closing the generator releases the connection.

        Raises:
            StreamBroken: the connection broke.
            RequestFailed: a line could not be decoded.
        """
        ...

    def close(self) -> None:
        """Close it now (safe from any thread): :meth:`events` stops soon after."""
        ...


class ListerWatcher(Protocol):
    """client-go ``cache.ListerWatcher``: the two requests a reflector makes.

    Both raise :class:`~operatorlab.controllers.reflector_policy.RequestFailed`
    when the request fails.
    """

    def list(self, *, resource_version: str, limit: int, continue_token: str, timeout: float) -> Mapping[str, Any]:
        """One LIST page: ``resource_version`` ``""`` is sent as no resourceVersion at all; 0 ``limit``: unpaged."""
        ...

    def watch(self, *, resource_version: str, timeout: float) -> WatchStream:
        """Open a watch from ``resource_version``, with bookmarks, that the server ends after ``timeout`` s."""
        ...


class StreamingListerWatcher(ListerWatcher, Protocol):
    """A :class:`ListerWatcher` that can also open a streaming list (``sendInitialEvents=true``)."""

    def watch_list(self, *, resource_version: str, timeout: float) -> WatchStream:
        """A WATCH with ``sendInitialEvents=true``, ``resourceVersionMatch=NotOlderThan``, from ``resource_version``."""
        ...


class ListWatch:
    """A :class:`ListerWatcher` for one :class:`Resource` through the kubernetes client (a streaming one too).

    Args:
        api_client: used for every request (a
            :class:`~operatorlab.controllers.metrics.CountingApiClient` counts them).
        resource: the collection.
        connect_timeout: seconds to establish a connection.
        read_margin: seconds past a watch's timeout after which a silent
            stream is taken as dead (the client-side read timeout).
    """

    def __init__(self, api_client: client.ApiClient, resource: Resource, *, connect_timeout: float = 10.0,
                 read_margin: float = 30.0) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.resource = resource
        self.connect_timeout = connect_timeout
        self.read_margin = read_margin

    def list(self, *, resource_version: str, limit: int, continue_token: str, timeout: float) -> Mapping[str, Any]:
        options: dict[str, Any] = {"timeout_seconds": int(timeout),
                                   "_request_timeout": (self.connect_timeout, timeout + 5)}
        if resource_version:
            options["resource_version"] = resource_version
        if limit:
            options["limit"] = limit
        if continue_token:
            options["_continue"] = continue_token
        try:
            body: Mapping[str, Any] = self.resource.list(self.api, **options)
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            raise RequestFailed(failure_of(e)) from e
        return body

    def watch(self, *, resource_version: str, timeout: float) -> HttpWatchStream:
        try:
            response = self.resource.watch(
                self.api, resource_version=resource_version, allow_watch_bookmarks=True,
                timeout_seconds=int(timeout), _request_timeout=(self.connect_timeout, timeout + self.read_margin),
            )
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            raise RequestFailed(failure_of(e)) from e
        return HttpWatchStream(response)

    def watch_list(self, *, resource_version: str, timeout: float) -> HttpWatchStream:
        # CustomObjectsApi has no send_initial_events (kubernetes client 37.0.3; CoreV1Api's list_* and the
        # dynamic client's watch() do): the request is built from the client's own parts, with its query.
        path = f"/apis/{self.resource.group}/{self.resource.version}"
        if self.resource.namespace:
            path += f"/namespaces/{self.resource.namespace}"
        query = [*watch_list_query(resource_version).items(), ("timeoutSeconds", str(int(timeout)))]
        api_client = self.api.api_client
        try:
            request = api_client.param_serialize(
                "GET", f"{path}/{self.resource.plural}", query_params=query,
                header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
            answer = api_client.call_api(*request, _request_timeout=(self.connect_timeout, timeout + self.read_margin))
            if not 200 <= answer.status <= 299:
                answer.read()
                raise client.ApiException.from_response(http_resp=answer, body=None, data=None)
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            raise RequestFailed(failure_of(e)) from e
        return HttpWatchStream(answer.response)


class HttpWatchStream:
    """A :class:`WatchStream` over a streamed HTTP response: one JSON event per line."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self.response = response

    def events(self) -> Generator[Mapping[str, Any], None, None]:
        try:
            for line in _lines(self.response):
                try:
                    yield json.loads(line)
                except ValueError as e:  # client-go: the decoder's error becomes a 500 "ClientWatchDecoding"
                    failure = Failure(500, "InternalError", message=f"unable to decode a watch event: {e}")
                    raise RequestFailed(failure) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise StreamBroken(_describe(e)) from e
        finally:  # a watch connection is not reused: close it, then give it back to the pool
            self.response.close()
            self.response.release_conn()

    def close(self) -> None:
        try:
            self.response.shutdown()  # urllib3 >= 2.3: shut the socket down, waking the blocked read
        except (AttributeError, ValueError, RuntimeError, OSError):
            try:
                self.response.close()
            except Exception as e:  # noqa: BLE001 - best effort: the read will fail either way
                log.debug("closing a watch response: %s", e)


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
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


def _refused_streaming(failure: Failure) -> bool:
    """The server will not serve a streaming list (a 4xx other than 429 and 410): LIST instead."""
    return failure.code is not None and 400 <= failure.code < 500 and not (failure.too_many_requests or failure.expired)


def failure_of(e: BaseException) -> Failure:
    """What a request's exception says: the ``Status`` the server answered, or a network failure.

    A refused connection is found anywhere in the exception's chain (urllib3
    wraps ``ConnectionRefusedError`` in ``NewConnectionError`` in
    ``MaxRetryError``), as apimachinery's ``IsConnectionRefused`` unwraps to
    ``ECONNREFUSED``.
    """
    if isinstance(e, client.ApiException):
        status: dict[str, Any] = {}
        with contextlib.suppress(TypeError, ValueError):  # no Status body (e.g. a proxy's own answer)
            status = json.loads(e.body or "")
        return _failure_from_status(status, code=e.status, message=_describe(e))
    return Failure(refused=_refused(e), message=_describe(e))


def _failure_from_status(status: Mapping[str, Any], *, code: int | None = None, message: str = "") -> Failure:
    """A Failure from a ``Status`` object (a failed request's body, or an ERROR event's object)."""
    causes = ((status.get("details") or {}).get("causes")) or []
    return Failure(
        code=status.get("code") or code, reason=status.get("reason") or "",
        causes=tuple(c.get("reason", "") for c in causes if isinstance(c, Mapping)),  # Go's StatusCause.Type
        message=message or status.get("message") or "",
    )


def _refused(e: BaseException | None) -> bool:
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError):
            return True
        reason = getattr(e, "reason", None)  # urllib3 MaxRetryError.reason
        e = reason if isinstance(reason, BaseException) else (e.__cause__ or e.__context__)
    return False


def _describe(e: BaseException) -> str:
    if isinstance(e, client.ApiException):
        try:
            return f"{e.status}: {json.loads(e.body or '')['message']}"
        except (TypeError, ValueError, KeyError):
            return f"{e.status}: {e.reason}"
    return f"{type(e).__name__}: {e}"


# -- the reflector ----------------------------------------------------------------------------


class ReflectorSink(Protocol):
    """Where a :class:`Reflector` delivers what it learns (client-go: the Store / DeltaFIFO).

    Both are called on the reflector's thread, one at a time, in order.
    """

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        """A (re)list completed: ``objects`` is the whole collection at ``resource_version``."""

    def apply(self, event: WatchEvent) -> None:
        """One ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK`` event from the stream."""


class Reflector:
    """Keeps a :class:`ReflectorSink` in step with a collection by LIST + WATCH.

    Runs on one background thread (:meth:`start` / :meth:`stop`). After each
    LIST or WATCH attempt, :func:`~operatorlab.controllers.reflector_policy.decide`
    says what comes next and whether to back off first; the backoff is
    client-go's (:data:`~operatorlab.controllers.backoff.REFLECTOR_BACKOFF`),
    one :class:`~operatorlab.controllers.backoff.BackoffManager` for every reason.

    Args:
        list_watch: the LIST and WATCH calls (:class:`ListWatch` for a real
            collection).
        sink: receives the lists and events.
        watch_timeout: seconds; sent as the watch's ``timeoutSeconds``, so the
            server closes each stream after that long and we re-watch
            (client-go picks 5-10 minutes at random).
        list_timeout: seconds for each LIST page (client and ``timeoutSeconds``).
        page_size: LIST page size (client-go ``WatchListPageSize``); 0 chooses
            as client-go does: pages of 500 for resourceVersion ``""`` or ``"0"``
            (the server ignores the limit for ``"0"``, serving the whole list
            from its cache), and no paging at a given resourceVersion, so that
            the watch cache can serve the relist.
        first_list_resource_version: ``"0"`` (client-go: whatever the watch cache
            holds) or ``""`` (the newest state, a consistent read).
        watch_list: get the state by a streaming list (``sendInitialEvents=true``)
            instead of a LIST; ``list_watch`` must then be a
            :class:`StreamingListerWatcher`.
        backoff: the backoff manager (default: client-go's parameters).
        clock: monotonic seconds, to time the streams (``time.monotonic``).
        name: for thread names and logs.
    """

    def __init__(
        self,
        list_watch: ListerWatcher,
        sink: ReflectorSink,
        *,
        watch_timeout: float = 300.0,
        list_timeout: float = 60.0,
        page_size: int = 0,
        first_list_resource_version: str = "0",
        watch_list: bool = False,
        backoff: BackoffManager | None = None,
        clock: Callable[[], float] = time.monotonic,
        name: str = "",
    ) -> None:
        if first_list_resource_version not in ("0", ""):
            raise ValueError(f'first_list_resource_version must be "0" or "", got {first_list_resource_version!r}')
        if page_size < 0:
            raise ValueError(f"page_size must be >= 0, got {page_size}")
        self.list_watch = list_watch
        self.sink = sink
        self.watch_timeout = watch_timeout
        self.list_timeout = list_timeout
        self.page_size = page_size
        self.first_list_resource_version = first_list_resource_version
        if watch_list and not callable(getattr(list_watch, "watch_list", None)):
            raise TypeError(f"watch_list=True needs a StreamingListerWatcher; {type(list_watch).__name__} has no "
                            "watch_list()")
        self.watch_list = watch_list
        self._fall_back_to_list = False  # the server refused a streaming list: LIST once
        self.backoff = backoff or BackoffManager()
        self.name = name or type(sink).__name__.lower()
        self._clock = clock
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: WatchStream | None = None
        self._interrupt: Interrupt | None = None  # why we closed the open stream ourselves
        self._relist_pending = False
        self._resource_version = ""
        self._resource_version_unavailable = False  # client-go isLastSyncResourceVersionUnavailable
        self._paginated_result = False  # client-go paginatedResult: a "0" list came back in pages
        self._next_watch_from: str | None = None  # one-shot override set by rewatch_from()
        self._observers: list[Callable[[WatchEvent], None]] = []
        self.decisions: list[Decision] = []  # the last few, newest last (for a lesson or a test)
        self.lists = 0  # lists completed (streamed ones too)
        self.streamed_lists = 0  # of them, streaming lists
        self.list_requests = 0  # LIST pages requested, failed ones included
        self.watches = 0  # streams opened
        self.events = 0
        self.expired = 0  # 410 Gone answers
        self.drops = 0  # streams that broke (not closed by the server)
        self.backoffs = 0

    @classmethod
    def for_resource(
        cls, api_client: client.ApiClient, resource: Resource, sink: ReflectorSink, **kwargs: Any
    ) -> Reflector:
        """A reflector for ``resource`` through ``api_client`` (:class:`ListWatch`); kwargs as for the class."""
        return cls(ListWatch(api_client, resource), sink, **{"name": resource.plural, **kwargs})

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> Reflector:
        """Start the LIST + WATCH thread. Raises RuntimeError if already started."""
        if self._thread is not None:
            raise RuntimeError(f"reflector {self.name}: already started")
        self._stopping.clear()
        self._synced.clear()  # a restart lists again before it counts as synced
        self._relist_pending = False
        self._thread = threading.Thread(target=self._run, name=f"reflector-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop and join the thread (an open stream is closed at once, a backoff cut short).

        Raises:
            TimeoutError: the thread did not finish within ``timeout`` s (e.g. the
                sink is stuck in a long reconcile).
        """
        self._stopping.set()
        self._close_stream(None)
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
        """LIST again as soon as possible (the open stream is closed; no backoff)."""
        self._close_stream(Interrupt.RELIST)

    def rewatch_from(self, resource_version: str) -> None:
        """Resume the next watch from ``resource_version`` instead of the last seen one.

        With a very old one (e.g. ``"1"``) the server answers 410 Gone and the
        reflector backs off, then relists: how a notebook forces the 410 path
        on a real server.
        """
        # Not written to _resource_version: events still arriving on the open stream
        # would overwrite it before the next watch starts.
        with self._lock:
            self._next_watch_from = resource_version
        self._close_stream(Interrupt.REWATCH)

    def break_watch(self) -> bool:
        """Close the open watch connection from our side, as a network failure would.

        The reflector sees the stream end (``DROPPED``) and watches again, at
        once, from the last resourceVersion it saw. Returns False if no stream
        was open.
        """
        return self._close_stream(Interrupt.REWATCH)

    def _close_stream(self, why: Interrupt | None) -> bool:
        with self._lock:
            stream = self._stream
            if stream is None:
                self._relist_pending = self._relist_pending or why is Interrupt.RELIST
                return False
            self._interrupt = why
        stream.close()
        return True

    # -- the loop -------------------------------------------------------------------

    def _run(self) -> None:
        step = Next.LIST
        while not self._stopping.is_set():
            with self._lock:
                if self._relist_pending:
                    step, self._relist_pending = Next.LIST, False
            try:
                if step is Next.LIST:
                    outcome = self._stream_list() if self.watch_list and not self._fall_back_to_list else self._list()
                else:
                    outcome = self._watch()
            except Exception as e:  # a broken list or watch call must not end the thread unseen
                log.exception("reflector %s: %s failed unexpectedly", self.name, step.value)
                attempt = Attempt.LIST if step is Next.LIST else Attempt.WATCH
                outcome = Outcome(attempt, Failure(message=_describe(e)))
            if self._stopping.is_set():
                outcome = replace(outcome, stopping=True)
            decision = decide(outcome)
            self.decisions = [*self.decisions[-99:], decision]
            if decision.next is Next.STOP:
                return
            if decision.list_latest:
                with self._lock:
                    self._resource_version_unavailable = True
            if decision.back_off:
                delay = self.backoff.step()
                self.backoffs += 1
                self._emit(WatchEvent("BACKOFF", resource_version=self.resource_version,
                                      detail=f"{delay:.2f}s, then {decision.next.value}: {decision.why}"))
                log.info("reflector %s: %s; next %s in %.2fs", self.name, decision.why, decision.next.value, delay)
                if self._stopping.wait(delay):
                    return
            step = decision.next

    def _list(self) -> Outcome:
        """One (paged) LIST, delivered to the sink."""
        with self._lock:
            resource_version = list_resource_version(
                self._resource_version, self._resource_version_unavailable, initial=self.first_list_resource_version)
        page_size = self._page_size(resource_version)

        def page(*, resource_version: str, limit: int, continue_token: str) -> Mapping[str, Any]:
            self.list_requests += 1
            return self.list_watch.list(resource_version=resource_version, limit=limit, continue_token=continue_token,
                                        timeout=self.list_timeout)

        try:
            listed = list_pages(page, resource_version=resource_version, page_size=page_size)
        except RequestFailed as e:
            self._emit(WatchEvent("ERROR", resource_version=resource_version, code=e.failure.code,
                                  detail=f"LIST failed: {e.failure.message}"))
            return Outcome(Attempt.LIST, e.failure, resource_version=resource_version)
        if resource_version == "0" and listed.paginated:
            self._paginated_result = True  # the watch cache is off for this resource: keep paging
        self.lists += 1
        self._emit(WatchEvent("LIST", resource_version=listed.resource_version,
                              detail=f"{len(listed.items)} objects in {listed.pages} page(s), "
                                     f"asked for resourceVersion {resource_version!r}"))
        self._replace(listed.items, listed.resource_version)
        self._fall_back_to_list = False  # the next list streams again (watch_list=True)
        return Outcome(Attempt.LIST, resource_version=resource_version)

    def _replace(self, items: list[dict[str, Any]], resource_version: str) -> None:
        """A (re)list's result, from a LIST or a streaming list: the sink replaced, the reflector synced."""
        self._deliver(lambda: self.sink.replace(items, resource_version))
        with self._lock:
            self._resource_version = resource_version
            self._resource_version_unavailable = False
            self._next_watch_from = None  # a fresh list supersedes any requested rewatch
        self._synced.set()

    def _stream_list(self) -> Outcome:
        """A streaming list: a WATCH with initial events; once they end, the same stream goes on as a watch."""
        with self._lock:
            resource_version = list_resource_version(self._resource_version, self._resource_version_unavailable,
                                                     initial="")  # client-go: "" (consistent), never "0"
        return self._watch(streaming_list_from=resource_version)

    def _page_size(self, resource_version: str) -> int:
        """client-go ``list``: the explicit size, else 500, but unpaged at a given resourceVersion."""
        if self.page_size:
            return self.page_size
        if self._paginated_result or resource_version in ("", "0"):
            return DEFAULT_PAGE_SIZE
        return 0

    def _watch(self, *, streaming_list_from: str | None = None) -> Outcome:
        """One watch request, its stream read to the end; with ``streaming_list_from``, a streaming list."""
        initial = InitialEvents() if streaming_list_from is not None else None
        if streaming_list_from is not None:
            resource_version = streaming_list_from
        else:
            with self._lock:
                resource_version = self._next_watch_from or self._resource_version
                self._next_watch_from = None
        started = self._clock()  # before the request, as client-go (a proxy may hold the headers)
        try:
            if streaming_list_from is not None:
                stream = self.list_watch.watch_list(  # type: ignore[attr-defined]  # checked in __init__
                    resource_version=resource_version, timeout=self.watch_timeout)
            else:
                stream = self.list_watch.watch(resource_version=resource_version, timeout=self.watch_timeout)
        except RequestFailed as e:
            if e.failure.expired:
                self.expired += 1
            what = "WATCH" if initial is None else "streaming list"
            self._emit(WatchEvent("ERROR", resource_version=resource_version, code=e.failure.code,
                                  detail=f"{what} failed: {e.failure.message}"))
            if initial is None:
                return Outcome(Attempt.WATCH, e.failure, resource_version=resource_version)
            if _refused_streaming(e.failure):  # client-go: "Falling back to regular list"
                self._fall_back_to_list = True
                return self._list()
            return Outcome(Attempt.LIST, e.failure, resource_version=resource_version)
        self.watches += 1
        with self._lock:
            self._stream, self._interrupt = stream, None
        if self._stopping.is_set():  # stop() ran before the stream was registered
            stream.close()
        self._emit(WatchEvent("WATCH", resource_version=resource_version,
                              detail="" if initial is None else "sendInitialEvents=true"))
        events, failure, ended, detail = 0, None, "CLOSED", "server closed the stream"
        received = stream.events()
        try:
            for raw in received:
                event = WatchEvent.from_raw(raw)
                events += 1
                self.events += 1
                self._emit(event)
                if event.type == "ERROR":
                    failure = _failure_from_status(event.object or {}, message=event.detail)
                    break
                if initial is not None and not initial.done:
                    if event.type in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") and initial.add(raw):
                        self._streamed(initial)
                    continue
                self._apply(event)
        except RequestFailed as e:
            failure = e.failure
        except StreamBroken as e:
            ended, detail = "DROPPED", str(e)
        finally:
            with self._lock:
                self._stream = None
                interrupted, self._interrupt = self._interrupt, None
            received.close()
        if failure is not None and failure.expired:
            self.expired += 1
        if initial is not None and not initial.done:  # no initial-events-end bookmark: the list failed
            self._emit(WatchEvent("ERROR", resource_version=resource_version, code=failure.code if failure else None,
                                  detail=f"streaming list ended after {len(initial)} objects, before the "
                                         "initial-events-end bookmark"))
            if self._stopping.is_set():
                return Outcome(Attempt.LIST, failure, resource_version=resource_version, stopping=True)
            return Outcome(Attempt.LIST, failure or Failure(message="streaming list ended before its bookmark"),
                           resource_version=resource_version)
        if failure is None:  # an ERROR event is its own marker; otherwise say how the stream ended
            if self._stopping.is_set():
                ended, detail = "CLOSED", "reflector stopped"
            elif interrupted is not None:
                ended, detail = "DROPPED", "connection closed by the client"
            if ended == "DROPPED":
                self.drops += 1
            self._emit(WatchEvent(ended, resource_version=self.resource_version, detail=detail))
        return Outcome(Attempt.STREAM, failure, resource_version=resource_version, seconds=self._clock() - started,
                       events=events, interrupted=interrupted)

    def _streamed(self, initial: InitialEvents) -> None:
        self.lists += 1
        self.streamed_lists += 1
        items = initial.items()
        self._emit(WatchEvent("LIST", resource_version=initial.resource_version,
                              detail=f"{len(items)} objects streamed (sendInitialEvents), to the "
                                     "initial-events-end bookmark"))
        self._replace(items, initial.resource_version)
        self._fall_back_to_list = False

    def _apply(self, event: WatchEvent) -> None:
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
        self.reflector = Reflector.for_resource(self.api, TENANTS, self, watch_timeout=watch_timeout, name="listwatch")
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
