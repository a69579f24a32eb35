"""Website operator: a Deployment and a Service per Website.

An ``example.com/v1`` ``Website`` (namespaced) asks for a web server:

* a Deployment named like the Website, ``spec.replicas`` Pods of
  ``spec.image`` listening on ``spec.port`` (a readiness probe on that port);
* a Service of the same name exposing ``spec.port`` to those Pods.

Both carry ``app.kubernetes.io/name=<website>`` and
``app.kubernetes.io/managed-by=website-operator`` and an owner reference to
the Website, so deleting the Website lets the garbage collector delete them:
no finalizer, no delete handler, and a Website can be deleted even while the
operator is down.

Ownership
---------
The owner reference, matched by the Website's uid, is what makes a child
*ours* (labels anyone can set; a name is reused, a uid never is):

* **Claim before touching.** If a Deployment or Service of the Website's name
  exists and is not ours, the operator writes neither child: the Website
  reports ``Ready=False``, reason ``NameTaken`` (naming the object and how to
  resolve it) and one Warning Event, and kopf retries every
  ``NAME_TAKEN_RETRY_DELAY`` seconds (a GET of each child and, at most, a
  status write per attempt) until the name is free.
* **Adoption is explicit.** Whoever may annotate the object (RBAC decides:
  ``patch`` on it) hands it over with ``example.com/adopt=<website name>``.
  The operator adds its owner reference and removes the annotation
  (``DeploymentAdopted``/``ServiceAdopted``), then applies the Website's spec
  as for its own children: the fields it declares become its own (``force``),
  fields others set stay (server-side apply), and the garbage collector
  deletes the object with the Website. An object another controller owns is
  never adopted.
* **Delete only what is ours**: the garbage collector deletes only objects
  whose owner reference names the Website's uid; a foreign Service of the
  same name outlives the Website untouched.

* **Create, never take over.** A child absent when read is created with a
  plain create (POST), which the API refuses (409 AlreadyExists) if an
  object of that name appeared since the read; that object is then read and
  checked like any other (NameTaken unless ours or marked for adoption).
  Server-side apply, which would create or take over whatever it finds,
  only ever writes a child verified ours.

Design
------
The work is in one plain function, :func:`reconcile_website`. It keeps each
child with **server-side apply** (SSA) under the field manager
``website-operator``: it sends the whole desired object every time, and the API
server merges it, records which fields this manager owns, and writes nothing
when nothing differs (no new resourceVersion, no watch event). Why SSA rather
than GET, compare and patch, as the Tenant operator does:

* no comparison code of our own: the server knows which fields it defaulted
  (``protocol: TCP``, ``clusterIP``, the rollout strategy), so they are never
  mistaken for drift;
* a field we stop sending is removed (the old port after a port change),
  which a merge patch would leave behind;
* fields others own (an HPA's, a ``kubectl annotate``) are left alone;
  ``force`` takes back the fields we declare, so our spec wins over a manual
  ``kubectl edit`` of the image or the replicas.

It reads each child first, for the ownership check and to tell "created"
from "updated" from "unchanged" for the Events. A child it creates is POSTed
first (see "Create, never take over"), then applied, and the ownership entry
the create left (manager ``website-operator``, operation ``Update``) is
removed: fields still owned by it would survive an apply that stops sending
them. Like the Tenant's reconcile it is level-triggered
and idempotent: run it any number of times, after a crash at any point, and it
converges. It takes a name, a namespace, a spec and the owner's uid, not kopf's
handler arguments, so it can be called from anywhere.

Changing ``spec.image`` or ``spec.port`` changes the Deployment's Pod
template, so the Deployment rolls out a new ReplicaSet; the Service's port
follows (its ``targetPort`` is the container port's name, ``http``).

Status has two writers that never write the same field:

* the reconcile handler: ``phase`` (Applied, Retrying, Failed, NameTaken),
  ``message``, ``deployment``, ``service``, ``observedGeneration`` and the
  ``Ready`` condition;
* the Deployment watcher (``@kopf.on.event`` on Deployments labelled
  ``managed-by=website-operator``): ``replicas``, ``readyReplicas``,
  ``updatedReplicas`` and ``rollout`` (Complete, Progressing), copied from the
  owned Deployment every time its status changes. It reacts to the Deployment
  controller's own reports, so it neither polls nor writes annotations on
  the Deployments (an ``on.event`` handler keeps no state on the object).
  The same watcher undoes drift: a Deployment deleted, scaled or re-imaged by
  hand is applied again at once (``DriftDetected``), with the Website's spec
  read from a ``kopf.index`` of Websites rather than a GET per event.

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
namespace Terminating (a 403 on create)     TemporaryError  retries (the Website goes
                                                            with its namespace)
API 409: the object changed under us        TemporaryError  retries after 1 s
the name is taken (not ours, see above)     NameTaken       retries every 30 s; status
                                                            NameTaken, one Event
any other error                             unchanged       retries with its backoff
==========================================  ==============  ===========================

Run it against the current kubeconfig (or in-cluster, see ``deploy/``)::

    kopf run --all-namespaces operators/website/website_operator.py

It imports only kopf, kubernetes and the standard library: it runs alone in
its image.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import kopf
import kubernetes.client
from kubernetes.client import ApiException, AppsV1Api, CoreV1Api, CustomObjectsApi
from kubernetes.utils import parse_quantity

GROUP, VERSION, PLURAL, KIND = "example.com", "v1", "websites", "Website"
OPERATOR = "website-operator"  # field manager, managed-by label, ClusterRole, Event source
# Put on an existing Deployment or Service by whoever may annotate it, naming a
# Website: that Website takes the object over (see "Ownership" above).
ADOPT_ANNOTATION = "example.com/adopt"
NAME_LABEL = "app.kubernetes.io/name"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
CONTAINER_NAME = "web"
PORT_NAME = "http"

# The CRD's defaults (crds/website.yaml; a unit test checks they agree): the
# API server fills them in, these cover callers that bypass the schema.
DEFAULT_IMAGE = "nginx:1.25"
DEFAULT_PORT = 80
DEFAULT_REPLICAS = 1
MAX_REPLICAS = 50
# What spec.resources may set (crds/website.yaml says the same).
RESOURCE_KINDS = frozenset({"requests", "limits"})
RESOURCE_NAMES = frozenset({"cpu", "memory"})

# The same rule as metadata.name in crds/website.yaml: the Service takes the
# Website's name, and a Service name must be a DNS-1035 label.
NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
NAME_MAX_LENGTH = 63

# Seconds to wait before a retry when the API server does not say (Retry-After).
DEFAULT_RETRY_DELAY = 10.0
# An object changed between our read and our write (409): read it again soon.
CONFLICT_RETRY_DELAY = 1.0
# The name we need is taken: nothing tells us when it is freed or marked for
# adoption (we do not watch objects that are not ours), so look again, slowly.
NAME_TAKEN_RETRY_DELAY = 30.0
# The Deployment watcher retries a failed status write this often, at most
# STATUS_RETRY_MAX_DELAY apart: there is no later event to retry it for us.
STATUS_WRITE_ATTEMPTS = 3
STATUS_RETRY_MAX_DELAY = 5.0

# report(reason, message) is called once for every write reconcile_website makes.
Reporter = Callable[[str, str], None]


# --- Desired state: pure functions, unit-tested without a cluster -----------


def website_spec(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Return the Website's ``{"image", "port", "replicas"}``, defaults filled in.

    Raises ValueError, saying what is wrong and how to fix it, when the name
    or a field cannot work. The CRD schema already refuses all of these; this
    guards the callers that bypass it and objects stored under an older schema.
    """
    if len(name) > NAME_MAX_LENGTH or not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(
            f"website name {name!r} cannot be used as a Service name: it must be a "
            f"DNS-1035 label (a lowercase letter first, then lowercase letters, digits "
            f"and '-', at most {NAME_MAX_LENGTH} characters); rename the Website"
        )
    image = spec.get("image", DEFAULT_IMAGE)
    if not isinstance(image, str) or not image or re.search(r"\s", image):
        raise ValueError(
            f"spec.image must be a container image reference such as nginx:1.25, "
            f"got {image!r}; set spec.image on the Website"
        )
    port = spec.get("port", DEFAULT_PORT)
    # bool is an int subclass: True is not port 1.
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"spec.port must be a TCP port from 1 to 65535, got {port!r}; fix spec.port")
    replicas = spec.get("replicas", DEFAULT_REPLICAS)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= MAX_REPLICAS:
        raise ValueError(
            f"spec.replicas must be a whole number from 0 to {MAX_REPLICAS}, got {replicas!r}; "
            f"fix spec.replicas"
        )
    site: dict[str, Any] = {"image": image, "port": port, "replicas": replicas}
    if (resources := spec.get("resources")) is not None:
        site["resources"] = container_resources(resources)
    return site


