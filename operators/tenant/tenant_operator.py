"""Tenant operator: one namespace and one CPU quota per Tenant.

A ``hedronite.io/v1`` ``Tenant`` (cluster-scoped) asks for:

* a namespace ``tenant-<name>``, labelled ``hedronite.io/tenant=<name>``;
* in it, a ResourceQuota ``tenant-quota`` whose ``requests.cpu`` and
  ``limits.cpu`` are both ``spec.cpuQuota``. Both, so that the tenant can
  neither reserve (requests) nor burst to (limits) more CPU than it was given.
  A consequence worth knowing: every container in the namespace must then state
  its CPU request and limit (or get them from a LimitRange), or it is refused.

Ownership
---------
Both objects carry an **owner reference** to the Tenant (a cluster-scoped
owner may own a cluster-scoped namespace and a namespaced quota) and the label
``hedronite.io/tenant=<name>``. The owner reference, matched by the Tenant's
uid, is what makes an object *ours*: a label can be set by anyone, and a name
can be reused, a uid never is. So:

* **Claim before touching.** An existing namespace or quota of the desired
  name that is not ours is never modified or deleted. The Tenant reports
  ``Ready=False``, reason ``NameTaken`` (naming the object and how to resolve
  it) and one Warning Event, and kopf retries every
  ``NAME_TAKEN_RETRY_DELAY`` seconds: a GET and, at most, a status write per
  attempt, until the name is free.
* **Adoption is explicit.** Whoever may annotate the object (RBAC decides:
  ``patch`` on it) hands it over with ``hedronite.io/adopt=<tenant name>``.
  The operator then adds its label and owner reference, removes the
  annotation, posts ``NamespaceAdopted``, and from then on the object is the
  Tenant's like one it created: corrected on drift, deleted with the Tenant.
  An object another controller owns (an owner reference with
  ``controller: true``) is never adopted: it has a manager already.
* **Delete only what is ours**, checked at delete time against the owner
  reference, and with the namespace's uid as a precondition, so that the
  object checked is the object deleted.
* **Nothing outlives its owner.** If the Tenant goes without the finalizer
  having run (stripped while the operator was down), the garbage collector
  deletes the namespace, and so the quota, by their owner reference.

Design
------
All the work is in one plain function, :func:`reconcile_tenant`. It is
*level-triggered* and *idempotent*: it reads what exists, compares it with what
the Tenant asks for, and writes only the difference. It can therefore run any
number of times, at any moment, and after a crash at any point (even SIGKILL
between creating the namespace and the quota) it converges to the same state
with no duplicates. It takes a name, a spec and the Tenant's uid (for the
owner references), not kopf's handler arguments, so the lab's hand-written
controllers (a polling loop, an informer with a work queue) call this very
function. The kopf handlers at the bottom are thin
wrappers: call it, record the result in status (a ``Ready`` condition with
``observedGeneration``), post Events.

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
API 409: the object changed under us        TemporaryError  retries after 1 s
the name is taken (not ours, see above)     NameTaken       retries every 30 s; status
                                                            NameTaken, one Event
any other error                             unchanged       retries with its backoff
==========================================  ==============  ===========================

Run it against the current kubeconfig (or in-cluster, see ``deploy/``)::

    kopf run --all-namespaces operators/tenant/tenant_operator.py

It imports only kopf, kubernetes and the standard library: it runs alone in
its image.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import kopf
import kubernetes.client
from kubernetes.client import ApiException, CoreV1Api
from kubernetes.utils import parse_quantity

GROUP, VERSION, PLURAL = "hedronite.io", "v1", "tenants"
KIND = "Tenant"
OPERATOR = "tenant-operator"  # ClusterRole, Event source
TENANT_LABEL = "hedronite.io/tenant"
# Put on an existing namespace or quota by whoever may annotate it, naming a
# Tenant: that Tenant takes the object over (see "Ownership" above).
ADOPT_ANNOTATION = "hedronite.io/adopt"
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
# An object changed between our read and our write (409): read it again soon.
CONFLICT_RETRY_DELAY = 1.0
# The name we need is taken: nothing tells us when it is freed or marked for
# adoption (we do not watch objects that are not ours), so look again, slowly.
NAME_TAKEN_RETRY_DELAY = 30.0

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


def namespace_manifest(tenant_name: str, uid: str | None = None) -> dict[str, Any]:
    """The desired Namespace of a tenant; owned by the Tenant ``uid`` when given."""
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace_name(tenant_name),
            "labels": {TENANT_LABEL: tenant_name},
        },
    }
    if uid is not None:
        kopf.append_owner_reference(manifest, owner=owner_body(tenant_name, uid))
    return manifest


def quota_manifest(tenant_name: str, cpu_quota: str | int, uid: str | None = None) -> dict[str, Any]:
    """The desired ResourceQuota of a tenant: CPU requests and limits capped.

    Owned by the Tenant ``uid`` when given: a cluster-scoped owner may own a
    namespaced object (the reverse is refused by the garbage collector).
    """
    cpu = str(cpu_quota)
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": QUOTA_NAME,
            "namespace": namespace_name(tenant_name),
            "labels": {TENANT_LABEL: tenant_name},
        },
        "spec": {"hard": {"requests.cpu": cpu, "limits.cpu": cpu}},
    }
    if uid is not None:
        kopf.append_owner_reference(manifest, owner=owner_body(tenant_name, uid))
    return manifest


# --- Ownership: claim before touching (the same code in tenant and website) --


OURS, ADOPTABLE, TAKEN = "ours", "adoptable", "taken"


class NameTaken(kopf.TemporaryError):
    """An object of a name we need exists and is not ours: it is left untouched.

    Temporary, so kopf tries again, but only every NAME_TAKEN_RETRY_DELAY
    seconds: the name may be freed, or the object marked for adoption, at
    any time, and no event of ours would say so.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, delay=NAME_TAKEN_RETRY_DELAY)


