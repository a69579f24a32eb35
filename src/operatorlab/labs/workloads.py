"""Workloads for the cluster-troubleshooting drills, and the fresh work their checks make happen.

A drill about the cluster itself (a stopped scheduler, a node gone dark, Pods no node takes, a
Service with no endpoints, a stuck rollout, a quota refusing Pods) must not be passed by making the cluster
*look* repaired: Pods bound to a node by hand, an EndpointSlice written by hand, a rollout
paused or scaled to nothing. So its check makes fresh work happen and times it:

:func:`pod_placed`         a fresh Pod (fresh name, a label no controller selects) gets a node
                           from the scheduler within a budget (and, if asked, runs there);
:func:`nodes_ready`        every Node is Ready, or gets there within a budget;
:func:`pod_joins_service`  a fresh Pod of an app shows up, ready, in its Service's EndpointSlices
                           (made by the EndpointSlice controller, not by hand);
:func:`rollout_completes`  a fresh rollout of a Deployment (a new template annotation) finishes;
:func:`scale_completes`    a Deployment scaled to a fresh replica count gets them all ready;
:func:`deployment_ready`   all of a Deployment's replicas updated and ready (the state a workload
                           must end in), with the evidence of why not.

A failing message names evidence as ``kubectl describe`` would show it (a Pod's PodScheduled
condition, a ReplicaSet's FailedCreate event, the Deployment's Progressing condition), never
the repair.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from kubernetes import client

from operatorlab.grading import Check, converges
from operatorlab.labs import checks

if TYPE_CHECKING:
    from operatorlab.labs.base import Lab

#: A container image that runs anywhere and does nothing (kwok runs no container; a real kubelet pulls a tiny image).
IMAGE = "registry.k8s.io/pause:3.10"
#: Put on the probes' Pods and templates: no workload's selector names it.
PROBE_LABEL = "hedronite.io/drill-probe"
#: Seconds a fresh Pod or rollout gets on an idle cluster (kwok makes a Pod Ready in about one).
BUDGET = 15.0


def deployment(name: str, *, replicas: int, node_selector: dict[str, str] | None = None,
               resources: dict[str, Any] | None = None, progress_deadline: int = 600) -> dict[str, Any]:
    """A Deployment ``name`` whose Pods are labelled ``app: <name>`` (one pause container)."""
    container: dict[str, Any] = {"name": name, "image": IMAGE}
    if resources is not None:
        container["resources"] = resources
    spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 0}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": replicas, "progressDeadlineSeconds": progress_deadline,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def create_namespace(lab: Lab, name: str) -> None:
    """Create (and track, so reset deletes it and all in it) namespace ``name``."""
    lab.track("v1", "Namespace", name)
    body: Any = {"metadata": {"name": name}}
    lab.core.create_namespace(body)


def apps(lab: Lab) -> client.AppsV1Api:
    return client.AppsV1Api(lab.api)


def template_spec(lab: Lab, namespace: str, name: str) -> dict[str, Any]:
    """Deployment ``name``'s Pod template spec as it is now (a dict, as the API serves it)."""
    d: Any = apps(lab).read_namespaced_deployment(name, namespace)
    spec: dict[str, Any] = lab.api.sanitize_for_serialization(d.spec.template.spec)
    return spec


# -- probes: fresh work, timed --------------------------------------------------------------------


def pod_placed(lab: Lab, namespace: str, spec: dict[str, Any], *, label: str, budget: float = BUDGET,
               ready: bool = False) -> Check:
    """A fresh Pod of ``spec`` (any ``nodeName`` dropped) is bound to a node within ``budget`` s
    (and, with ``ready``, reported Ready by that node's kubelet, here kwok).

    The Pod carries only the probe label, so no ReplicaSet adopts it; it is deleted afterwards.
    """
    name = _fresh("probe")
    spec = {k: v for k, v in spec.items() if k != "nodeName"}
    _create_pod(lab, namespace, name, {PROBE_LABEL: name}, spec)
    try:
        outcome = converges(lambda: _placed(_pod(lab, namespace, name), ready), budget=budget, interval=0.2)
        if outcome.ok:
            return Check(label, True, f"Pod {namespace}/{name} {'running' if ready else 'placed'} on node "
                                      f"{outcome.last} in {outcome.seconds:.1f} s (budget {budget:g} s)")
        pod = _pod(lab, namespace, name)
        if not pod.spec.node_name:
            return Check(label, False, f"Pod {namespace}/{name}, created {budget:g} s ago, has no node: "
                                       f"{scheduling_evidence(pod)}")
        return Check(label, False, f"Pod {namespace}/{name}, placed on node {pod.spec.node_name}, is not Ready "
                                   f"{budget:g} s after its creation: status.phase={pod.status.phase}, conditions "
                                   f"{[(c.type, c.status) for c in pod.status.conditions or []]}")
    finally:
        _delete_pod(lab, namespace, name)


