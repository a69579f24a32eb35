"""What the watch exercises hand the learner's code: a recording ListerWatcher, a sink that keeps what it is told.

:class:`ConfigMaps` is a :class:`~operatorlab.controllers.listwatch.ListerWatcher` (the
lesson's reflector protocol) of the ConfigMaps of one namespace, so a check watches a
collection of its own, beside whatever else runs on the cluster. It remembers every LIST
and WATCH it was asked for (and with which resourceVersion), and the last resourceVersion
it handed out (of a LIST, an event or a bookmark): a learner's loop that resumes
correctly asks for exactly that one. The server is asked to end each watch after
:data:`STREAM_SECONDS`, so that a bookmark arrives within a check's few seconds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config

from operatorlab.controllers.listwatch import HttpWatchStream, WatchEvent, failure_of
from operatorlab.controllers.reflector_policy import RequestFailed

#: The server ends each watch after this long; kube-apiserver sends a bookmark about 2 s before
#: a watch's timeout, if its resourceVersion moved past the watch's (none for a 2 s watch).
STREAM_SECONDS = 3


@dataclass
class Request:
    """One LIST or WATCH the learner's loop sent."""

    kind: str  # LIST or WATCH
    resource_version: str  # what it asked for
    last_seen: str  # the last resourceVersion the loop had been given when it asked
    last_seen_from: str  # where that came from: LIST, an event type, or BOOKMARK
    time: float
    failed: int | None = None  # the HTTP status, if the request failed


class ConfigMaps:
    """A ListerWatcher of the ConfigMaps of one namespace, recording every request and what it handed out."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.requests: list[Request] = []
        self.last_seen, self.last_seen_from = "", ""
        self.bookmarks: list[str] = []
        self.open: list[HttpWatchStream] = []
        self.lock = threading.Lock()

    def _record(self, kind: str, resource_version: str) -> Request:
        with self.lock:
            request = Request(kind, resource_version, self.last_seen, self.last_seen_from, time.monotonic())
            self.requests.append(request)
        return request

    def seen(self, resource_version: str, origin: str) -> None:
        with self.lock:
            self.last_seen, self.last_seen_from = resource_version, origin

    def list(self, *, resource_version: str, limit: int, continue_token: str, timeout: float) -> Mapping[str, Any]:
        request = self._record("LIST", resource_version)
        try:
            # _preload_content=False: the raw HTTP response (the client's types say the model)
            response: Any = self.core.list_namespaced_config_map(
                self.namespace, resource_version=resource_version or None, limit=limit or None,
                _continue=continue_token or None, _preload_content=False, _request_timeout=(10, timeout))
            body: dict[str, Any] = json.loads(response.data)
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as e:
            request.failed = getattr(e, "status", None) or 0
            raise RequestFailed(failure_of(e)) from e
        self.seen(body["metadata"]["resourceVersion"], "LIST")
        return body

    def watch(self, *, resource_version: str, timeout: float) -> WatchRecording:
        request = self._record("WATCH", resource_version)
        try:
            response: Any = self.core.list_namespaced_config_map(
                self.namespace, watch=True, allow_watch_bookmarks=True, resource_version=resource_version,
                timeout_seconds=int(min(timeout, STREAM_SECONDS)), _preload_content=False,
                _request_timeout=(10, STREAM_SECONDS + 30))
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            request.failed = getattr(e, "status", None) or 0
            raise RequestFailed(failure_of(e)) from e
        stream = WatchRecording(HttpWatchStream(response), self)
        with self.lock:
            self.open.append(stream.inner)
        return stream

    def close_all(self) -> None:
        with self.lock:
            streams, self.open = self.open, []
        for stream in streams:
            stream.close()

    def counts(self) -> tuple[int, int]:
        """(LISTs, WATCHes) sent so far."""
        with self.lock:
            return (sum(r.kind == "LIST" for r in self.requests), sum(r.kind == "WATCH" for r in self.requests))


class WatchRecording:
    """The learner's watch: the real stream, noting each resourceVersion it hands out."""

    def __init__(self, inner: HttpWatchStream, owner: ConfigMaps) -> None:
        self.inner, self.owner = inner, owner

    def events(self) -> Generator[Mapping[str, Any], None, None]:
        for raw in self.inner.events():
            kind = raw.get("type", "")
            version = ((raw.get("object") or {}).get("metadata") or {}).get("resourceVersion", "")
            if kind != "ERROR" and version:
                self.owner.seen(version, kind)
                if kind == "BOOKMARK":
                    self.owner.bookmarks.append(version)
            yield raw

    def close(self) -> None:
        self.inner.close()


class Store:
    """The sink: name -> resourceVersion, as the learner's loop told it."""

    def __init__(self) -> None:
        self.objects: dict[str, str] = {}
        self.lock = threading.Lock()

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        with self.lock:
            self.objects = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in objects}

    def apply(self, event: WatchEvent) -> None:
        with self.lock:
            if event.type in ("ADDED", "MODIFIED"):
                self.objects[event.name] = event.resource_version
            elif event.type == "DELETED":
                self.objects.pop(event.name, None)

    def snapshot(self) -> dict[str, str]:
        with self.lock:
            return dict(self.objects)


def without_retries(kubeconfig: Path) -> client.ApiClient:
    """A client for the proxy whose urllib3 retries nothing by itself: every error reaches the loop."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.retries = False
    return client.ApiClient(configuration)


#: Published into every namespace by kube-controller-manager's root-ca-cert-publisher, a moment
#: after the namespace is made.
ROOT_CA = "kube-root-ca.crt"


def quiet_namespace(core: client.CoreV1Api, name: str, *, timeout: float = 10.0) -> None:
    """Make namespace ``name`` and wait until the controller-manager has published its root CA ConfigMap.

    Until then a ConfigMap the check did not write may still appear in the namespace, in the
    middle of a check that counts what changed. A cluster without a controller-manager never
    publishes it: after ``timeout`` the check goes on.
    """
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = {i.metadata.name for i in core.list_namespaced_config_map(name).items if i.metadata}
        if ROOT_CA in names:
            return
        time.sleep(0.1)
