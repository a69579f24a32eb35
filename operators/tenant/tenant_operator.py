"""Tenant operator: one namespace and one CPU quota per Tenant.

A ``hedronite.io/v1`` ``Tenant`` (cluster-scoped) asks for:

* a namespace ``tenant-<name>``, labelled ``hedronite.io/tenant=<name>``;
* in it, a ResourceQuota ``tenant-quota`` whose ``requests.cpu`` and
  ``limits.cpu`` are both ``spec.cpuQuota``. Both, so that the tenant can
  neither reserve (requests) nor burst to (limits) more CPU than it was given.
  A consequence worth knowing: every container in the namespace must then state
  its CPU request and limit (or get them from a LimitRange), or it is refused.

Design
------
All the work is in one plain function, :func:`reconcile_tenant`. It is
*level-triggered* and *idempotent*: it reads what exists, compares it with what
the Tenant asks for, and writes only the difference. It can therefore run any
number of times, at any moment, and after a crash at any point (even SIGKILL
between creating the namespace and the quota) it converges to the same state
with no duplicates. It takes a name and a spec, not kopf's handler arguments,
so the lab's hand-written controllers (a polling loop, an informer with a work
queue) call this very function. The kopf handlers at the bottom are thin
wrappers: call it, record the result in status, post Events.

Errors are routed by what a retry can achieve:

==========================================  ==============  ===========================
cause                                       raised as       kopf then
==========================================  ==============  ===========================
name or spec unusable (``ValueError``)      PermanentError  stops; status Failed, Event
API 422: the API refuses our object         PermanentError  stops; status Failed, Event
API 429 or 5xx: overload or outage          TemporaryError  retries after Retry-After
                                                            (else 10 s)
API 403: RBAC denies a verb                 TemporaryError  retries; fixing the
                                                            ClusterRole heals it
namespace Terminating (on GET, or a 403)    TemporaryError  retries until it is gone
any other error                             unchanged       retries with its backoff
==========================================  ==============  ===========================

Run it against the current kubeconfig (or in-cluster, see ``deploy/``)::

    kopf run --all-namespaces operators/tenant/tenant_operator.py

It imports only kopf, kubernetes and the standard library: it runs alone in
its image.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import kopf
import kubernetes.client
import kubernetes.config
from kubernetes.client import ApiException, CoreV1Api
from kubernetes.utils import parse_quantity

GROUP, VERSION, PLURAL = "hedronite.io", "v1", "tenants"
TENANT_LABEL = "hedronite.io/tenant"
NAMESPACE_PREFIX = "tenant-"
QUOTA_NAME = "tenant-quota"

# The same pattern as spec.cpuQuota in crds/tenant.yaml (a unit test checks
# they match): whole or decimal cores with at most 3 decimals (a millicore is
# the smallest CPU unit), or millicores.
CPU_QUOTA_PATTERN = r"^([0-9]+(\.[0-9]{1,3})?|[0-9]+m)$"
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_LABEL_MAX_LENGTH = 63

# Seconds to wait before a retry when the API server does not say (Retry-After).
DEFAULT_RETRY_DELAY = 10.0

# report(reason, message) is called once for every write reconcile_tenant makes.
Reporter = Callable[[str, str], None]


# --- Desired state: pure functions, unit-tested without a cluster -----------


def namespace_name(tenant_name: str) -> str:
    """Return the namespace of a tenant, ``tenant-<name>``.

    Raises ValueError if that is not a DNS-1123 label. A Tenant's own name
    may be a DNS subdomain (dots, up to 253 characters); a namespace's may not.
    """
    name = NAMESPACE_PREFIX + tenant_name
    if len(name) > DNS1123_LABEL_MAX_LENGTH or not DNS1123_LABEL.fullmatch(name):
        longest = DNS1123_LABEL_MAX_LENGTH - len(NAMESPACE_PREFIX)
        raise ValueError(
            f"tenant name {tenant_name!r} cannot be used as a namespace name: "
            f"{name!r} must be a DNS-1123 label (lowercase alphanumerics and '-', "
            f"at most {DNS1123_LABEL_MAX_LENGTH} characters, so a Tenant name of "
            f"at most {longest} without dots); rename the Tenant"
        )
    return name


def cpu_quota(spec: Mapping[str, Any]) -> str:
    """Return ``spec.cpuQuota`` as a quantity string, e.g. ``"4"`` or ``"500m"``.

    Raises ValueError if it is missing or not a CPU quantity. The CRD schema
    already refuses such a Tenant; this guards the callers that bypass it.
    """
    value = spec.get("cpuQuota")
    # bool is an int subclass, and a float is not a quantity the schema allows.
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(
            f"spec.cpuQuota must be a CPU quantity such as 4, '2.5' or '500m', "
            f"got {value!r}; set spec.cpuQuota on the Tenant (quote decimals)"
        )
    text = str(value)
    if not re.fullmatch(CPU_QUOTA_PATTERN, text):
        raise ValueError(
            f"spec.cpuQuota {text!r} is not a CPU quantity: use whole or decimal "
            f"cores (4, '2.5', at most 3 decimals) or millicores ('500m')"
        )
    return text


def namespace_manifest(tenant_name: str) -> dict[str, Any]:
    """The desired Namespace of a tenant."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace_name(tenant_name),
            "labels": {TENANT_LABEL: tenant_name},
        },
    }


