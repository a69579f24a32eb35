"""Reusable checks on the live cluster. Each failing message names evidence to look at."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from operatorlab import tenants
from operatorlab.labs.base import Check

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

TENANTS = (tenants.GROUP, tenants.VERSION, tenants.PLURAL)


def get_or_none(call: Callable[[], Any]) -> Any | None:
    """``call()`` (a GET), or None if the API answers 404 Not Found."""
    from kubernetes import client

    try:
        return call()
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def tenant_evidence(tenant: dict) -> str:
    """What a Tenant's own object says: phase, message, kopf's handler progress (its annotations), finalizers."""
    from operatorlab.diagnose import kopfstate  # imports kopf: only when a check shows evidence, not at the CLI's start

    status = tenant.get("status") or {}
    parts = [f"status.phase={status.get('phase')!r}"]
    if status.get("message"):
        parts.append(f"status.message={status['message'][:160]!r}")
    # kopf 1.45 keeps a handler's progress in an annotation of its own (kopfstate's docstring says why).
    for record in kopfstate.progress(tenant["metadata"].get("annotations") or {}):
        if record.retries or record.failure or record.message:
            delayed = f" delayed until {record.delayed:%H:%M:%S} UTC" if record.delayed else ""
            parts.append(f"annotation {record.annotation}: retries={record.retries}{delayed} "
                         f"message={str(record.message)[:120]!r}")
    if not status:
        parts.append("no status at all")
    if not tenant["metadata"].get("finalizers"):
        parts.append("no finalizers")
    return "; ".join(parts)


def tenant_reconciled(api, name: str) -> Check:
    """The Tenant's namespace exists (labelled, not Terminating) and its quota matches ``spec.cpuQuota``."""
    from kubernetes import client
    from kubernetes.utils import parse_quantity

    label = f"Tenant {name} reconciled (namespace + quota match spec)"
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    tenant = get_or_none(lambda: custom.get_cluster_custom_object(*TENANTS, name))
    if tenant is None:
        return Check(label, False, f"Tenant {name} does not exist (kubectl get tenants)")
    namespace = tenants.namespace_of(name)
    evidence = f"kubectl get tenant {name} -o yaml: {tenant_evidence(tenant)}"
    ns = get_or_none(lambda: core.read_namespace(namespace))
    if ns is None:
        return Check(label, False, f"namespace {namespace} not found. {evidence}")
    if ns.metadata.deletion_timestamp:
        return Check(label, False,
                     f"namespace {namespace} is Terminating since {ns.metadata.deletion_timestamp}. {evidence}")
    quota = get_or_none(lambda: core.read_namespaced_resource_quota(tenants.QUOTA_NAME, namespace))
    if quota is None:
        return Check(label, False,
                     f"namespace {namespace} exists but holds no ResourceQuota {tenants.QUOTA_NAME}. {evidence}")
    want = str(tenant["spec"]["cpuQuota"])
    hard = (quota.spec.hard or {}) if quota.spec else {}
    if not all(k in hard and parse_quantity(hard[k]) == parse_quantity(want) for k in ("requests.cpu", "limits.cpu")):
        return Check(label, False, f"ResourceQuota {namespace}/{tenants.QUOTA_NAME} has spec.hard {hard} "
                                   f"but the Tenant's spec.cpuQuota is {want!r}. {evidence}")
    return Check(label, True, f"namespace {namespace} with quota cpu {want}")


