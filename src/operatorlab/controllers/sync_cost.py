"""What it costs to get in sync with a collection: one LIST against one streaming list (lesson 13, ``make bench``).

Both end with the same store (name -> object) and a resourceVersion to watch from. What
differs is the way there:

* ``LIST``: one GET of the whole collection, at resourceVersion ``""`` (a consistent read, as
  the streaming list's), unpaged; the client holds the whole body, then the decoded list,
  then the store built from it.
* ``streaming list``: one WATCH with ``sendInitialEvents=true`` (:mod:`.streaming`); the
  client decodes one event per line and keeps only the store, until the bookmark
  ``k8s.io/initial-events-end``.

:func:`measure` times one sync (wall clock, to synced), or traces it with ``tracemalloc``
(the peak of Python memory the client allocated during the sync: tracing slows Python down,
so time and memory are two runs), and samples the API server's resident memory
(``/proc/<pid>/status`` ``VmRSS``) while it runs, when given the kube-apiserver's pid.
"""

from __future__ import annotations

import json
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from operatorlab.controllers.listwatch import HttpWatchStream
from operatorlab.controllers.streaming import InitialEvents, watch_list_query

__all__ = ["MODES", "SyncCost", "fill", "measure"]

MODES = ("LIST", "streaming list")


@dataclass(frozen=True)
class SyncCost:
    """One sync: how many objects, how long, how much memory.

    Attributes:
        mode: ``LIST`` or ``streaming list``.
        objects: in the store once synced.
        seconds: from sending the request to a synced store (0 when traced).
        client_peak_mib: the peak of Python memory allocated during the sync (0 unless traced).
        apiserver_peak_mib: kube-apiserver's peak VmRSS sampled during the sync, minus its RSS
            before (0 without a pid): what the answer cost the server, roughly.
        resource_version: where a watch goes on from.
    """

    mode: str
    objects: int
    seconds: float
    client_peak_mib: float
    apiserver_peak_mib: float
    resource_version: str


def measure(api_client: client.ApiClient, path: str, mode: str, *, traced: bool = False,
            apiserver_pid: int | None = None, timeout: float = 300.0) -> SyncCost:
    """Sync once with the collection at ``path`` (``/api/v1/namespaces/NS/configmaps``) by ``mode``.

    Raises:
        ValueError: an unknown mode.
        RuntimeError: the stream ended before the initial-events-end bookmark.
        kubernetes.client.ApiException: the server refused the request.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    sampler = _RssSampler(apiserver_pid)
    if traced:
        tracemalloc.start()
        tracemalloc.reset_peak()
    baseline = tracemalloc.get_traced_memory()[0] if traced else 0
    started = time.monotonic()
    with sampler:
        store, resource_version = _by_list(api_client, path, timeout) if mode == "LIST" else _by_stream(
            api_client, path, timeout)
    seconds = time.monotonic() - started
    peak = 0.0
    if traced:
        peak = (tracemalloc.get_traced_memory()[1] - baseline) / 2**20
        tracemalloc.stop()
    return SyncCost(mode, len(store), 0.0 if traced else seconds, peak, sampler.peak_mib, resource_version)


def fill(core: client.CoreV1Api, namespace: str, count: int, *, payload_bytes: int = 256, workers: int = 4) -> int:
    """Make namespace ``namespace`` hold ``count`` ConfigMaps ``cm-00000``... of ``payload_bytes`` each.

    Only the missing ones are created (a second run costs one LIST), ``workers`` at a time;
    a namespace still terminating (an earlier run deleted it) is waited for, up to ``120`` s.
    Returns how many were created.
    """
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            found = core.read_namespace(namespace)
        except client.ApiException as e:
            if e.status != 404:
                raise
            break
        if not (found.metadata and found.metadata.deletion_timestamp):
            break
        time.sleep(0.5)
    try:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    except client.ApiException as e:
        if e.status != 409:
            raise
    have = {i.metadata.name for i in core.list_namespaced_config_map(namespace).items if i.metadata}
    missing = [name for name in (f"cm-{i:05d}" for i in range(count)) if name not in have]
    body = {"payload": "x" * payload_bytes}

    def create(name: str) -> None:
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name),
                                                                        data=body))

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, missing))
    return len(missing)


def _get(api_client: client.ApiClient, path: str, query: list[tuple[str, str]], timeout: float) -> Any:
    request = api_client.param_serialize("GET", path, query_params=query, header_params={"Accept": "application/json"},
                                         auth_settings=["BearerToken"])
    answer: Any = api_client.call_api(*request, _request_timeout=(10, timeout))
    if not 200 <= answer.status <= 299:
        answer.read()
        raise client.ApiException.from_response(http_resp=answer, body=None, data=None)
    return answer.response


def _by_list(api_client: client.ApiClient, path: str, timeout: float) -> tuple[dict[str, Any], str]:
    response = _get(api_client, path, [("resourceVersion", "")], timeout)
    try:
        body = json.loads(response.data)
    finally:
        response.release_conn()
    store = {item["metadata"]["name"]: item for item in body["items"]}
    return store, body["metadata"]["resourceVersion"]


def _by_stream(api_client: client.ApiClient, path: str, timeout: float) -> tuple[dict[str, Any], str]:
    query = [*watch_list_query().items(), ("timeoutSeconds", str(int(timeout)))]
    stream = HttpWatchStream(_get(api_client, path, query, timeout + 30))
    initial = InitialEvents()
    events = stream.events()
    try:
        for raw in events:
            if raw.get("type") == "ERROR":
                raise RuntimeError(f"streaming list answered an ERROR: {raw.get('object')}")
            if initial.add(raw):
                return {item["metadata"]["name"]: item for item in initial.items()}, initial.resource_version
    finally:
        events.close()
    raise RuntimeError(f"the stream ended after {len(initial)} objects, before the initial-events-end bookmark")


class _RssSampler:
    """Samples a process's VmRSS every 10 ms while in use; ``peak_mib`` is the peak minus the first sample."""

    def __init__(self, pid: int | None) -> None:
        self.pid, self.peak_mib = pid, 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _RssSampler:
        if self.pid:
            first = _rss_mib(self.pid)

            def sample() -> None:
                peak = first
                while not self._stop.wait(0.01):
                    peak = max(peak, _rss_mib(self.pid or 0))
                self.peak_mib = max(peak, _rss_mib(self.pid or 0)) - first

            self._thread = threading.Thread(target=sample, name="rss-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0