def _placed(pod: Any, ready: bool) -> str | None:
    """The Pod's node once it has one (and, with ``ready``, once it is Ready), else None."""
    if not pod.spec.node_name:
        return None
    if ready and not any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []):
        return None
    return str(pod.spec.node_name)


def pod_joins_service(lab: Lab, namespace: str, service: str, labels: dict[str, str], spec: dict[str, Any], *,
                      label: str, budget: float = BUDGET) -> Check:
    """A fresh Pod with ``labels`` becomes a ready endpoint of ``service`` within ``budget`` s.

    Only EndpointSlices the EndpointSlice controller manages count: a slice written by hand
    does not follow Pods as they come and go, which is what this probe asks of the Service.
    """
    name = _fresh(labels.get("app", "probe"))
    _create_pod(lab, namespace, name, {**labels, PROBE_LABEL: name},
                {k: v for k, v in spec.items() if k != "nodeName"})
    try:
        outcome = converges(lambda: _ready_endpoint(lab, namespace, service, name), budget=budget, interval=0.3)
        if outcome.ok:
            return Check(label, True, f"Pod {namespace}/{name} became a ready endpoint of Service {service} "
                                      f"in {outcome.seconds:.1f} s (budget {budget:g} s)")
        pod = _pod(lab, namespace, name)
        return Check(label, False, f"Pod {namespace}/{name} (labels {labels}, phase {pod.status.phase}, IP "
                                   f"{pod.status.pod_ip}) is not a ready endpoint of Service {service} "
                                   f"{budget:g} s after its creation. {service_evidence(lab, namespace, service)}")
    finally:
        _delete_pod(lab, namespace, name)


def rollout_completes(lab: Lab, namespace: str, name: str, *, replicas: int, label: str,
                      budget: float = BUDGET) -> Check:
    """A fresh rollout of Deployment ``name`` (a new template annotation, as ``kubectl rollout
    restart`` does) ends with ``replicas`` Pods updated and ready within ``budget`` s."""
    token = restart(lab, namespace, name)
    return _ready_within(lab, namespace, name, replicas, label, budget, f"a rollout started ({PROBE_LABEL}={token})")


def restart(lab: Lab, namespace: str, name: str) -> str:
    """Start a rollout of Deployment ``name`` as ``kubectl rollout restart`` does (a fresh template
    annotation, so a new ReplicaSet); return the annotation's value."""
    token = secrets.token_hex(3)
    apps(lab).patch_namespaced_deployment(name, namespace, {"spec": {"template": {"metadata": {
        "annotations": {PROBE_LABEL: token}}}}})
    return token


def scale_completes(lab: Lab, namespace: str, name: str, *, replicas: int, label: str,
                    budget: float = BUDGET) -> Check:
    """Deployment ``name`` scaled to ``replicas`` has them all ready within ``budget`` s."""
    apps(lab).patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": replicas}})
    return _ready_within(lab, namespace, name, replicas, label, budget, f"scaled to {replicas}")


def deployment_ready(lab: Lab, namespace: str, name: str, replicas: int, *, label: str | None = None,
                     budget: float = 0.0) -> Check:
    """Deployment ``name`` wants ``replicas`` and has them all updated, ready and available, no old Pod
    left, or gets there within ``budget`` s (what was already under way when a repair was made)."""
    label = label or f"Deployment {namespace}/{name} runs {replicas} up-to-date ready replicas"
    if checks.get_or_none(lambda: apps(lab).read_namespaced_deployment(name, namespace)) is None:
        return Check(label, False, f"Deployment {namespace}/{name} does not exist")
    outcome = converges(lambda: _complete(apps(lab).read_namespaced_deployment(name, namespace), replicas),
                        budget=budget, interval=0.3)
    if outcome.ok:
        return Check(label, True, f"{replicas}/{replicas} ready")
    return Check(label, False, rollout_evidence(lab, apps(lab).read_namespaced_deployment(name, namespace)))