def tenant_status_current(api, name: str) -> Check:
    """The Tenant's status says Ready *about its current spec*: what ``kubectl wait`` and any client read.

    A ``Ready=True`` condition whose ``observedGeneration`` and ``status.observedGeneration``
    are ``metadata.generation``, and ``status.cpuQuota`` as in the spec. ``status.phase``
    alone is not enough: ``kubectl wait --for=condition=Ready`` reads the condition, and
    without ``observedGeneration`` nobody can tell a status about the old spec from one
    about the new.
    """
    from kubernetes import client

    label = f"Tenant {name} reports Ready about its current spec (Ready condition, observedGeneration)"
    tenant = get_or_none(lambda: client.CustomObjectsApi(api).get_cluster_custom_object(*TENANTS, name))
    if tenant is None:
        return Check(label, False, f"Tenant {name} does not exist (kubectl get tenants)")
    status, generation = tenant.get("status") or {}, tenant["metadata"].get("generation")
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    seen: list[str] = []
    if ready is None:
        seen.append(f"no Ready condition in status.conditions (kubectl wait --for=condition=Ready tenant/{name} "
                    f"would wait for ever)")
    elif ready.get("status") != "True" or ready.get("observedGeneration") != generation:
        seen.append(f"its Ready condition is {ready.get('status')} ({ready.get('reason')}) about generation "
                    f"{ready.get('observedGeneration')}")
    if status.get("observedGeneration") != generation:
        seen.append(f"status.observedGeneration={status.get('observedGeneration')!r}")
    if str(status.get("cpuQuota")) != str(tenant["spec"].get("cpuQuota")):
        seen.append(f"status.cpuQuota={status.get('cpuQuota')!r}")
    if seen:
        return Check(label, False, f"Tenant {name} is at metadata.generation {generation} with spec.cpuQuota "
                                   f"{tenant['spec'].get('cpuQuota')!r}, but {'; '.join(seen)}. kubectl get tenant "
                                   f"{name} -o yaml: {tenant_evidence(tenant)}")
    return Check(label, True, f"Ready=True about generation {generation}, cpuQuota {status.get('cpuQuota')}")


def tenant_not_stuck(api, name: str) -> Check:
    """The Tenant is either live or gone, not hanging in Terminating."""
    from kubernetes import client

    label = f"Tenant {name} not stuck Terminating"
    tenant = get_or_none(lambda: client.CustomObjectsApi(api).get_cluster_custom_object(*TENANTS, name))
    if tenant is None or not tenant["metadata"].get("deletionTimestamp"):
        return Check(label, True, "gone" if tenant is None else "live")
    meta = tenant["metadata"]
    return Check(label, False, f"Tenant {name} has metadata.deletionTimestamp={meta['deletionTimestamp']} and "
                               f"metadata.finalizers={meta.get('finalizers')}: something has yet to finish its cleanup")


def no_orphan_namespace(api, name: str) -> Check:
    """``tenant-<name>`` exists only while its Tenant does (else it is gone or going)."""
    from kubernetes import client

    label = f"namespace tenant-{name} not orphaned"
    tenant = get_or_none(lambda: client.CustomObjectsApi(api).get_cluster_custom_object(*TENANTS, name))
    ns = get_or_none(lambda: client.CoreV1Api(api).read_namespace(tenants.namespace_of(name)))
    if ns is None or ns.metadata.deletion_timestamp or (tenant and not tenant["metadata"].get("deletionTimestamp")):
        return Check(label, True, "consistent with its Tenant")
    owner = "no Tenant" if tenant is None else "a Tenant being deleted"
    return Check(label, False, f"namespace tenant-{name} (created {ns.metadata.creation_timestamp}) is live, yet "
                               f"there is {owner} {name}: kubectl get ns tenant-{name}; kubectl get tenants")


def one_quota_per_namespace(api, names: list[str]) -> Check:
    """No duplicates: at most one ResourceQuota in each tenant namespace."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    label = "no duplicate quotas"
    for name in names:
        quotas = _quota_names(core, tenants.namespace_of(name))
        if len(quotas) > 1:
            return Check(label, False, f"namespace tenant-{name} holds {len(quotas)} ResourceQuotas: {quotas}")
    return Check(label, True, "at most one ResourceQuota per tenant namespace")


def _quota_names(core: CoreV1Api, namespace: str) -> list[str]:
    """The names of the ResourceQuotas in ``namespace``; none if the API answers 404.

    A function of its own so that the lambda binds this namespace, not a loop variable.
    """
    quotas = get_or_none(lambda: core.list_namespaced_resource_quota(namespace))
    return [q.metadata.name for q in quotas.items] if quotas is not None else []