def quota_manifest(tenant_name: str, cpu_quota: str | int) -> dict[str, Any]:
    """The desired ResourceQuota of a tenant: CPU requests and limits capped."""
    cpu = str(cpu_quota)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": QUOTA_NAME,
            "namespace": namespace_name(tenant_name),
            "labels": {TENANT_LABEL: tenant_name},
        },
        "spec": {"hard": {"requests.cpu": cpu, "limits.cpu": cpu}},
    }


# --- Reconcile: observed state -> desired state -----------------------------


def reconcile_tenant(
    name: str,
    spec: Mapping[str, Any],
    *,
    core: kubernetes.client.CoreV1Api | None = None,
    report: Reporter | None = None,
) -> dict[str, Any]:
    """Make the cluster match one Tenant; return its status.

    Idempotent and level-triggered: GET each object, create it if missing,
    patch it only if it differs; nothing is written when nothing differs.
    ``report(reason, message)``, if given, hears of every write (the kopf
    handler posts them as Events).

    Returns ``{"namespace": "tenant-<name>", "cpuQuota": "<quota>",
    "phase": "Ready"}``. Raises kopf.PermanentError when retrying cannot help
    and kopf.TemporaryError (with a delay) when it can; see the module
    docstring for the table.
    """
    try:
        namespace = namespace_name(name)
        cpu = cpu_quota(spec)
    except ValueError as e:
        raise kopf.PermanentError(str(e)) from e
    core = CoreV1Api() if core is None else core
    report = _ignore if report is None else report

    try:
        _ensure_namespace(core, name, report)
        _ensure_quota(core, name, cpu, report)
    except ApiException as e:
        routed = _route_api_error(e)
        if routed is None:
            raise
        raise routed from e
    return {"namespace": namespace, "cpuQuota": cpu, "phase": "Ready"}


def delete_tenant_namespace(
    name: str, *, core: kubernetes.client.CoreV1Api | None = None
) -> None:
    """Delete a tenant's namespace (and so its quota); gone already is fine.

    The API only starts the deletion: the namespace stays Terminating until
    everything in it is gone, and reconcile_tenant waits for that before it
    re-creates a namespace of the same name.
    """
    try:
        namespace = namespace_name(name)
    except ValueError:
        # Such a Tenant never got a namespace: nothing to clean up, and its
        # deletion must not be blocked by a finalizer that can never succeed.
        return
    core = CoreV1Api() if core is None else core
    try:
        core.delete_namespace(name=namespace)
    except ApiException as e:
        if e.status == 404:
            return
        routed = _route_api_error(e)
        if routed is None:
            raise
        raise routed from e


def _ensure_namespace(core: CoreV1Api, tenant_name: str, report: Reporter) -> bool:
    """Create or correct the tenant's namespace; return whether it wrote."""
    desired = namespace_manifest(tenant_name)
    name = desired["metadata"]["name"]
    namespace, created = _get_or_create(
        read=lambda: core.read_namespace(name=name),
        create=lambda: core.create_namespace(body=desired),
    )
    if created:
        report("NamespaceCreated", f"created namespace {name}")
        return True
    if namespace.metadata.deletion_timestamp:
        # Anything created in it now would be refused (403) and vanish anyway.
        raise kopf.TemporaryError(
            f"namespace {name} is still being deleted (Terminating); "
            f"it will be re-created once it is gone",
            delay=DEFAULT_RETRY_DELAY,
        )
    # Compare only our label: other labels belong to others (or to Kubernetes).
    labels = namespace.metadata.labels or {}
    wanted = desired["metadata"]["labels"]
    if any(labels.get(key) != value for key, value in wanted.items()):
        core.patch_namespace(name=name, body={"metadata": {"labels": wanted}})
        report("NamespaceLabeled", f"labeled namespace {name} {TENANT_LABEL}={tenant_name}")
        return True
    return False


def _ensure_quota(core: CoreV1Api, tenant_name: str, cpu: str, report: Reporter) -> bool:
    """Create or correct the tenant's ResourceQuota; return whether it wrote."""
    desired = quota_manifest(tenant_name, cpu)
    namespace = desired["metadata"]["namespace"]
    quota, created = _get_or_create(
        read=lambda: core.read_namespaced_resource_quota(name=QUOTA_NAME, namespace=namespace),
        create=lambda: core.create_namespaced_resource_quota(namespace=namespace, body=desired),
    )
    if created:
        report("QuotaCreated", f"created ResourceQuota {namespace}/{QUOTA_NAME}, cpu {cpu}")
        return True
    # Compare only our keys of spec.hard, as quantities: the API stores "2.5"
    # as "2500m", which is the same amount, not drift.
    hard = (quota.spec.hard if quota.spec else None) or {}
    wanted = desired["spec"]["hard"]
    if not _same_quantities(hard, wanted):
        core.patch_namespaced_resource_quota(
            name=QUOTA_NAME, namespace=namespace, body={"spec": {"hard": wanted}}
        )
        was = hard.get("limits.cpu", "unset")
        report("QuotaUpdated", f"set ResourceQuota {namespace}/{QUOTA_NAME} cpu to {cpu} (was {was})")
        return True
    return False