def container_resources(resources: Any) -> dict[str, dict[str, str]]:
    """``spec.resources`` as a container's ``resources``: ``requests`` and ``limits`` of cpu and memory.

    A namespace with a ResourceQuota on CPU or memory (a Tenant's) refuses every Pod that
    does not state them: the ReplicaSet's creates fail (FailedCreate), and the Website
    reports it in ``status.rolloutMessage``. Raises ValueError for anything that is not
    such a quantity; the API server judges the rest (a limit below its request is a 422).
    """
    if not isinstance(resources, Mapping) or set(resources) - RESOURCE_KINDS:
        raise ValueError(f"spec.resources may hold requests and limits, got {resources!r}; fix spec.resources")
    result: dict[str, dict[str, str]] = {}
    for kind, amounts in resources.items():
        if not isinstance(amounts, Mapping) or set(amounts) - RESOURCE_NAMES:
            raise ValueError(f"spec.resources.{kind} may hold cpu and memory, got {amounts!r}; "
                             f"fix spec.resources.{kind}")
        for resource, amount in amounts.items():
            try:
                if isinstance(amount, bool) or not isinstance(amount, (int, str)):
                    raise ValueError(amount)
                _quantity(amount)
            except ValueError:
                raise ValueError(f"spec.resources.{kind}.{resource} must be a quantity such as 100m, 0.5 or "
                                 f"128Mi, got {amount!r}; fix spec.resources.{kind}.{resource}") from None
        result[kind] = {resource: str(amount) for resource, amount in amounts.items()}
    return result