#: The taints kube-controller-manager's node lifecycle controller puts on a Node it has seen NotReady.
NODE_LIFECYCLE_TAINTS = frozenset({"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"})


def nodes_ready(lab: Lab, *, label: str, budget: float = 0.0) -> Check:
    """Every Node's Ready condition is True *and the node lifecycle controller has seen it*, within ``budget`` s.

    The kubelet sets the condition; kube-controller-manager acts on its own copy, refreshed every
    ``--node-monitor-period`` (5 s). Until that copy says Ready, the controller marks every Pod
    bound to the node NotReady (``processPod``, pkg/controller/nodelifecycle, Kubernetes 1.36.3), so a Pod started
    in those seconds stays NotReady. The controller lifts its ``unreachable`` / ``not-ready``
    taints in the same pass that refreshes its copy: their absence is the sign it has caught up.
    """
    outcome = converges(lambda: not _not_ready(lab), budget=budget, interval=0.3)
    if outcome.ok:
        return Check(label, True, "every Node Ready")
    return Check(label, False, "; ".join(_not_ready(lab)) + " (kubectl describe node)")


def _not_ready(lab: Lab) -> list[str]:
    """Each Node that is not Ready, in words: its Ready condition and its taints."""
    said = []
    nodes: list[Any] = lab.core.list_node().items
    for node in nodes:
        ready = next((c for c in node.status.conditions or [] if c.type == "Ready"), None)
        taints = [f"{t.key}:{t.effect}" for t in node.spec.taints or []]
        if ready is None or ready.status != "True":
            condition = "no Ready condition" if ready is None else (
                f"Ready={ready.status} ({ready.reason}: {ready.message}), last heartbeat {ready.last_heartbeat_time}")
            said.append(f"Node {node.metadata.name}: {condition}; taints {taints}")
        elif any(t.key in NODE_LIFECYCLE_TAINTS for t in node.spec.taints or []):
            said.append(f"Node {node.metadata.name}: Ready, but kube-controller-manager has not seen it yet "
                        f"(its node lifecycle taints are still on: {taints})")
    return said


def _ready_within(lab: Lab, namespace: str, name: str, replicas: int, label: str, budget: float,
                  what: str) -> Check:
    outcome = converges(lambda: _complete(apps(lab).read_namespaced_deployment(name, namespace), replicas),
                        budget=budget, interval=0.3)
    if outcome.ok:
        return Check(label, True, f"Deployment {namespace}/{name} {what}: {replicas} ready "
                                  f"in {outcome.seconds:.1f} s (budget {budget:g} s)")
    d = apps(lab).read_namespaced_deployment(name, namespace)
    return Check(label, False, f"Deployment {namespace}/{name} {what} {budget:g} s ago: {rollout_evidence(lab, d)}")


def _complete(d: Any, replicas: int) -> bool:
    """As ``kubectl rollout status`` decides, and at the replica count the drill wants."""
    s = d.status
    return (d.spec.replicas == replicas and not d.spec.paused and (s.observed_generation or 0) >= d.metadata.generation
            and (s.updated_replicas or 0) == replicas and (s.ready_replicas or 0) == replicas
            and (s.available_replicas or 0) == replicas and (s.replicas or 0) == replicas)


# -- evidence, as kubectl describe shows it -------------------------------------------------------


def scheduling_evidence(pod: Any) -> str:
    """Why a Pod has no node, in the scheduler's words, or that no scheduler has looked at it."""
    scheduled = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)
    if scheduled is None:
        return (f"status.conditions holds no PodScheduled condition: no scheduler has tried it "
                f"(kubectl get pod {pod.metadata.name} -n {pod.metadata.namespace} -o yaml)")
    return f"condition PodScheduled={scheduled.status}, reason {scheduled.reason}: {scheduled.message}"


