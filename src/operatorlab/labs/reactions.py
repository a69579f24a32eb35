"""More probes (beside :mod:`~operatorlab.labs.probes`): how the lab's operator *reacts*, counted and timed.

:func:`probe_tenant`       a fresh Tenant of a fresh name for one probe, removed whatever happens;
:func:`writes_while_idle`  the writes to an object nobody else touches, seen by a watch over a
                           quiet window: a level-triggered operator that has converged writes nothing;
:func:`gone_within`        how long an object takes to disappear (a finalizer honoured, garbage
                           collection), or None past its budget;
:func:`requests_to`        the requests the lab's fault proxy forwarded to a path (attempts counted
                           from outside the operator, whatever its code says about itself);
:class:`WriteCounter`      the writes the API server committed to an object, whoever sent them; with
:func:`writes_through`     the ones the lab's operator sent through its proxy, a second writer shows;
:func:`warning_events`     the Warning Events posted about an object.

Like the shared probes, each answers with evidence a failing check can name, never the fix.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from operatorlab import tenants
from operatorlab.labs import checks, probes

if TYPE_CHECKING:
    from operatorlab.faults.proxy import FaultProxy
    from operatorlab.labs.base import Lab


@contextmanager
def probe_tenant(lab: Lab, prefix: str, cpu: str | None = None) -> Iterator[str]:
    """Create a Tenant of a fresh name (``cpu`` default: fresh millicores), tracked; yield its name.

    Afterwards it goes, its finalizer stripped if the operator did not honour it, and its
    namespace with it: a probe leaves nothing behind even when the operator is broken.
    """
    name = probes.probe_name(prefix)
    lab.track(f"{tenants.GROUP}/{tenants.VERSION}", "Tenant", name)
    lab.track("v1", "Namespace", tenants.namespace_of(name))
    lab.tenants.create(name, cpu or f"{secrets.randbelow(900) + 100}m", f"lab {lab.id} probe")
    try:
        yield name
    finally:
        probes.delete_tenant(lab, name, force=True)
        checks.get_or_none(lambda: lab.core.delete_namespace(tenants.namespace_of(name)))


@dataclass(frozen=True)
class Writes:
    """What a watch on one object saw over a window: how many writes, and what they changed."""

    count: int
    window: float
    changed: tuple[str, ...]  # the fields that differed between consecutive versions, most frequent first

    def evidence(self, what: str) -> str:
        fields = ", ".join(self.changed[:4]) or "nothing visible outside status"
        return (f"{what} was written {self.count} times in {self.window:g} s while nothing changed it "
                f"(what changed: {fields})")


def writes_while_idle(lab: Lab, name: str, window: float) -> Writes:
    """The writes to Tenant ``name`` over ``window`` seconds, counted by a watch from its resourceVersion.

    Every write bumps the resourceVersion and reaches a watch as ``MODIFIED`` (status and
    metadata writes included), so this counts the operator's writes to the object from
    the API server's side, whatever the operator logs.
    """
    counter = WriteCounter(lab, lab.tenants.get(name), budget=window)
    time.sleep(window)
    return Writes(counter.stop(), window, counter.changed())


class WriteCounter:
    """Counts the writes the API server commits to a Tenant, from a watch on a background thread.

    Started from a version of the Tenant (its resourceVersion), it sees each later write as
    one ``MODIFIED`` event, whoever sent it, and notes which fields each changed. Compared
    with the writes the lab's fault proxy forwarded (:func:`writes_through`), it tells
    whether someone besides the lab's operator is writing the object: a second operator's
    writes reach the API server without passing through the lab's proxy. Undercounting is
    the only error a watch can make here (its stream ending early), which can only hide a
    writer, never invent one.
    """

    def __init__(self, lab: Lab, start: dict[str, Any], budget: float) -> None:
        import threading

        from kubernetes import watch

        self.count = 0
        self._previous = start
        self._changed: dict[str, int] = {}
        self._stream = watch.Watch()
        self._args = (lab.custom.list_cluster_custom_object, *checks.TENANTS)
        name = start["metadata"]["name"]
        self._kwargs = {"field_selector": f"metadata.name={name}",
                        "resource_version": start["metadata"]["resourceVersion"],
                        "timeout_seconds": max(1, round(budget))}
        self._thread = threading.Thread(target=self._run, name=f"writes-to-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._stream.stream(*self._args, **self._kwargs):
                if event["type"] == "MODIFIED":
                    self.count += 1
                    for path in _differences(self._previous, event["object"]):
                        self._changed[path] = self._changed.get(path, 0) + 1
                    self._previous = event["object"]
        except Exception:  # noqa: BLE001 (a watch that ends early undercounts, which only hides a writer)
            return

    def stop(self) -> int:
        """Stop counting; the writes seen so far."""
        self._stream.stop()
        return self.count

    def changed(self) -> tuple[str, ...]:
        """The fields the writes changed, most often changed first."""
        changed = dict(self._changed)
        return tuple(sorted(changed, key=lambda p: -changed[p]))


def writes_through(proxy: FaultProxy, name: str, since: float) -> int:
    """The writes to Tenant ``name`` (its body or ``/status``) the fault proxy forwarded and the API server accepted."""
    path = rf"/{tenants.PLURAL}/{re.escape(name)}(/status)?$"
    return sum(1 for method in ("PATCH", "PUT") for r in requests_to(proxy, method, path, since)
               if r.get("status") in (200, 201))


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths of leaves that differ between two versions (resourceVersion, managedFields aside)."""
    ignored = {"metadata.resourceVersion", "metadata.managedFields", "metadata.generation"}
    paths: list[str] = []
    for key in sorted(set(old) | set(new)):
        path = f"{prefix}{key}"
        if path in ignored:
            continue
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            paths += _differences(a, b, f"{path}.")
        elif a != b:
            paths.append(path)
    return paths


def gone_within(exists: Callable[[], bool], budget: float, interval: float = 0.3) -> float | None:
    """Seconds until ``exists()`` is False, or None if it still holds after ``budget`` seconds."""
    started = time.monotonic()
    if probes.wait(lambda: not exists(), budget, interval):
        return time.monotonic() - started
    return None


def requests_to(proxy: FaultProxy, method: str, path: str, since: float = 0.0) -> list[dict[str, Any]]:
    """The requests the fault proxy saw (``method``, ``path`` a regex) since the unix time ``since``."""
    return [r for r in proxy.stats()["requests"]
            if r["method"] == method and re.search(path, r["path"]) and r["t"] >= since]


def warning_events(lab: Lab, kind: str, name: str) -> list[str]:
    """``reason: message`` of each Warning Event about ``kind`` ``name`` (any namespace)."""
    events = lab.core.list_event_for_all_namespaces(
        field_selector=f"involvedObject.kind={kind},involvedObject.name={name},type=Warning")
    return [f"{e.reason}: {e.message}" for e in events.items]