def labels(name: str) -> dict[str, str]:
    """The labels of a Website's Deployment, Pods and Service."""
    return {NAME_LABEL: name, MANAGED_BY_LABEL: OPERATOR}


def child_metadata(name: str, namespace: str) -> dict[str, Any]:
    """Metadata every child of a Website carries: its name and our labels.

    The owner reference comes from ``kopf.append_owner_reference`` (not
    ``kopf.adopt``, which would also copy the Website's own labels onto the
    child). It makes the Website *the* managing owner (``controller: true``,
    at most one per object); ``blockOwnerDeletion: true`` makes a foreground
    deletion of the Website wait for its children. Where the
    OwnerReferencesPermissionEnforcement admission plugin is on (OpenShift),
    setting it needs ``update`` on ``websites/finalizers``; stock
    kube-apiserver, kind and minikube do not enable that plugin.
    """
    return {"name": name, "namespace": namespace, "labels": labels(name)}


def deployment_manifest(name: str, namespace: str, site: Mapping[str, Any], owner: kopf.Body) -> dict[str, Any]:
    """The desired Deployment of a Website (``site`` from :func:`website_spec`).

    Everything the operator declares, and nothing else: server-side apply
    makes the operator the owner of exactly these fields.
    """
    manifest: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": child_metadata(name, namespace),
        "spec": {
            "replicas": site["replicas"],
            # Immutable once created; both labels, so that another app's Pods
            # with the same app.kubernetes.io/name are never taken over.
            "selector": {"matchLabels": labels(name)},
            "template": {
                "metadata": {"labels": labels(name)},
                "spec": {
                    "containers": [
                        {
                            "name": CONTAINER_NAME,
                            "image": site["image"],
                            "ports": [{"name": PORT_NAME, "containerPort": site["port"], "protocol": "TCP"}],
                            # Ready means "accepts connections on the port": a
                            # Pod that does not listen there never becomes
                            # ready, and a rollout to it stalls with the old
                            # Pods still serving.
                            "readinessProbe": {"tcpSocket": {"port": PORT_NAME}, "periodSeconds": 5},
                            **({"resources": site["resources"]} if "resources" in site else {}),
                        }
                    ]
                },
            },
        },
    }
    kopf.append_owner_reference(manifest, owner=owner)
    return manifest


