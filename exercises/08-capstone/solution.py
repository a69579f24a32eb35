"""ReadOnlyAccess operator: the capstone's reference solution, for one on-call runbook.

The runbook, as it was run by hand (twice too many): *"the payments team needs to
read what runs in namespace shop: give them a ServiceAccount that can get, list and
watch pods, services and configmaps there, and nothing else"*::

    kubectl create serviceaccount payments-readonly -n shop
    kubectl create role payments-readonly -n shop --verb=get,list,watch \
        --resource=pods,services,configmaps
    kubectl create rolebinding payments-readonly -n shop --role=payments-readonly \
        --serviceaccount=shop:payments-readonly --group=payments
    kubectl create token payments-readonly -n shop        # the team's credential

Its intent is a ``hedronite.io/v1alpha1`` ``ReadOnlyAccess`` (namespaced, three spec
fields: ``resources``, ``apps``, ``team``; see ``crd.yaml``) and its execution is one
idempotent function, :func:`reconcile_access`: GET each of the three objects, create
what is missing, correct what drifted, write nothing when nothing differs. Each is
named like the ReadOnlyAccess, carries an owner reference to it (the garbage
collector deletes them with it: no finalizer is needed) and the label
``hedronite.io/readonlyaccess``. An object of one of those names that is not ours is
never touched: status says ``NameTaken`` and one Warning Event names the fix, and
the operator looks again every 30 s (the ownership rules, error routing and
``Ready`` condition are the worked examples' own, copied: see
tests/unit/test_operator_copies.py).

Run it against the current kubeconfig::

    kopf run --all-namespaces exercises/08-capstone/solution.py

and grade it as any operator: ``operatorlab verify exercises/08-capstone/solution.py
--crd exercises/08-capstone/crd.yaml --example exercises/08-capstone/example.yaml
--unusable exercises/08-capstone/unusable.yaml``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import kopf
import kubernetes.client
from kubernetes.client import ApiException, CoreV1Api, RbacAuthorizationV1Api

GROUP, VERSION, PLURAL = "hedronite.io", "v1alpha1", "readonlyaccesses"
KIND = "ReadOnlyAccess"
OPERATOR = "readonlyaccess-operator"  # Event source
ACCESS_LABEL = "hedronite.io/readonlyaccess"
ADOPT_ANNOTATION = "hedronite.io/adopt"
READ_VERBS = ["get", "list", "watch"]
# With spec.apps: the workloads of the apps group, read-only too.
APPS_RESOURCES = ["deployments", "replicasets", "statefulsets", "daemonsets"]
DEFAULT_RESOURCES = ["pods", "services", "configmaps"]

DEFAULT_RETRY_DELAY = 10.0
CONFLICT_RETRY_DELAY = 1.0
NAME_TAKEN_RETRY_DELAY = 30.0

Reporter = Callable[[str, str], None]


# --- Desired state: pure functions ------------------------------------------


def labels(name: str) -> dict[str, str]:
    return {ACCESS_LABEL: name}


def role_rules(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Role's rules: read-only verbs on the core resources asked for (and the apps workloads)."""
    rules = [{"apiGroups": [""], "resources": sorted(spec.get("resources") or DEFAULT_RESOURCES),
              "verbs": READ_VERBS}]
    if spec.get("apps"):
        rules.append({"apiGroups": ["apps"], "resources": APPS_RESOURCES, "verbs": READ_VERBS})
    return rules


def binding_subjects(name: str, namespace: str, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Who gets the Role: the ServiceAccount, and the team's group if one is named."""
    subjects: list[dict[str, Any]] = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    if spec.get("team"):
        subjects.append({"kind": "Group", "name": spec["team"], "apiGroup": "rbac.authorization.k8s.io"})
    return subjects


def manifests(name: str, namespace: str, spec: Mapping[str, Any], uid: str) -> dict[str, dict[str, Any]]:
    """The three objects of one ReadOnlyAccess, each owned by it."""
    meta = {"name": name, "namespace": namespace, "labels": labels(name)}
    objects: dict[str, dict[str, Any]] = {
        "ServiceAccount": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        "Role": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": dict(meta),
                 "rules": role_rules(spec)},
        "RoleBinding": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": dict(meta),
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                        "subjects": binding_subjects(name, namespace, spec)},
    }
    for body in objects.values():
        kopf.append_owner_reference(body, owner=owner_body(name, uid))
    return objects


# --- Ownership: claim before touching (the same code as the worked examples) --


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