def owner_body(name: str, uid: str) -> kopf.Body:
    """Enough of one of our custom resources for kopf to build an owner reference to it."""
    return kopf.Body({"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name, "uid": uid}})


def ownership(meta: Mapping[str, Any], owner: kopf.Body) -> str:
    """Whose an existing object is: ``OURS``, ``ADOPTABLE`` by ``owner``, or ``TAKEN``.

    Ours means an owner reference with the owner's uid: a name is reused
    when an object is deleted and re-created, a uid never is, and a label
    anyone can set. Adoptable means ``ADOPT_ANNOTATION`` names the owner and
    no controller owns the object yet (two controllers would fight over it).
    """
    refs = meta.get("ownerReferences") or []
    if any(ref.get("uid") == owner.metadata.uid for ref in refs):
        return OURS
    handed_to = (meta.get("annotations") or {}).get(ADOPT_ANNOTATION)
    if handed_to == owner.metadata.name and not any(ref.get("controller") for ref in refs):
        return ADOPTABLE
    return TAKEN


def name_taken(kind: str, meta: Mapping[str, Any], owner: kopf.Body) -> NameTaken:
    """The NameTaken error for an object that is not ours: which, why, and how to resolve it."""
    name, namespace = meta.get("name"), meta.get("namespace")
    where = f"{namespace}/{name}" if namespace else f"{name}"
    controller = next((ref for ref in meta.get("ownerReferences") or [] if ref.get("controller")), None)
    if controller:
        return NameTaken(
            f"{kind} {where} exists and is controlled by {controller.get('kind')} {controller.get('name')}: "
            f"it is left untouched and cannot be adopted; delete it, or rename the {KIND}"
        )
    scope = f" -n {namespace}" if namespace else ""
    return NameTaken(
        f"{kind} {where} exists and was not created for this {KIND}: it is left untouched. "
        f"Delete or rename it, or rename the {KIND}; or hand it over to {KIND} {owner.metadata.name} "
        f"(which then manages it and deletes it with itself): "
        f"kubectl annotate {kind.lower()} {name}{scope} {ADOPT_ANNOTATION}={owner.metadata.name}"
    )


def adoption_patch(meta: Mapping[str, Any], owner: kopf.Body) -> dict[str, Any]:
    """A strategic merge patch adopting an object: our owner reference in, the annotation out.

    The strategic merge adds our owner reference to the others (merged by
    uid). The resourceVersion makes it conditional: if the object changed
    since we decided it was adoptable, the API answers 409 and we look again.
    """
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {ADOPT_ANNOTATION: None}}
    }
    kopf.append_owner_reference(patch, owner=owner)
    return patch


