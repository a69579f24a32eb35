"""Lesson 02: turn the edge-triggered handler into a level-triggered one, graded on the real cluster.

The learner's ``LevelTriggered(reconciler, get_tenant)`` is a reflector sink. The check plays
the reflector, delivering what a real LIST + WATCH delivers, built from the real objects of
Tenants of its own, including what a watch that was down for a while delivers:

- a restart: one LIST, no events at all;
- a BOOKMARK (no object change);
- a Tenant changed twice (cpu 2, then 3) while nobody watched, of which only the first
  change's event arrives (late, as from a queue): the quota must follow the Tenant as it is
  now (3), not the event's copy (2);
- a child deleted and another edited by hand, which no Tenant event reports: the next LIST
  repairs both;
- a Tenant deleted while nobody watched: the next LIST, without it, must clean up after it;
- an ``ADDED`` for a Tenant deleted since: nothing may be created for it.

The handler's calls go to the Tenant operator's own reconcile (``TenantReconciler``), which
writes to the real cluster; the check reads the cluster back.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any

from kubernetes import client

from operatorlab import tenants
from operatorlab.controllers.listwatch import WatchEvent
from operatorlab.controllers.reconciler import TenantReconciler
from operatorlab.exercises import Exercise
from operatorlab.grading import Check


class LevelTriggered(Exercise):
    lesson = "02"
    title = "LevelTriggered: reconcile the world as it is, whatever the events said"
    subject = "LevelTriggered"
    budget = 5.0
    xdist_group = "tenant-operator"  # it reconciles Tenants: no other Tenant operator may run beside it
    hints = (
        "An event is a hint that something changed, and it can arrive late, or not at all. What does the "
        "handler know for sure after a LIST? And when an event arrives, is its object still the Tenant?",
        "replace() gets the whole collection: reconcile every Tenant in it, and clean up (sync(name, None)) "
        "the ones you knew of that are not in it any more. apply() should not trust event.object: read the "
        "Tenant again with get_tenant and reconcile that (None: it is gone). A BOOKMARK changes nothing.",
        "Shape: keep a set of known names. replace: sync(name, None) for known minus listed, then sync each "
        "listed object. apply: skip anything but ADDED/MODIFIED/DELETED; tenant = get_tenant(event.name); "
        "update the set; reconciler.sync(event.name, tenant).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        suffix = uuid.uuid4().hex[:6]
        first, second, ghost = (f"ex02l-{suffix}-{n}" for n in ("a", "b", "c"))
        tenant_api = tenants.Tenants(self.api)
        reconciler = _Recording(self.api)
        handler = learner.LevelTriggered(reconciler, _getter(tenant_api))
        errors: list[str] = []

        def deliver(what: str, call: Callable[[], object]) -> None:
            try:
                call()
            except NotImplementedError:
                raise
            except Exception as e:  # noqa: BLE001 - the learner's handler raised: evidence for this property
                errors.append(f"{what} raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")

        def listed(*names: str) -> Callable[[], object]:
            items = [tenant_api.get(n) for n in names]
            return lambda: handler.replace(items, items[-1]["metadata"]["resourceVersion"])

        def event(kind: str, obj: Mapping[str, Any]) -> Callable[[], object]:
            return lambda: handler.apply(WatchEvent.from_raw({"type": kind, "object": obj}))

        try:
            tenant_api.create(first, cpu_quota="1")
            tenant_api.create(second, cpu_quota="1")
            deliver("replace", listed(first, second))
            quotas = {n: _quota(tenant_api, n) for n in (first, second)}
            yield Check(
                "a restart: the first LIST, with no event at all, reconciles every Tenant in it",
                all(q == "1" for q in quotas.values()) and not errors,
                "; ".join(errors) or f"quotas (limits.cpu): {_show(quotas)}; your calls: {reconciler.said()}")

            errors.clear()
            bookmark = {"kind": "Tenant", "apiVersion": "hedronite.io/v1",
                        "metadata": {"resourceVersion": tenant_api.get(first)["metadata"]["resourceVersion"]}}
            deliver("a BOOKMARK", event("BOOKMARK", bookmark))
            stale = tenant_api.patch_spec(first, cpuQuota="2")
            tenant_api.patch_spec(first, cpuQuota="3")
            before = len(reconciler.calls)
            deliver("a MODIFIED", event("MODIFIED", stale))
            now = _quota(tenant_api, first)
            yield Check(
                "a late event (the Tenant changed twice since: 2, then 3): the quota follows the Tenant as it is "
                "now (3), not the event's copy (2); a BOOKMARK changes nothing",
                now == "3" and not errors,
                "; ".join(errors) or f"limits.cpu is {now}"
                + (": the event's copy of the Tenant, two changes old" if now == "2" else "")
                + f"; your calls: {reconciler.said(since=before)}")

            errors.clear()
            core = client.CoreV1Api(self.api)
            _unless_absent(lambda: core.delete_namespaced_resource_quota(tenants.QUOTA_NAME,
                                                                        tenants.namespace_of(second)))
            _unless_absent(lambda: core.patch_namespaced_resource_quota(
                tenants.QUOTA_NAME, tenants.namespace_of(first), {"spec": {"hard": {"limits.cpu": "99"}}}))
            deliver("replace", listed(first, second))
            quotas = {n: _quota(tenant_api, n) for n in (first, second)}
            yield Check(
                "a deleted quota and a quota edited by hand, which no Tenant event reports: the next LIST "
                "repairs both", quotas == {first: "3", second: "1"} and not errors,
                "; ".join(errors) or f"quotas (limits.cpu): {_show(quotas)}")

            errors.clear()
            tenant_api.delete(second)
            before = len(reconciler.calls)
            deliver("replace", listed(first))
            cleaned = (second, None) in reconciler.calls[before:]
            yield Check(
                "a Tenant deleted while nobody watched: the next LIST, without it, cleans up after it",
                cleaned and not errors,
                "; ".join(errors) or (f"sync({second!r}, None) was called: its namespace is "
                              f"{_namespace_state(core, tenants.namespace_of(second))}" if cleaned
                              else f"no sync({second!r}, None); your calls: {reconciler.said(since=before)}"))

            errors.clear()
            added = tenant_api.create(ghost, cpu_quota="1")
            tenant_api.delete(ghost)
            before = len(reconciler.calls)
            deliver("an ADDED", event("ADDED", added))
            state = _namespace_state(core, tenants.namespace_of(ghost))
            yield Check(
                "an ADDED for a Tenant deleted since: nothing is created for it",
                state == "absent" and not errors,
                "; ".join(errors) or f"namespace {tenants.namespace_of(ghost)} is {state}; your calls: "
                f"{reconciler.said(since=before)}")
        finally:
            for name in (first, second, ghost):
                tenant_api.delete(name)


class _Recording(TenantReconciler):
    """The Tenant operator's reconcile, remembering what the handler asked of it."""

    def __init__(self, api_client: client.ApiClient) -> None:
        super().__init__(api_client)
        self.calls: list[tuple[str, str | None]] = []  # (name, the cpuQuota it was given, or None)

    def sync(self, name: str, tenant: Mapping[str, Any] | None) -> dict[str, Any] | None:
        self.calls.append((name, None if tenant is None else str((tenant.get("spec") or {}).get("cpuQuota"))))
        return super().sync(name, tenant)

    def said(self, since: int = 0) -> str:
        calls = self.calls[since:]
        if not calls:
            return "none"
        return ", ".join(f"sync({n.rsplit('-', 1)[-1]!r}, " + ("None)" if c is None else f"cpuQuota={c})")
                         for n, c in calls)


def _getter(tenant_api: tenants.Tenants) -> Callable[[str], dict[str, Any] | None]:
    def get_tenant(name: str) -> dict[str, Any] | None:
        try:
            return tenant_api.get(name)
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise
    return get_tenant


def _unless_absent(call: Callable[[], object]) -> None:
    """Make a change by hand; an object your handler never created cannot be changed (404)."""
    try:
        call()
    except client.ApiException as e:
        if e.status != 404:
            raise


def _quota(tenant_api: tenants.Tenants, name: str) -> str:
    try:
        return tenant_api.quota(name).get("limits.cpu", "unset")
    except client.ApiException as e:
        if e.status == 404:
            return "absent"
        raise


def _namespace_state(core: client.CoreV1Api, namespace: str) -> str:
    try:
        found = core.read_namespace(namespace)
    except client.ApiException as e:
        if e.status == 404:
            return "absent"
        raise
    return "being deleted" if found.metadata.deletion_timestamp else "present"


def _show(values: Mapping[str, str]) -> str:
    return ", ".join(f"{name.rsplit('-', 1)[-1]}: {value}" for name, value in values.items())