def service_manifest(name: str, namespace: str, site: Mapping[str, Any], owner: kopf.Body) -> dict[str, Any]:
    """The desired Service of a Website: ``spec.port`` to the Pods' ``http`` port."""
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(name, namespace),
        "spec": {
            "selector": labels(name),
            "ports": [{"name": PORT_NAME, "port": site["port"], "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }
    kopf.append_owner_reference(manifest, owner=owner)
    return manifest


def owning_website(deployment: Mapping[str, Any]) -> str | None:
    """The name of the Website whose own Deployment this is, or None.

    Its controller reference names a Website, and the Deployment bears that
    Website's name, as every child does: anyone may put an owner reference
    and our label on a Deployment of their own (``decoy``), and its replica
    counts must not pass for the Website's.
    """
    meta = deployment.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("apiVersion") == f"{GROUP}/{VERSION}" and ref.get("kind") == KIND and ref.get("controller"):
            name = ref.get("name")
            return name if isinstance(name, str) and name == meta.get("name") else None
    return None


def rollout_status(deployment: Mapping[str, Any]) -> dict[str, Any]:
    """The Website status fields that follow its Deployment.

    ``replicas`` is what the Deployment asks for; ``rollout`` is Complete once
    the Deployment controller has seen the latest spec and every Pod is of
    the latest template and ready (no old Pods left), ReplicaFailure while its
    ReplicaSet cannot create or delete Pods, else Progressing.
    ``rolloutMessage`` then says why, in the controller's words: the
    Deployment controller copies a ReplicaSet's ``ReplicaFailure`` condition
    (reason ``FailedCreate``: a quota, a LimitRange, an admission policy
    refused the Pod) onto the Deployment (kube-controller-manager v1.36,
    ``pkg/controller/deployment/progress.go``). None removes it once resolved.
    """
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    wanted = spec.get("replicas", 1)
    ready = status.get("readyReplicas", 0)
    updated = status.get("updatedReplicas", 0)
    complete = (
        status.get("observedGeneration", 0) >= meta.get("generation", 1)
        and updated == wanted
        and status.get("replicas", 0) == wanted
        and ready == wanted
    )
    failure = next((c for c in status.get("conditions") or []
                    if c.get("type") == "ReplicaFailure" and c.get("status") == "True"), None)
    rollout = "Complete" if complete else "ReplicaFailure" if failure else "Progressing"
    return {
        "replicas": wanted,
        "readyReplicas": ready,
        "updatedReplicas": updated,
        "rollout": rollout,
        "rolloutMessage": f"{failure.get('reason')}: {failure.get('message')}" if failure and not complete else None,
    }


def deployment_drift(deployment: Mapping[str, Any], site: Mapping[str, Any]) -> str | None:
    """What someone changed by hand in a Website's Deployment, in words; None if it is as declared.

    Only the fields the operator declares: ``kubectl scale`` (replicas), ``kubectl set
    image`` and ``kubectl set resources`` on its container. Fields others own (an
    annotation, a label of their own) are theirs, not drift.
    """
    spec = deployment.get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    container: Mapping[str, Any] = next((c for c in containers if c.get("name") == CONTAINER_NAME), {})
    ports = container.get("ports") or [{}]
    found = {"replicas": spec.get("replicas"), "image": container.get("image"),
             "port": ports[0].get("containerPort"), "resources": container.get("resources") or {}}
    wanted = {"replicas": site["replicas"], "image": site["image"], "port": site["port"],
              "resources": site.get("resources") or {}}
    changed = [f"{key} {found[key]!r} (the Website asks for {wanted[key]!r})"
               for key in wanted if not _same(found[key], wanted[key])]
    return ", ".join(changed) or None


def _quantity(amount: str | int) -> Decimal:
    """A Kubernetes quantity (``2``, ``500m``, ``128Mi``) as a number; ValueError if it is none."""
    # kubernetes.utils.parse_quantity is unannotated in the client (37.0.2); it returns a Decimal.
    value: Decimal = parse_quantity(amount)  # type: ignore[no-untyped-call]
    return value


def _same(found: Any, wanted: Any) -> bool:
    """Equal as the API server stores them: quantities normalised (``"1"`` and ``1``, ``"0.5"`` and ``"500m"``)."""
    if isinstance(wanted, Mapping) and isinstance(found, Mapping):
        return set(found) == set(wanted) and all(_same(found[k], wanted[k]) for k in wanted)
    if isinstance(wanted, (str, int)) and isinstance(found, (str, int)) and not isinstance(wanted, bool):
        try:
            return _quantity(found) == _quantity(wanted)
        except ValueError:
            return found == wanted
    return bool(found == wanted)


_SHOWN = {"Deployment": ("image", "port", "replicas"), "Service": ("port",)}


def describe(kind: str, obj: Mapping[str, Any]) -> str:
    """A child in words, e.g. ``image nginx:1.25, port 80, replicas 2``."""
    return ", ".join(f"{what} {_pick(kind, what, obj)}" for what in _SHOWN[kind])


def describe_change(kind: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What a write changed, in words, e.g. ``image nginx:1.25 -> nginx:1.26``."""
    changes = [
        f"{what} {old} -> {new}"
        for what, old, new in ((what, _pick(kind, what, before), _pick(kind, what, after)) for what in _SHOWN[kind])
        if old != new
    ]
    return ", ".join(changes) or "labels, owner reference or other fields restored"


def _pick(kind: str, what: str, obj: Mapping[str, Any]) -> Any:
    spec = obj.get("spec") or {}
    if kind == "Service":
        return (spec.get("ports") or [{}])[0].get("port")  # the only thing shown
    if what == "replicas":
        return spec.get("replicas")
    containers = (((spec.get("template") or {}).get("spec") or {}).get("containers")) or [{}]
    if what == "image":
        return containers[0].get("image")
    ports = containers[0].get("ports") or [{}]
    return ports[0].get("containerPort")


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


def reconcile_website(
    name: str,
    namespace: str,
    spec: Mapping[str, Any],
    *,
    uid: str,
    apps: kubernetes.client.AppsV1Api | None = None,
    core: kubernetes.client.CoreV1Api | None = None,
    report: Reporter | None = None,
) -> dict[str, Any]:
    """Make the cluster match one Website (whose ``metadata.uid`` is ``uid``); return its status fields.

    Reads both children first: if either exists and is not the Website's
    (see "Ownership"), it writes nothing and raises NameTaken. Otherwise it
    adopts what is marked for adoption and server-side applies the
    Deployment and the Service; an unchanged child is not written.
    ``report(reason, message)``, if given, hears of every child created,
    adopted or changed.

    Returns ``{"deployment": name, "service": name, "phase": "Applied"}``.
    Raises kopf.PermanentError when retrying cannot help and
    kopf.TemporaryError (with a delay) when it can; see the module docstring.
    """
    try:
        site = website_spec(name, spec)
    except ValueError as e:
        raise kopf.PermanentError(str(e)) from e
    apps = AppsV1Api() if apps is None else apps
    core = CoreV1Api() if core is None else core
    report = _ignore if report is None else report
    owner = owner_body(name, uid)
    children = [
        _Child(
            "Deployment",
            deployment_manifest(name, namespace, site, owner),
            read=lambda: apps.read_namespaced_deployment(name=name, namespace=namespace),
            create=lambda body: apps.create_namespaced_deployment(
                namespace=namespace, body=kubernetes.client.V1Deployment.model_validate(body), field_manager=OPERATOR
            ),
            apply=lambda body: apps.patch_namespaced_deployment(
                name=name, namespace=namespace, body=body, field_manager=OPERATOR, force=True, _content_type=APPLY_PATCH
            ),
            patch=lambda body: apps.patch_namespaced_deployment(name=name, namespace=namespace, body=body),
        ),
        _Child(
            "Service",
            service_manifest(name, namespace, site, owner),
            read=lambda: core.read_namespaced_service(name=name, namespace=namespace),
            create=lambda body: core.create_namespaced_service(
                namespace=namespace, body=kubernetes.client.V1Service.model_validate(body), field_manager=OPERATOR
            ),
            apply=lambda body: core.patch_namespaced_service(
                name=name, namespace=namespace, body=body, field_manager=OPERATOR, force=True, _content_type=APPLY_PATCH
            ),
            patch=lambda body: core.patch_namespaced_service(name=name, namespace=namespace, body=body),
        ),
    ]

    try:
        observed = [_read(child.read) for child in children]
        # Both checked before either is written: a Website never gets half of
        # its children from a name taken before this reconcile began.
        for child, before in zip(children, observed, strict=True):
            if before is not None and ownership(before["metadata"], owner) == TAKEN:
                raise name_taken(child.kind, before["metadata"], owner)
        for child, before in zip(children, observed, strict=True):
            _ensure(child, before, owner, report)
    except ApiException as e:
        routed = _route_api_error(e)
        if routed is None:
            raise
        raise routed from e
    return {"deployment": name, "service": name, "phase": "Applied"}


# Server-side apply: this content type makes a PATCH an apply; force=True takes
# over fields another manager set (our spec wins over a manual edit).
APPLY_PATCH = "application/apply-patch+yaml"


class _Child:
    """One child of a Website: its desired manifest and the calls that read and write it."""

    def __init__(
        self,
        kind: str,
        desired: dict[str, Any],
        *,
        read: Callable[[], Any],
        create: Callable[[dict[str, Any]], Any],
        apply: Callable[[dict[str, Any]], Any],
        patch: Callable[[dict[str, Any]], Any],
    ) -> None:
        self.kind, self.desired = kind, desired
        self.read, self.create, self.apply, self.patch = read, create, apply, patch

    @property
    def where(self) -> str:
        """``namespace/name``, for messages."""
        return f"{self.desired['metadata']['namespace']}/{self.desired['metadata']['name']}"


def _read(read: Callable[[], Any]) -> dict[str, Any] | None:
    """The object as a dict, or None if it does not exist."""
    try:
        return _as_dict(read())
    except ApiException as e:
        if e.status != 404:
            raise
        return None


def _ensure(child: _Child, before: dict[str, Any] | None, owner: kopf.Body, report: Reporter) -> None:
    """Create, adopt and apply one child, writing nothing to an object that is not ours.

    ``before`` is the child as read (None: it did not exist). An absent child
    is created with a plain create (POST), which the API refuses (409
    AlreadyExists) if someone made an object of that name since our read;
    that object is then read and checked like any other: NameTaken, unless
    it is ours or marked for adoption. Server-side apply, which creates or
    takes over whatever it finds, only ever writes a child verified ours.
    """
    where = child.where
    if before is None:
        try:
            before = _as_dict(child.create(child.desired))
        except ApiException as e:
            if e.status != 409:
                raise
            before = _read(child.read)
            if before is None:  # made and deleted again since: look afresh
                raise kopf.TemporaryError(
                    f"{child.kind} {where} appeared and vanished while we created it; retrying",
                    delay=CONFLICT_RETRY_DELAY,
                ) from e
        else:
            report(f"{child.kind}Created", f"created {child.kind} {where}: {describe(child.kind, before)}")
    claim = ownership(before["metadata"], owner)
    if claim == TAKEN:
        raise name_taken(child.kind, before["metadata"], owner)
    if claim == ADOPTABLE:
        before = _as_dict(child.patch(adoption_patch(before["metadata"], owner)))
        report(f"{child.kind}Adopted", f"adopted {child.kind} {where} ({ADOPT_ANNOTATION}={owner.metadata.name})")
    after = _as_dict(child.apply(child.desired))
    if _essence(before) != _essence(after):
        report(f"{child.kind}Updated", f"updated {child.kind} {where}: {describe_change(child.kind, before, after)}")
    _hand_over(child, after)


# How often the create's field-ownership entry is re-read and removed when
# another writer changed the child meanwhile (the Deployment controller stamps
# its revision annotation right after a create).
HANDOVER_ATTEMPTS = 5


def _hand_over(child: _Child, current: dict[str, Any]) -> None:
    """Remove the create's field-ownership entry from the child (see create_entry_removal).

    The removal is conditional on the resourceVersion it was computed from,
    so a child changed in between answers 409: read it again and recompute,
    keeping every entry the other writer has just made.
    """
    for _ in range(HANDOVER_ATTEMPTS):
        handover = create_entry_removal(current["metadata"])
        if handover is None:
            return
        try:
            child.patch(handover)
            return
        except ApiException as e:
            if e.status != 409:
                raise
        latest = _read(child.read)
        if latest is None:  # deleted meanwhile: the next reconcile creates it anew
            return
        current = latest
    raise kopf.TemporaryError(
        f"{child.kind} {child.where} kept changing while we handed its fields over to our apply; retrying",
        delay=CONFLICT_RETRY_DELAY,
    )


def create_entry_removal(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """A patch removing the field-ownership entry our create left, once our apply owns the fields; or None.

    A create records its fields under (``website-operator``, ``Update``),
    an apply under (``website-operator``, ``Apply``): two managers to the
    API server. A field still owned by the create's entry is not removed
    when an apply stops sending it (the old port after a port change would
    stay), so once the apply has taken our fields, the create's entry goes,
    as if the child had been created by the apply. The resourceVersion makes
    the patch conditional (409 if the child changed since). None when there
    is no such entry, or nothing else to keep (an empty list would not clear
    the entries: the API reads it as "unchanged").
    """
    entries = meta.get("managedFields") or []
    kept = [e for e in entries if (e.get("manager"), e.get("operation")) != (OPERATOR, "Update")]
    if len(kept) == len(entries) or not kept:
        return None
    return {"metadata": {"resourceVersion": meta.get("resourceVersion"), "managedFields": kept}}


def _essence(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """What our apply can change: labels, owner references, spec. Not status:
    the Deployment controller rewrites that all the time."""
    meta = obj.get("metadata") or {}
    return (meta.get("labels"), meta.get("ownerReferences"), obj.get("spec"))


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


def write_rollout_status(
    namespace: str,
    website: str,
    status: Mapping[str, Any],
    *,
    custom: kubernetes.client.CustomObjectsApi | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Merge ``status`` into a Website's status; False if the Website is gone.

    Retries 429 and 5xx a few times (honouring Retry-After, capped): the
    Deployment watcher that calls it gets no second event to retry with.
    An unchanged status is a no-op on the server (no new resourceVersion).
    """
    custom = CustomObjectsApi() if custom is None else custom
    for attempt in range(1, STATUS_WRITE_ATTEMPTS + 1):
        try:
            custom.patch_namespaced_custom_object_status(
                group=GROUP, version=VERSION, namespace=namespace, plural=PLURAL, name=website,
                body={"status": dict(status)},
            )
            return True
        except ApiException as e:
            if e.status == 404:
                return False  # deleted; the garbage collector takes the Deployment next
            if attempt == STATUS_WRITE_ATTEMPTS or not (e.status == 429 or (e.status or 0) >= 500):
                raise
            sleep(min(STATUS_RETRY_MAX_DELAY, retry_delay(e, default=1.0)))
    return False  # not reached


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
    namespace: str | None,
    spec: kopf.Spec,
    meta: kopf.Meta,
    body: kopf.Body,
    patch: kopf.Patch,
    **_: Any,
) -> None:
    """Reconcile on create, on every spec change, and for every Website at startup.

    on.resume makes a restarted operator re-apply what may have changed while
    it was down (a child deleted, a spec edited).

    Status is written once, by patch, and nothing is returned: kopf would
    store a returned dict a second time in ``status.reconcile``, a copy that
    nothing reads and that goes stale when a failure is patched over it.
    """

    if namespace is None:  # kopf's signature allows it for cluster-scoped resources
        raise kopf.PermanentError(
            f"{KIND} {name} has no namespace: its CRD must say scope: Namespaced; "
            f"kubectl apply --server-side -f crds/website.yaml"
        )

    def post_event(reason: str, message: str) -> None:
        kopf.info(body, reason=reason, message=message)

    try:
        status = reconcile_website(name, namespace, spec, uid=meta["uid"], report=post_event)
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
        body, patch, status, ready=True, reason="Applied",
        message=f"Deployment and Service {namespace}/{name} applied; rollout in status.rollout",
    )


@kopf.index(GROUP, VERSION, PLURAL)
def websites(namespace: str | None, name: str, uid: str, spec: kopf.Spec, **_: Any) -> dict[Any, Any]:
    """Every Website's uid and spec, kept in memory from the watch kopf already runs.

    The Deployment watcher below looks a Website up here on each event of its
    Deployment, instead of a GET per event. kopf starts no other handler until
    the index holds every existing Website (kopf 1.45, ``kopf.index``).
    """
    return {(namespace, name): {"uid": uid, "spec": dict(spec)}}


@kopf.on.probe(id="websites-indexed")
def websites_indexed(websites: kopf.Index[Any, dict[str, Any]] | None = None, **_: Any) -> int:
    """How many Websites the index holds: a fact the liveness endpoint reports beside "alive".

    kopf runs every probe handler when ``--liveness`` is asked, at most once per 10 s, and answers
    with the cached results in between (kopf 1.45, ``_core/engines/probing.py``). This one only
    reports: a probe that raises is retried like any handler while the request waits, so the
    kubelet's probe times out and restarts the container, which is for what a restart cures.
    """
    return len(websites or {})


@kopf.on.event("apps", "v1", "deployments", labels={MANAGED_BY_LABEL: OPERATOR})
def deployment_status(
    type: str | None,
    body: kopf.Body,
    namespace: str | None,
    logger: kopf.Logger,
    websites: kopf.Index[Any, dict[str, Any]] | None = None,
    **_: Any,
) -> None:
    """Copy an owned Deployment's replica counts into its Website's status, and undo drift.

    Runs on every watch event of a Deployment this operator manages: when it
    is created, and each time the Deployment controller updates its status
    (Pods becoming ready, a rollout progressing), or someone changes or deletes
    it. A Deployment deleted, scaled or re-imaged by hand is put back at once
    (watching the children is what makes that level-triggered while the
    operator runs; ``on.resume`` alone would wait for its next restart).
    Fire-and-forget: on.event handlers keep no state on the object and are
    never retried by kopf, so a failed repair is logged and the next event of
    the Deployment tries again.
    """
    website = owning_website(body)
    if website is None or namespace is None:  # Deployments are namespaced: never None
        return
    known = next(iter(websites.get((namespace, website), []) if websites is not None else []), None)
    if type == "DELETED":
        _healed.pop(body.metadata.uid or "", None)
        if known is None:
            return  # its Website is gone (or going): nothing to report to, nothing to restore
        _heal(namespace, website, known, "its Deployment was deleted", logger)
        return
    try:
        write_rollout_status(namespace, website, rollout_status(body))
    except ApiException as e:
        logger.warning(
            f"could not write the rollout status of Website {namespace}/{website} "
            f"({e.status}): {_server_message(e)}; it is written again on the next change"
        )
    if known is not None:
        try:
            drift = deployment_drift(body, website_spec(website, known["spec"]))
        except ValueError:
            return  # an unusable spec: the reconcile handler reports it
        # One repair per generation: status updates of the drifted spec arrive before ours lands.
        generation = body.metadata.get("generation") or 0
        if drift and _healed.get(body.metadata.uid or "", -1) < generation:
            _healed[body.metadata.uid or ""] = generation
            _heal(namespace, website, known, f"its Deployment was changed: {drift}", logger)


#: The generation of each owned Deployment (by uid) whose drift was last repaired: the
#: Deployment controller's status updates of that same generation follow, and need none.
_healed: dict[str, int] = {}


def _heal(namespace: str, website: str, known: Mapping[str, Any], why: str, logger: kopf.Logger) -> None:
    """Re-apply a Website's children (the same reconcile as its handlers), with an Event saying why."""
    owner = kopf.Body({"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
                       "metadata": {"name": website, "namespace": namespace, "uid": known["uid"]}})

    def post_event(reason: str, message: str) -> None:
        kopf.info(owner, reason=reason, message=message)

    kopf.info(owner, reason="DriftDetected", message=f"{why}; applying the Website again")
    try:
        reconcile_website(website, namespace, known["spec"], uid=known["uid"], report=post_event)
    except (kopf.PermanentError, kopf.TemporaryError) as e:
        logger.warning(f"could not restore the children of Website {namespace}/{website}: {e}")