# --- Reconcile: observed state -> desired state -----------------------------


def reconcile_tenant(
    name: str,
    spec: Mapping[str, Any],
    *,
    uid: str,
    core: kubernetes.client.CoreV1Api | None = None,
    report: Reporter | None = None,
) -> dict[str, Any]:
    """Make the cluster match one Tenant (whose ``metadata.uid`` is ``uid``); return its status.

    Idempotent and level-triggered: GET each object, create it if missing,
    patch it only if it differs; nothing is written when nothing differs.
    An object of the name that is not the Tenant's is never written (see
    "Ownership"). ``report(reason, message)``, if given, hears of every
    write (the kopf handler posts them as Events).

    Returns ``{"namespace": "tenant-<name>", "cpuQuota": "<quota>",
    "phase": "Ready"}``. Raises kopf.PermanentError when retrying cannot help,
    NameTaken when a name is taken, and kopf.TemporaryError (with a delay)
    when a retry can help; see the module docstring for the table.
    """
    try:
        namespace = namespace_name(name)
        cpu = cpu_quota(spec)
    except ValueError as e:
        raise kopf.PermanentError(str(e)) from e
    core = _core() if core is None else core
    report = _ignore if report is None else report
    owner = owner_body(name, uid)

    try:
        _ensure_namespace(core, owner, report)
        _ensure_quota(core, owner, cpu, report)
    except ApiException as e:
        routed = _route_api_error(e)
        if routed is None:
            raise
        raise routed from e
    return {"namespace": namespace, "cpuQuota": cpu, "phase": "Ready"}


def delete_tenant_namespace(
    name: str, *, uid: str | None, core: kubernetes.client.CoreV1Api | None = None
) -> bool:
    """Delete a tenant's namespace (and so its quota) if it is the Tenant's; return whether it did.

    Ours is checked now, on the object as it is: an owner reference with the
    Tenant's ``uid``. ``uid=None`` is for a caller that only knows the Tenant
    is gone (a sweep): then an owner reference naming a Tenant of this name
    counts. The namespace's own uid is a precondition of the delete, so a
    namespace re-created under the same name since our GET is not deleted.
    Gone already is fine (False).

    The API only starts the deletion: the namespace stays Terminating until
    everything in it is gone, and reconcile_tenant waits for that before it
    re-creates a namespace of the same name.
    """
    try:
        namespace = namespace_name(name)
    except ValueError:
        # Such a Tenant never got a namespace: nothing to clean up, and its
        # deletion must not be blocked by a finalizer that can never succeed.
        return False
    core = _core() if core is None else core
    try:
        meta = _as_dict(core.read_namespace(name=namespace)).get("metadata") or {}
        if not _owned_by_tenant(meta, name, uid):
            return False
        preconditions = kubernetes.client.V1Preconditions(uid=meta.get("uid"))
        core.delete_namespace(name=namespace, body=kubernetes.client.V1DeleteOptions(preconditions=preconditions))
    except ApiException as e:
        if e.status in (404, 409):  # gone, or another namespace of the name now: not ours
            return False
        routed = _route_api_error(e)
        if routed is None:
            raise
        raise routed from e
    return True


def _owned_by_tenant(meta: Mapping[str, Any], name: str, uid: str | None) -> bool:
    """An owner reference to the Tenant ``uid`` or, if None, to a Tenant named ``name``."""
    return any(
        ref.get("uid") == uid
        if uid is not None
        else (ref.get("apiVersion"), ref.get("kind"), ref.get("name")) == (f"{GROUP}/{VERSION}", KIND, name)
        for ref in meta.get("ownerReferences") or []
    )