def _get_or_create(read: Callable[[], Any], create: Callable[[], Any]) -> tuple[Any, bool]:
    """GET an object, or create it if it is missing; return (object, created).

    A 409 on create means someone else created it between our GET and POST
    (another controller, or our own previous life): read theirs, carry on.
    """
    try:
        return read(), False
    except ApiException as e:
        if e.status != 404:
            raise
    try:
        return create(), True
    except ApiException as e:
        if e.status != 409:
            raise
    return read(), False


def _same_quantities(observed: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(
        key in observed and parse_quantity(observed[key]) == parse_quantity(value)
        for key, value in wanted.items()
    )


def _route_api_error(e: ApiException) -> kopf.PermanentError | kopf.TemporaryError | None:
    """Map an API error to what a retry can achieve; None: leave it as it is."""
    status = e.status or 0
    message = _server_message(e)
    if status == 422:
        return kopf.PermanentError(f"the API refused the object (422): {message}; fix the Tenant")
    if status == 403 and "being terminated" in message:
        # The NamespaceLifecycle admission plugin, not RBAC: the namespace
        # was deleted while we were working in it.
        return kopf.TemporaryError(
            f"the namespace is being deleted (403): {message}; retrying",
            delay=DEFAULT_RETRY_DELAY,
        )
    if status == 403:
        return kopf.TemporaryError(
            f"forbidden (403): {message}; grant the verb in the ClusterRole "
            f"'tenant-operator' (deploy/clusterrole.yaml); the operator retries by itself",
            delay=DEFAULT_RETRY_DELAY,
        )
    if status == 429 or status >= 500:
        return kopf.TemporaryError(
            f"the API server is overloaded or failing ({status}): {message}; retrying",
            delay=retry_delay(e),
        )
    return None


def retry_delay(e: ApiException, default: float = DEFAULT_RETRY_DELAY) -> float:
    """Seconds to wait before retrying: the server's Retry-After, else ``default``."""
    value = (e.headers or {}).get("Retry-After")
    try:
        return max(1.0, float(value))
    except (TypeError, ValueError):  # absent, or an HTTP date: not worth parsing
        return default


def _server_message(e: ApiException) -> str:
    """The API server's own explanation (a Status object's message), if any."""
    try:
        return str(json.loads(e.body)["message"])
    except (TypeError, ValueError, KeyError):
        return e.reason or "no message"


def _ignore(reason: str, message: str) -> None:
    pass


# --- kopf wiring ------------------------------------------------------------


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Configure the kubernetes client and kopf before any handler runs."""
    try:
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            kubernetes.config.load_incluster_config()
        else:
            kubernetes.config.load_kube_config()  # KUBECONFIG, else ~/.kube/config
    except kubernetes.config.ConfigException as e:
        raise kopf.PermanentError(
            f"no Kubernetes cluster configured ({e}): set KUBECONFIG to a "
            f"kubeconfig file, or run the operator in a Pod"
        ) from e
    # Watches end quietly on some networks and proxies; asking the server to
    # close each stream after 5 minutes (and giving up client-side a little
    # later) makes kopf reconnect regularly instead of waiting forever.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.posting.reporting_component = "tenant-operator"


@kopf.on.resume(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.update(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.create(GROUP, VERSION, PLURAL, id="reconcile")
def reconcile(
    name: str,
    spec: kopf.Spec,
    body: kopf.Body,
    patch: kopf.Patch,
    **_: Any,
) -> dict[str, Any]:
    """Reconcile on create, on every spec change, and for every Tenant at startup.

    on.resume makes a restarted operator re-check what it may have missed
    while down. If the process dies mid-way, kopf has not recorded success,
    so the same handler runs again and reconcile_tenant converges.

    kopf stores the returned dict in ``status.reconcile``; the same fields go
    to the top level of status too, where the printer columns read them.
    """

    def post_event(reason: str, message: str) -> None:
        kopf.info(body, reason=reason, message=message)

    try:
        status = reconcile_tenant(name, spec, report=post_event)
    except kopf.PermanentError as e:
        # kopf only logs a permanent failure and forgets it once handling is
        # over, so record it where users look: status and a Warning Event.
        patch.status.update(phase="Failed", message=str(e))
        kopf.warn(body, reason="ReconcileFailed", message=str(e))
        raise
    except kopf.TemporaryError as e:
        patch.status.update(phase="Retrying", message=str(e))
        raise
    patch.status.update(status, message=None)  # None removes a stale message
    return status


@kopf.on.delete(GROUP, VERSION, PLURAL, id="delete-namespace")
def delete(name: str, logger: kopf.Logger, **_: Any) -> None:
    """Delete the tenant's namespace before the Tenant goes (kopf's finalizer)."""
    delete_tenant_namespace(name)
    logger.info(f"deleted namespace of tenant {name!r} (if it existed)")
