"""Measuring what a controller costs the API server: two real measurements.

1. **Client side, exact**: :class:`CountingApiClient` is a
   ``kubernetes.client.ApiClient`` that counts every HTTP request it sends, by
   Kubernetes verb (``list``, ``watch``, ``get``, ``create``, ``update``,
   ``patch``, ``delete``, ``deletecollection``) and resource, the way the API
   server's own request-info resolver classifies them (k8s.io/apiserver
   ``pkg/endpoints/request/requestinfo.go``). Each controller owns one, so its
   numbers are its own even when other clients share the cluster.
2. **Server side, everyone**: :func:`read_apiserver_requests` reads the
   API server's own ``/metrics`` and sums the counter ``apiserver_request_total``
   by verb and resource: the cost as the server sees it, from *all* clients
   (kube-controller-manager, the scheduler, kwok, other tests), so use
   differences over a window and expect them to be *at least* the client-side
   count. The server records a request when it completes, so a WATCH shows up
   only when its stream ends.

:class:`ControllerStats` is the counter snapshot every hand-written
controller's ``stats()`` returns.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client

__all__ = [
    "WRITE_VERBS",
    "ApiRequest",
    "ControllerStats",
    "CountingApiClient",
    "RequestCounts",
    "classify_request",
    "parse_prometheus_samples",
    "read_apiserver_requests",
]

#: Verbs that change state in the API server.
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})

# Sub-resources of a namespace, so /api/v1/namespaces/x/status is not "resource status in namespace x".
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class ApiRequest:
    """One HTTP request a :class:`CountingApiClient` sent.

    Attributes:
        verb: Kubernetes verb (see :func:`classify_request`), or the lower-case
            HTTP method for a non-resource path such as ``/metrics``.
        resource: plural resource (``tenants``, ``namespaces``), or the path
            for a non-resource request.
        namespace, name, subresource: from the path (for a create, the name
            from the body's ``metadata.name``); ``""`` when absent.
        method: the HTTP method.
        path: the URL path, without the query.
        status: HTTP status code; 0 if no response arrived (connection error).
        seconds: time to the response headers (for a watch: until the stream opened).
        time: ``time.time()`` when the request was sent.
    """

    verb: str
    resource: str
    namespace: str
    name: str
    subresource: str
    method: str
    path: str
    status: int
    seconds: float
    time: float

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS


def classify_request(
    method: str, url: str, query: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None
) -> dict[str, str]:
    """Kubernetes verb, resource, namespace, name and subresource of a request.

    Follows the API server's request-info resolver: ``GET`` of a collection is
    ``list`` (``watch`` with ``?watch=true``), of one object ``get``; ``POST`` is
    ``create``; ``PUT`` ``update``; ``PATCH`` ``patch``; ``DELETE`` of one object
    ``delete``, of a collection ``deletecollection``. A path outside ``/api`` and
    ``/apis/<group>/<version>`` is a non-resource request: its verb is the
    lower-case method and its "resource" the path.

    Args:
        method: HTTP method.
        url: full URL or path; a query in it is read too.
        query: extra query parameters (older clients pass them apart from the URL).
    """
    parts = urlsplit(url)
    params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    if query:
        items = query.items() if isinstance(query, Mapping) else query
        params.update({str(k): str(v) for k, v in items})
    method = method.upper()
    path = parts.path.rstrip("/") or "/"
    segments = [s for s in path.split("/") if s]
    if segments[:1] == ["api"] and len(segments) >= 2:
        rest = segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 3:
        rest = segments[3:]
    else:
        rest = []
    info = {"resource": path, "namespace": "", "name": "", "subresource": ""}
    if not rest:  # discovery (/api, /apis/g/v) or non-resource (/metrics, /healthz)
        return {"verb": method.lower(), **info}
    watch = params.get("watch", "").lower() in ("true", "1")
    if rest[0] == "watch":  # the deprecated /api/v1/watch/... form
        watch, rest = True, rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
        info["namespace"], rest = rest[1], rest[2:]
    info["resource"] = rest[0]
    info["name"] = rest[1] if len(rest) > 1 else ""
    info["subresource"] = "/".join(rest[2:])
    collection = not info["name"]
    if method == "GET":
        verb = "watch" if watch else ("list" if collection else "get")
    elif method == "DELETE":
        verb = "deletecollection" if collection else "delete"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
    return {"verb": verb, **info}


@dataclass(frozen=True)
class RequestCounts:
    """Request totals by ``(verb, resource)``; subtract two to get a window.

    ``after - before`` keeps only the requests made in between.
    """

    by_verb_resource: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def count(self, verb: str | Iterable[str] | None = None, resource: str | None = None) -> float:
        """Requests matching ``verb`` (one, or any of several) and ``resource``; None matches all."""
        verbs = {verb} if isinstance(verb, str) else (set(verb) if verb is not None else None)
        return sum(
            n for (v, r), n in self.by_verb_resource.items()
            if (verbs is None or v in verbs) and (resource is None or r == resource)
        )

    @property
    def total(self) -> float:
        return self.count()

    @property
    def writes(self) -> float:
        return self.count(WRITE_VERBS)

    def by_verb(self) -> dict[str, float]:
        """Totals per verb, over all resources."""
        out: dict[str, float] = {}
        for (verb, _), n in self.by_verb_resource.items():
            out[verb] = out.get(verb, 0.0) + n
        return out

    def __sub__(self, other: RequestCounts) -> RequestCounts:
        keys = set(self.by_verb_resource) | set(other.by_verb_resource)
        diff = {k: self.by_verb_resource.get(k, 0) - other.by_verb_resource.get(k, 0) for k in keys}
        return RequestCounts({k: n for k, n in diff.items() if n})


class CountingApiClient(client.ApiClient):
    """A ``kubernetes.client.ApiClient`` that counts every request it sends.

    Use it wherever an ``ApiClient`` goes (``CoreV1Api(counting)``,
    ``CustomObjectsApi(counting)``); every request, including watch streams and
    failed requests, passes through one choke point (the REST client's
    ``request``) and is recorded as an :class:`ApiRequest`. Thread-safe.

    Args:
        configuration: a ``kubernetes.client.Configuration`` (see
            :meth:`from_kubeconfig` and :meth:`wrap`).
        history: how many recent :class:`ApiRequest` records :meth:`requests` keeps.
    """

    def __init__(
        self, configuration: client.Configuration | None = None, *, history: int = 10_000, **kwargs: Any
    ) -> None:
        super().__init__(configuration, **kwargs)
        self._counts_lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._log: deque[ApiRequest] = deque(maxlen=history)
        self._listeners: list[Callable[[ApiRequest], None]] = []
        # Wrap the instance's REST client: both old (GET/POST helpers calling
        # self.request) and new generated clients send everything through it.
        rest = self.rest_client
        send: Callable[..., Any] = rest.request

        def counted_request(method: str, url: str, *args: Any, **kw: Any) -> Any:
            started, wall = time.monotonic(), time.time()
            status = 0
            try:
                response = send(method, url, *args, **kw)
                status = int(getattr(response, "status", 0) or 0)
                return response
            except client.ApiException as e:
                status = int(e.status or 0)
                raise
            finally:
                seconds = time.monotonic() - started
                self._record(method, url, kw.get("query_params"), kw.get("body"), status, seconds, wall)

        rest.request = counted_request  # type: ignore[method-assign]  # deliberately, on this instance only

    def close(self) -> None:
        """Close the connection pools (a later request opens new ones)."""
        close: Callable[[], None] = super().close  # annotated loosely: the package leaves it untyped
        close()

    @classmethod
    def from_kubeconfig(cls, config_file: str | None = None, context: str | None = None) -> CountingApiClient:
        """A counting client for a kubeconfig (default ``$KUBECONFIG``, else ``~/.kube/config``).

        Raises:
            kubernetes.config.ConfigException: no usable kubeconfig.
        """
        from kubernetes import config

        configuration = client.Configuration()
        load: Callable[..., None] = config.load_kube_config  # annotated loosely: the package leaves it untyped
        load(config_file=config_file, context=context, client_configuration=configuration)
        return cls(configuration)

    @classmethod
    def wrap(cls, api_client: client.ApiClient | None = None) -> CountingApiClient:
        """A new counting client talking to the same cluster as ``api_client``, as the same user.

        ``None`` means the current kubeconfig (:meth:`from_kubeconfig`). The
        counts start at zero; ``api_client`` itself is not changed.
        """
        if api_client is None:
            return cls.from_kubeconfig()
        return cls(api_client.configuration)

    # -- reading the counts ------------------------------------------------

    def counts(self) -> RequestCounts:
        """A snapshot of the totals so far."""
        with self._counts_lock:
            return RequestCounts(dict(self._counts))

    def requests(self) -> list[ApiRequest]:
        """The most recent requests, oldest first."""
        with self._counts_lock:
            return list(self._log)

    def add_listener(self, listener: Callable[[ApiRequest], None]) -> None:
        """Call ``listener(request)`` after every request (on the requesting thread)."""
        with self._counts_lock:
            self._listeners.append(listener)

    def _record(self, method: str, url: str, query: Any, body: Any, status: int, seconds: float, wall: float) -> None:
        info = classify_request(method, url, query)
        if info["verb"] == "create" and not info["name"] and isinstance(body, Mapping):
            info["name"] = str((body.get("metadata") or {}).get("name") or "")
        request = ApiRequest(
            method=method.upper(), path=urlsplit(url).path, status=status, seconds=seconds, time=wall, **info)
        with self._counts_lock:
            self._counts[(request.verb, request.resource)] += 1
            self._log.append(request)
            listeners = tuple(self._listeners)
        for listener in listeners:
            listener(request)


# -- the API server's own /metrics ------------------------------------------------

# One Prometheus text-format sample: name{labels} value [timestamp]
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

# apiserver_request_total's verb label -> the client-side verb names above.
_SERVER_VERBS = {
    "GET": "get", "LIST": "list", "WATCH": "watch", "WATCHLIST": "watch", "POST": "create",
    "PUT": "update", "PATCH": "patch", "APPLY": "patch", "DELETE": "delete",
    "DELETECOLLECTION": "deletecollection", "CONNECT": "connect",
}


def parse_prometheus_samples(text: str, metric: str) -> list[tuple[dict[str, str], float]]:
    """The samples of one metric in Prometheus text exposition format.

    Returns ``[(labels, value), ...]``; comments and other metrics are skipped.
    A pure function, unit-tested without a cluster.

    Raises:
        ValueError: a sample line of ``metric`` cannot be parsed.
    """
    samples = []
    for line in text.splitlines():
        if not line.startswith(metric) or line.startswith("#"):
            continue
        m = _SAMPLE.match(line.strip())
        if not m or m["name"] != metric:
            continue
        labels: dict[str, str] = {}
        raw = m["labels"] or ""
        pos = 0
        while pos < len(raw):
            lm = _LABEL.match(raw, pos)
            if not lm:
                raise ValueError(f"cannot parse labels of {metric}: {line!r}")
            labels[lm[1]] = re.sub(r"\\[\\\"n]", lambda e: _UNESCAPE[e[0]], lm[2])
            pos = lm.end()
        samples.append((labels, float(m["value"])))
    return samples


def read_apiserver_requests(api_client: client.ApiClient, *, timeout: float = 10.0) -> RequestCounts:
    """``apiserver_request_total`` from the API server's ``/metrics``, by (verb, resource).

    Summed over response code, scope, group, version and subresource. Server
    verbs are renamed to the client-side ones (``LIST`` -> ``list``, ``POST`` ->
    ``create``, ``PUT`` -> ``update``, ``APPLY`` -> ``patch``) so the two
    measurements line up. These totals cover every client of the cluster.

    Args:
        api_client: a client whose user may ``get`` the non-resource URL
            ``/metrics`` (the admin kubeconfig of the local cluster may).
        timeout: seconds for the request.

    Raises:
        kubernetes.client.ApiException: the server refused (403: the user lacks
            ``get`` on ``/metrics``) or failed.
    """
    text = _get_text(api_client, "/metrics", timeout=timeout)
    totals: dict[tuple[str, str], float] = {}
    for labels, value in parse_prometheus_samples(text, "apiserver_request_total"):
        key = (_SERVER_VERBS.get(labels.get("verb", ""), labels.get("verb", "").lower()), labels.get("resource", ""))
        totals[key] = totals.get(key, 0.0) + value
    return RequestCounts(totals)


def _get_text(api_client: client.ApiClient, path: str, *, timeout: float) -> str:
    """GET a non-resource path with the client's credentials; the body as text."""
    configuration = api_client.configuration
    headers = {"Accept": "text/plain", "User-Agent": api_client.user_agent}
    for auth in configuration.auth_settings().values():  # bearer token, if any (client certs are in the pool)
        if auth.get("in") == "header" and auth.get("value"):
            headers[auth["key"]] = auth["value"]
    request: Callable[..., Any] = api_client.rest_client.request  # annotated loosely: the package leaves it untyped
    response = request("GET", configuration.host + path, headers=headers, _request_timeout=timeout)
    if getattr(response, "data", None) is None:
        response.read()
    body = response.data.decode("utf-8", errors="replace") if isinstance(response.data, bytes) else str(response.data)
    if not 200 <= response.status <= 299:
        raise client.ApiException(status=response.status, reason=f"GET {path}: {body[:300]}")
    return body


# -- what every hand-written controller reports ----------------------------------


@dataclass(frozen=True)
class ControllerStats:
    """Counters of one controller since it was created.

    Request counts are measured by the controller's own :class:`CountingApiClient`;
    the rest are counted by the controller.

    Attributes:
        requests: every API request the controller sent.
        lists: LIST requests (for polling this includes its orphan sweep's LIST of namespaces).
        watches: WATCH requests (streams opened).
        gets: GET requests of single objects (the reconcile reads the namespace and quota).
        writes: create/update/patch/delete requests: the changes it made.
        reconciles: calls of the reconcile (successful or not).
        failures: reconciles that raised.
        retries: reconciles re-queued with backoff (only the informer controller has a queue).
        cleanups: deletions of a Tenant's namespace after the Tenant went away.
        events: watch events received (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).
        relists: LISTs after the first one (a 410 Gone, an error or a periodic relist).
    """

    requests: int = 0
    lists: int = 0
    watches: int = 0
    gets: int = 0
    writes: int = 0
    reconciles: int = 0
    failures: int = 0
    retries: int = 0
    cleanups: int = 0
    events: int = 0
    relists: int = 0

    @classmethod
    def measure(cls, counts: RequestCounts, **counters: int) -> ControllerStats:
        """Combine request counts with the controller's own counters."""
        return cls(
            requests=int(counts.total),
            lists=int(counts.count("list")),
            watches=int(counts.count("watch")),
            gets=int(counts.count("get")),
            writes=int(counts.writes),
            **counters,
        )

    def __sub__(self, other: ControllerStats) -> ControllerStats:
        return ControllerStats(**{f: getattr(self, f) - getattr(other, f) for f in self.__dataclass_fields__})