def _ensure_namespace(core: CoreV1Api, owner: kopf.Body, report: Reporter) -> bool:
    """Create, adopt or correct the tenant's namespace; return whether it wrote."""
    tenant_name = owner.metadata.name
    desired = namespace_manifest(tenant_name, owner.metadata.uid)
    name = desired["metadata"]["name"]
    namespace, created = _get_or_create(
        read=lambda: core.read_namespace(name=name),
        create=lambda: core.create_namespace(body=kubernetes.client.V1Namespace.model_validate(desired)),
    )
    if created:
        report("NamespaceCreated", f"created namespace {name}")
        return True
    meta = _as_dict(namespace).get("metadata") or {}
    if meta.get("deletionTimestamp"):
        # Anything created in it now would be refused (403) and vanish anyway.
        raise kopf.TemporaryError(
            f"namespace {name} is still being deleted (Terminating); "
            f"it will be re-created once it is gone",
            delay=DEFAULT_RETRY_DELAY,
        )
    return _claim(
        "Namespace", meta, owner, desired, report,
        patch=lambda body: core.patch_namespace(name=name, body=body),
    )


def _ensure_quota(core: CoreV1Api, owner: kopf.Body, cpu: str, report: Reporter) -> bool:
    """Create, adopt or correct the tenant's ResourceQuota; return whether it wrote."""
    desired = quota_manifest(owner.metadata.name, cpu, owner.metadata.uid)
    namespace = desired["metadata"]["namespace"]
    quota, created = _get_or_create(
        read=lambda: core.read_namespaced_resource_quota(name=QUOTA_NAME, namespace=namespace),
        create=lambda: core.create_namespaced_resource_quota(
            namespace=namespace, body=kubernetes.client.V1ResourceQuota.model_validate(desired)
        ),
    )
    if created:
        report("QuotaCreated", f"created ResourceQuota {namespace}/{QUOTA_NAME}, cpu {cpu}")
        return True

    def patch(body: dict[str, Any]) -> Any:
        return core.patch_namespaced_resource_quota(name=QUOTA_NAME, namespace=namespace, body=body)

    wrote = _claim("ResourceQuota", _as_dict(quota).get("metadata") or {}, owner, desired, report, patch=patch)
    # Compare only our keys of spec.hard, as quantities: the API stores "2.5"
    # as "2500m", which is the same amount, not drift.
    hard = (quota.spec.hard if quota.spec else None) or {}
    wanted = desired["spec"]["hard"]
    if not _same_quantities(hard, wanted):
        patch({"spec": {"hard": wanted}})
        was = hard.get("limits.cpu", "unset")
        report("QuotaUpdated", f"set ResourceQuota {namespace}/{QUOTA_NAME} cpu to {cpu} (was {was})")
        return True
    return wrote


def _claim(
    kind: str,
    meta: Mapping[str, Any],
    owner: kopf.Body,
    desired: Mapping[str, Any],
    report: Reporter,
    *,
    patch: Callable[[dict[str, Any]], Any],
) -> bool:
    """Make sure an existing object is ours, with our label; return whether it wrote.

    Raises NameTaken, writing nothing, if it is someone else's. An object
    marked for adoption becomes ours; one of ours gets its label back if it
    lost it. Other labels belong to others (or to Kubernetes) and stay.
    """
    claim = ownership(meta, owner)
    if claim == TAKEN:
        raise name_taken(kind, meta, owner)
    wanted = desired["metadata"]["labels"]
    where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
    if claim == ADOPTABLE:
        body = adoption_patch(meta, owner)
        body["metadata"]["labels"] = wanted
        patch(body)
        report(f"{kind}Adopted", f"adopted {kind} {where} ({ADOPT_ANNOTATION}={owner.metadata.name})")
        return True
    labels = meta.get("labels") or {}
    if any(labels.get(key) != value for key, value in wanted.items()):
        patch({"metadata": {"labels": wanted}})
        report(f"{kind}Labeled", f"labeled {kind} {where} {TENANT_LABEL}={owner.metadata.name}")
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
        key in observed and _quantity(observed[key]) == _quantity(value)
        for key, value in wanted.items()
    )


