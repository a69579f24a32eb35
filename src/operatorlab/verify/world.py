"""What the behavioural suite reads and writes, for any operator: nothing here knows one.

The suite is told a CRD and an example custom resource, and from the API server alone
it finds the rest: the resource's REST path (from the CRD), its children (every object
whose owner reference names the resource's uid, found through discovery, or the objects
an author's label selector picks), its ``Ready`` condition and its Events. The
operator's own requests are read from the fault proxy it talks through, which records
each request's method, path and time: that is how writes and retries are counted,
without any hook in the operator.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from operatorlab.diagnose.rest import get_json

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Never children: what an operator reports (Events) and what the API derives (endpoint slices).
NOT_CHILDREN = frozenset({"events", "endpointslices", "endpoints", "bindings", "componentstatuses",
                          "leases", "tokenreviews", "selfsubjectreviews"})


@dataclass(frozen=True)
class Kind:
    """One listable resource of the API: enough to list it and name what it holds."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    def path(self, name: str | None = None, namespace: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        where = f"/namespaces/{namespace}" if namespace and self.namespaced else ""
        return f"{base}{where}/{self.plural}" + (f"/{name}" if name else "")


@dataclass(frozen=True)
class Child:
    """One object owned by (or marked as belonging to) the custom resource."""

    kind: Kind
    name: str
    namespace: str | None
    uid: str
    terminating: bool
    finalizers: tuple[str, ...]
    owned: bool = False  # carries an owner reference (the garbage collector may still delete it)
    resource_version: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind.kind, self.namespace or "", self.name)

    @property
    def text(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind.kind} {where}" + (" (Terminating)" if self.terminating else "")


def listable_kinds(api: client.ApiClient) -> list[Kind]:
    """Every resource the API serves that can be listed (preferred version of each group)."""
    versions: list[tuple[str, str]] = [("", "v1")]
    for g in get_json(api, "/apis").get("groups") or []:
        preferred = (g.get("preferredVersion") or {}).get("groupVersion", "")
        if "/" in preferred:
            versions.append((g["name"], preferred.split("/", 1)[1]))
    kinds: list[Kind] = []
    for group, version in versions:
        try:
            listed = get_json(api, f"/apis/{group}/{version}" if group else f"/api/{version}")
        except client.ApiException:
            continue  # an aggregated API that is down: skipped, as kubectl does
        for r in listed.get("resources") or []:
            if "/" in r["name"] or "list" not in (r.get("verbs") or []) or r["name"] in NOT_CHILDREN:
                continue
            kinds.append(Kind(group, version, r["name"], r["kind"], bool(r.get("namespaced"))))
    return kinds


def children(api: client.ApiClient, kinds: Iterable[Kind], owner_uid: str,
             selector: str | None = None) -> list[Child]:
    """The objects of ``kinds`` (all namespaces) with an owner reference to ``owner_uid``,
    or, given a label ``selector``, the objects it selects."""
    found: list[Child] = []
    for kind in kinds:
        query = {"labelSelector": selector} if selector else {}
        try:
            items = get_json(api, kind.path(), query).get("items") or []
        except client.ApiException:
            continue  # not readable with these credentials: not ours to judge
        for item in items:
            meta = item.get("metadata") or {}
            if not selector and not any(ref.get("uid") == owner_uid for ref in meta.get("ownerReferences") or []):
                continue
            found.append(Child(kind, meta.get("name", ""), meta.get("namespace"), meta.get("uid", ""),
                               bool(meta.get("deletionTimestamp")), tuple(meta.get("finalizers") or ()),
                               bool(meta.get("ownerReferences")), meta.get("resourceVersion", "")))
    return sorted(found, key=lambda c: c.key)


def delete(api: client.ApiClient, path: str, body: Mapping[str, Any] | None = None) -> int:
    """DELETE ``path`` (with DeleteOptions ``body``); the status code (404: gone already, 409: a
    precondition failed). Through the client's REST layer, as ``diagnose.rest`` GETs: a typed or
    dynamic client would first read the whole discovery, seconds for one delete."""
    configuration = api.configuration
    headers = {"Accept": "application/json", "Content-Type": "application/json", "User-Agent": api.user_agent}
    for auth in configuration.auth_settings().values():
        if auth.get("in") == "header" and auth.get("value"):
            headers[auth["key"]] = auth["value"]
    request: Any = api.rest_client.request  # untyped in the client package
    response = request("DELETE", configuration.host + path, headers=headers, body=dict(body or {}),
                       _request_timeout=30)
    if getattr(response, "data", None) is None:
        response.read()
    if not (200 <= response.status <= 299 or response.status in (404, 409)):
        raise client.ApiException(status=response.status, reason=f"DELETE {path}: {str(response.data)[:300]}")
    return int(response.status)


def get_object(api: client.ApiClient, path: str) -> dict[str, Any] | None:
    """The object at ``path``, or None if there is none."""
    try:
        return get_json(api, path)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def ready(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``Ready`` condition of an object's status, if it has one."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)


def is_ready(obj: Mapping[str, Any] | None) -> bool:
    """``Ready=True`` about the current spec (observedGeneration, where given, is the generation)."""
    condition = ready(obj)
    if not condition or condition.get("status") != "True":
        return False
    observed = condition.get("observedGeneration", (obj or {}).get("status", {}).get("observedGeneration"))
    return observed is None or observed == ((obj or {}).get("metadata") or {}).get("generation")


def failure_reported(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A condition with status False and a message, about the current spec: a failure reported in status."""
    generation = ((obj or {}).get("metadata") or {}).get("generation")
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if (isinstance(c, dict) and c.get("status") == "False" and c.get("message")
                and c.get("observedGeneration", generation) == generation):
            return c
    return None


def warning_events(api: client.ApiClient, uid: str) -> list[dict[str, Any]]:
    """The Warning Events about the object ``uid`` (core Events, all namespaces)."""
    events = get_json(api, "/api/v1/events", {"fieldSelector": f"involvedObject.uid={uid}"}).get("items") or []
    return [e for e in events if e.get("type") == "Warning"]


@dataclass(frozen=True)
class Request:
    """One request the operator sent, as the fault proxy saw it."""

    t: float
    method: str
    path: str
    watch: bool

    @property
    def is_write(self) -> bool:
        return self.method in WRITES and not self.watch

    @property
    def text(self) -> str:
        return f"{self.method} {self.path}"


def requests(stats: Mapping[str, Any], since: float = 0.0, until: float | None = None) -> list[Request]:
    """The operator's requests between ``since`` and ``until`` (unix time), from the proxy's stats."""
    end = until if until is not None else time.time() + 1
    return [Request(r["t"], r["method"], r["path"], bool(r.get("watch"))) for r in stats.get("requests") or []
            if since <= r["t"] <= end and not r["path"].startswith("/_operatorlab")]


def tally(reqs: Iterable[Request], limit: int = 4) -> str:
    """``PATCH /apis/...x2, POST /api/...`` : what a list of requests was, most frequent first."""
    counts: dict[str, int] = {}
    for r in reqs:
        counts[r.text] = counts.get(r.text, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    shown = ", ".join(f"{text}" + (f" x{n}" if n > 1 else "") for text, n in ordered[:limit])
    return shown + (f", and {len(ordered) - limit} more" if len(ordered) > limit else "")