def rollout_evidence(lab: Lab, d: Any) -> str:
    """A Deployment's counts, its Progressing condition, and what its newest ReplicaSet or Pod says."""
    s, meta = d.status, d.metadata
    parts = [f"spec.replicas={d.spec.replicas}, updated={s.updated_replicas or 0}, ready={s.ready_replicas or 0}, "
             f"available={s.available_replicas or 0}, total={s.replicas or 0}; metadata.generation={meta.generation}, "
             f"status.observedGeneration={s.observed_generation}"]
    if d.spec.paused:
        parts.append("spec.paused=true")
    progressing = next((c for c in s.conditions or [] if c.type == "Progressing"), None)
    if progressing is not None:
        parts.append(f"condition Progressing={progressing.status} ({progressing.reason}): {progressing.message}")
    rs = newest_replica_set(lab, d)
    if rs is not None:
        if (warning := last_warning(lab, meta.namespace, "ReplicaSet", rs.metadata.name)) is not None:
            parts.append(f"ReplicaSet {rs.metadata.name} event: {warning}")
        pods: list[Any] = lab.core.list_namespaced_pod(meta.namespace).items
        pending = [p for p in pods if _owned_by(p, rs) and not p.spec.node_name]
        if pending:
            parts.append(f"Pod {pending[0].metadata.name} is Pending: {scheduling_evidence(pending[0])}")
    return "; ".join(parts)


def newest_replica_set(lab: Lab, d: Any) -> Any:
    """The Deployment's ReplicaSet of the highest revision (the one a rollout brings up)."""
    replica_sets: list[Any] = apps(lab).list_namespaced_replica_set(d.metadata.namespace).items
    return max((rs for rs in replica_sets if _owned_by(rs, d)), key=_revision, default=None)


def _owned_by(obj: Any, owner: Any) -> bool:
    return any(r.uid == owner.metadata.uid for r in obj.metadata.owner_references or [])


def last_warning(lab: Lab, namespace: str, kind: str, name: str) -> str | None:
    """The newest Warning event about ``kind``/``name``: ``reason: message``."""
    events: list[Any] = lab.core.list_namespaced_event(namespace, field_selector=f"involvedObject.kind={kind},"
                                                                     f"involvedObject.name={name},type=Warning").items
    if not events:
        return None
    e = max(events, key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    return f"{e.reason}: {e.message}"


def service_evidence(lab: Lab, namespace: str, service: str) -> str:
    """The Service's selector and what each of its EndpointSlices lists, and who manages it."""
    svc = checks.get_or_none(lambda: lab.core.read_namespaced_service(service, namespace))
    if svc is None:
        return f"Service {namespace}/{service} does not exist"
    slices = _slices(lab, namespace, service)
    listed = "; ".join(f"{s.metadata.name} (managed-by {(s.metadata.labels or {}).get(_MANAGED_BY)}): "
                       f"{[_target(e) for e in s.endpoints or []]}" for s in slices) or "none"
    return (f"Service {service}: spec.selector={svc.spec.selector}; its EndpointSlices "
            f"(kubectl get endpointslices -n {namespace} -l kubernetes.io/service-name={service}): {listed}")


_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
_CONTROLLER = "endpointslice-controller.k8s.io"


def _slices(lab: Lab, namespace: str, service: str) -> list[Any]:
    return client.DiscoveryV1Api(lab.api).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}").items


def _ready_endpoint(lab: Lab, namespace: str, service: str, pod: str) -> bool:
    """Pod ``pod`` is a ready endpoint in a slice of ``service`` that the EndpointSlice controller manages."""
    for s in _slices(lab, namespace, service):
        if (s.metadata.labels or {}).get(_MANAGED_BY) != _CONTROLLER:
            continue
        for e in s.endpoints or []:
            if e.target_ref is not None and e.target_ref.name == pod and e.conditions and e.conditions.ready:
                return True
    return False


def _target(endpoint: Any) -> str:
    ref = endpoint.target_ref
    return f"{ref.name if ref else '(no Pod)'} {','.join(endpoint.addresses)}"


def _revision(rs: Any) -> int:
    return int((rs.metadata.annotations or {}).get("deployment.kubernetes.io/revision", "0"))


# -- probe Pods -------------------------------------------------------------------------------------


def _fresh(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def _create_pod(lab: Lab, namespace: str, name: str, labels: dict[str, str], spec: dict[str, Any]) -> None:
    body: Any = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}
    lab.core.create_namespaced_pod(namespace, body)


def _pod(lab: Lab, namespace: str, name: str) -> Any:
    return lab.core.read_namespaced_pod(name, namespace)


def _delete_pod(lab: Lab, namespace: str, name: str) -> None:
    """Delete a probe Pod at once (no grace: kwok, or a kubelet, need not confirm it stopped)."""
    checks.get_or_none(lambda: lab.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0))