def _quantity(text: str) -> Decimal:
    """A Kubernetes quantity (``2``, ``2500m``, ``1Gi``) as a number; ValueError if it is none."""
    # kubernetes.utils.parse_quantity is unannotated in the client (37.0.2);
    # it returns a Decimal.
    amount: Decimal = parse_quantity(text)  # type: ignore[no-untyped-call]
    return amount


# --- Errors and API objects (the same code in every operator here) ----------


def _route_api_error(e: ApiException) -> kopf.PermanentError | kopf.TemporaryError | None:
    """Map an API error to what a retry can achieve; None: leave it as it is."""
    status = e.status or 0
    message = _server_message(e)
    if status == 422:
        return kopf.PermanentError(f"the API refused an object (422): {message}; fix the {KIND}")
    if status == 409:
        return kopf.TemporaryError(
            f"an object changed while we wrote it (409): {message}; retrying",
            delay=CONFLICT_RETRY_DELAY,
        )
    if status == 403 and "being terminated" in message:
        # The NamespaceLifecycle admission plugin, not RBAC: the namespace
        # is being deleted while we work in it.
        return kopf.TemporaryError(
            f"the namespace is being deleted (403): {message}; retrying",
            delay=DEFAULT_RETRY_DELAY,
        )
    if status == 403:
        return kopf.TemporaryError(
            f"forbidden (403): {message}; grant the verb in the ClusterRole "
            f"'{OPERATOR}' (deploy/clusterrole.yaml); the operator retries by itself",
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
    if value is None:
        return default
    try:
        return max(1.0, float(value))
    except (TypeError, ValueError):  # an HTTP date: not worth parsing
        return default


def _server_message(e: ApiException) -> str:
    """The API server's own explanation (a Status object's message), if any."""
    try:
        return str(json.loads(e.body or "")["message"])
    except (TypeError, ValueError, KeyError):
        return e.reason or "no message"


@functools.cache
def _serializer() -> kubernetes.client.ApiClient:
    return kubernetes.client.ApiClient()


@functools.cache
def _core() -> CoreV1Api:
    """The process's one CoreV1Api, made at first use (after kopf's login set the default configuration).

    Every reconcile shares its connection pool. A new ``CoreV1Api()`` per
    call would build a new ApiClient each time: a deep copy of the
    configuration, the CA loaded, a new TLS connection, about ten times the
    CPU of the GET it then sends.
    """
    return CoreV1Api()


def _as_dict(obj: Any) -> dict[str, Any]:
    """An API object as the API's own JSON shape (camelCase keys, no nulls)."""
    if isinstance(obj, Mapping):
        return dict(obj)
    # The client leaves this method unannotated; it returns the JSON shape of obj.
    result: dict[str, Any] = _serializer().sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    return result


def _ignore(reason: str, message: str) -> None:
    pass


# --- Status: one Ready condition (the same code in every operator here) -----


def ready_conditions(
    previous: Sequence[Mapping[str, Any]],
    *,
    ready: bool,
    reason: str,
    message: str,
    generation: int | None,
    now: str,
) -> list[dict[str, Any]]:
    """``status.conditions`` with its ``Ready`` condition set as given, the others kept.

    ``lastTransitionTime`` moves only when the status flips between True and
    False, as the Kubernetes API conventions ask; ``observedGeneration`` says
    which spec the condition is about.
    """
    status = "True" if ready else "False"
    old = next((c for c in previous if c.get("type") == "Ready"), None)
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
    condition = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since or now,
    }
    others = [dict(c) for c in previous if c.get("type") != "Ready"]
    return [*others, condition]