def reconcile_access(
    name: str,
    namespace: str,
    spec: Mapping[str, Any],
    *,
    uid: str,
    core: CoreV1Api | None = None,
    rbac: RbacAuthorizationV1Api | None = None,
    report: Reporter | None = None,
) -> dict[str, Any]:
    """Make namespace ``namespace`` match one ReadOnlyAccess; return its status fields.

    Idempotent and level-triggered: GET each object, create it if missing,
    correct only what differs. Killed after any write, it is simply run again
    (kopf re-runs an unfinished handler) and finds what that write made.
    Raises NameTaken (nothing written) when a name is someone else's, and
    kopf.PermanentError or TemporaryError as the API's answer says.
    """
    core = CoreV1Api() if core is None else core
    rbac = RbacAuthorizationV1Api() if rbac is None else rbac
    report = _ignore if report is None else report
    owner = owner_body(name, uid)
    desired = manifests(name, namespace, spec, uid)
    try:
        _ensure("ServiceAccount", desired["ServiceAccount"], owner, report,
                read=lambda: core.read_namespaced_service_account(name, namespace),
                create=lambda body: core.create_namespaced_service_account(
                    namespace, kubernetes.client.V1ServiceAccount.model_validate(body)),
                patch=lambda body: core.patch_namespaced_service_account(name, namespace, body),
                drift=lambda observed, wanted: None)
        _ensure("Role", desired["Role"], owner, report,
                read=lambda: rbac.read_namespaced_role(name, namespace),
                create=lambda body: rbac.create_namespaced_role(
                    namespace, kubernetes.client.V1Role.model_validate(body)),
                patch=lambda body: rbac.patch_namespaced_role(name, namespace, body),
                drift=lambda observed, wanted: None if observed.get("rules") == wanted["rules"]
                else {"rules": wanted["rules"]})
        _ensure("RoleBinding", desired["RoleBinding"], owner, report,
                read=lambda: rbac.read_namespaced_role_binding(name, namespace),
                create=lambda body: rbac.create_namespaced_role_binding(
                    namespace, kubernetes.client.V1RoleBinding.model_validate(body)),
                patch=lambda body: rbac.patch_namespaced_role_binding(name, namespace, body),
                drift=lambda observed, wanted: None if observed.get("subjects") == wanted["subjects"]
                else {"subjects": wanted["subjects"]})
    except ApiException as e:
        routed = _route_api_error(e)
        if routed is None:
            raise
        raise routed from e
    return {"serviceAccount": name, "phase": "Ready"}


def _ensure(
    kind: str,
    desired: dict[str, Any],
    owner: kopf.Body,
    report: Reporter,
    *,
    read: Callable[[], Any],
    create: Callable[[dict[str, Any]], Any],
    patch: Callable[[dict[str, Any]], Any],
    drift: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None],
) -> None:
    """One child: create it if missing; if it exists, claim it (or refuse: NameTaken) and correct drift."""
    observed, created = _get_or_create(read=read, create=lambda: create(desired))
    where = f"{desired['metadata']['namespace']}/{desired['metadata']['name']}"
    if created:
        report(f"{kind}Created", f"created {kind} {where}")
        return
    current = _as_dict(observed)
    meta = current.get("metadata") or {}
    claim = ownership(meta, owner)
    if claim == TAKEN:
        raise name_taken(kind, meta, owner)
    if claim == ADOPTABLE:
        body = adoption_patch(meta, owner)
        body["metadata"]["labels"] = desired["metadata"]["labels"]
        patch(body)
        report(f"{kind}Adopted", f"adopted {kind} {where} ({ADOPT_ANNOTATION}={owner.metadata.name})")
    fix = drift(current, desired)
    if fix is not None:
        patch(fix)
        report(f"{kind}Corrected", f"corrected {kind} {where} to match the {KIND}")


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
    namespace: str,
    spec: kopf.Spec,
    meta: kopf.Meta,
    body: kopf.Body,
    patch: kopf.Patch,
    **_: Any,
) -> None:
    """Reconcile on create, on every spec change, and for every ReadOnlyAccess at startup; record status once."""

    def post_event(reason: str, message: str) -> None:
        kopf.info(body, reason=reason, message=message)

    try:
        status = reconcile_access(name, namespace, spec, uid=meta["uid"], report=post_event)
    except NameTaken as e:
        if record_status(body, patch, {"phase": "NameTaken"}, ready=False, reason="NameTaken", message=str(e)):
            kopf.warn(body, reason="NameTaken", message=str(e))
        raise
    except kopf.PermanentError as e:
        if record_status(body, patch, {"phase": "Failed"}, ready=False, reason="ReconcileFailed", message=str(e)):
            kopf.warn(body, reason="ReconcileFailed", message=str(e))
        raise
    except kopf.TemporaryError as e:
        record_status(body, patch, {"phase": "Retrying"}, ready=False, reason="Retrying", message=str(e))
        raise
    record_status(
        body, patch, status, ready=True, reason="Reconciled",
        message=f"ServiceAccount {name} may read {', '.join(role_rules(spec)[0]['resources'])}; "
                f"its token: kubectl create token {name} -n {namespace}",
    )