def record_status(
    body: kopf.Body,
    patch: kopf.Patch,
    fields: Mapping[str, Any],
    *,
    ready: bool,
    reason: str,
    message: str,
) -> bool:
    """Patch status: ``fields``, the Ready condition, observedGeneration; return whether Ready changed.

    Only what differs is written, so the same outcome again (a retry, a
    resync) costs no write. Callers post a Warning Event only when Ready
    changed: one per retry would bury the one that matters. The top-level
    ``message`` repeats a not-Ready message for ``kubectl get -o yaml``
    readers and is removed once Ready.
    """
    status = body.get("status") or {}
    generation = body.metadata.get("generation")
    previous = status.get("conditions") or []
    conditions = ready_conditions(
        previous, ready=ready, reason=reason, message=message, generation=generation, now=_now()
    )
    wanted = {
        **fields,
        "message": None if ready else message,  # None removes it
        "observedGeneration": generation,
        "conditions": conditions,
    }
    changed = {key: value for key, value in wanted.items() if status.get(key) != value}
    if changed:
        patch.status.update(changed)
    before: Mapping[str, Any] = next((c for c in previous if c.get("type") == "Ready"), {})
    after = conditions[-1]
    return any(before.get(key) != after[key] for key in ("status", "reason", "message"))


def _now() -> str:
    """The current time as the API writes it (RFC 3339, UTC, seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- kopf wiring ------------------------------------------------------------


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Configure kopf before any handler runs.

    The kubernetes client needs no loader here: with no ``@kopf.on.login``
    handler and the ``kubernetes`` package installed, kopf's fallback login
    (``login_via_client``, kopf 1.45) calls ``load_incluster_config()`` and
    else ``load_kube_config()``, which set the client's default
    Configuration that ``CoreV1Api()`` uses, before any resource handler runs.
    """
    # Watches end quietly on some networks and proxies; asking the server to
    # close each stream after 5 minutes (and giving up client-side a little
    # later) makes kopf reconnect regularly instead of waiting forever.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.posting.reporting_component = OPERATOR


@kopf.on.resume(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.update(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.create(GROUP, VERSION, PLURAL, id="reconcile")
def reconcile(
    name: str,
    spec: kopf.Spec,
    meta: kopf.Meta,
    body: kopf.Body,
    patch: kopf.Patch,
    **_: Any,
) -> None:
    """Reconcile on create, on every spec change, and for every Tenant at startup.

    on.resume makes a restarted operator re-check what it may have missed
    while down. If the process dies mid-way, kopf has not recorded success,
    so the same handler runs again and reconcile_tenant converges.

    Status is written once, by patch, and nothing is returned: kopf would
    store a returned dict a second time in ``status.reconcile``, a copy that
    nothing reads and that goes stale when a failure is patched over it.
    """

    def post_event(reason: str, message: str) -> None:
        kopf.info(body, reason=reason, message=message)

    try:
        status = reconcile_tenant(name, spec, uid=meta["uid"], report=post_event)
    except NameTaken as e:
        if record_status(body, patch, {"phase": "NameTaken"}, ready=False, reason="NameTaken", message=str(e)):
            kopf.warn(body, reason="NameTaken", message=str(e))
        raise
    except kopf.PermanentError as e:
        # kopf only logs a permanent failure and forgets it once handling is
        # over, so record it where users look: status and a Warning Event.
        if record_status(body, patch, {"phase": "Failed"}, ready=False, reason="ReconcileFailed", message=str(e)):
            kopf.warn(body, reason="ReconcileFailed", message=str(e))
        raise
    except kopf.TemporaryError as e:
        record_status(body, patch, {"phase": "Retrying"}, ready=False, reason="Retrying", message=str(e))
        raise
    record_status(
        body, patch, status, ready=True, reason="Reconciled",
        message=f"namespace {status['namespace']} and its quota match the Tenant",
    )


@kopf.on.delete(GROUP, VERSION, PLURAL, id="delete-namespace")
def delete(name: str, meta: kopf.Meta, logger: kopf.Logger, **_: Any) -> None:
    """Delete the tenant's namespace before the Tenant goes (kopf's finalizer), if it is the Tenant's."""
    if delete_tenant_namespace(name, uid=meta["uid"]):
        logger.info(f"deleted namespace of tenant {name!r}")
    else:
        logger.info(f"tenant {name!r} owns no namespace (none, or not this Tenant's): nothing deleted")
