"""Probes of the cluster's own controllers: fresh work only a running kube-controller-manager does.

A lab about a stopped control-plane loop cannot be graded by the objects it broke: a
Deployment's status can be patched by hand, Pods made by hand, a Terminating namespace
finalized by hand through ``/finalize``. So these probes make new work and time it:

:func:`deployment_rolls_out`   a fresh Deployment in a fresh namespace becomes ready and then
                               follows a scale to a fresh replica count (deployment and
                               replicaset controllers; the scheduler and kwok place the Pods);
:func:`namespace_deletes`      a fresh namespace holding a ConfigMap is deleted to the end (the
                               namespace controller empties it and removes its finalizer).

Each cleans up in ``finally`` (a namespace left Terminating goes when the controller-manager
is back; the lab tracks it for reset).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from kubernetes import client

from operatorlab.grading import Check, converges
from operatorlab.labs import checks

if TYPE_CHECKING:
    from operatorlab.labs.base import Lab

#: Seconds for each step (a Deployment's Pods ready, a namespace gone): seconds on an idle local cluster, more on a
#: loaded one (two cores shared by a test run).
BUDGET = 30.0


def deployment_manifest(name: str, replicas: int) -> dict[str, Any]:
    """A Deployment whose Pods kwok plays (no image is pulled)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": name, "image": "nginx:1.25"}]}}}}


def deployment_state(apps: client.AppsV1Api, name: str, namespace: str) -> str | None:
    """None if the Deployment is rolled out (ready = desired, about its generation), else what it says."""
    d: Any = apps.read_namespaced_deployment(name, namespace)  # its status and metadata are set once stored
    ready, want = d.status.ready_replicas or 0, d.spec.replicas
    if ready == want and d.status.observed_generation == d.metadata.generation:
        return None
    return (f"{ready}/{want} ready; metadata.generation={d.metadata.generation}, "
            f"status.observedGeneration={d.status.observed_generation}")


def fresh_namespace(lab: Lab, prefix: str) -> str:
    """Create (and track) a namespace of a name no one used."""
    name = f"{prefix}-{secrets.token_hex(3)}"
    lab.track("v1", "Namespace", name)
    core: Any = lab.core  # takes the API's JSON shape as a dict
    core.create_namespace({"metadata": {"name": name}})
    return name


def deployment_rolls_out(lab: Lab, prefix: str, *, budget: float = BUDGET) -> Check:
    """A fresh Deployment becomes ready, then follows a scale to a fresh count, each within ``budget``."""
    label = "a new Deployment rolls out and follows a scale"
    apps: Any = client.AppsV1Api(lab.api)
    namespace = fresh_namespace(lab, prefix)
    name, scaled = "probe", 2 + secrets.randbelow(2)
    try:
        apps.create_namespaced_deployment(namespace, deployment_manifest(name, 1))
        for replicas in (1, scaled):
            if replicas != 1:
                apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": replicas}})
            done = converges(lambda: deployment_state(apps, name, namespace) is None, budget=budget, interval=0.3)
            if not done.ok:
                return Check(label, False, f"Deployment {namespace}/{name}, created by the check with "
                                           f"replicas {replicas} {budget:g} s ago: "
                                           f"{deployment_state(apps, name, namespace)}; its ReplicaSets: "
                                           f"{_replicasets(apps, namespace)} (kubectl describe deployment "
                                           f"{name} -n {namespace})")
    finally:
        checks.get_or_none(lambda: lab.core.delete_namespace(namespace))
    return Check(label, True, f"Deployment {namespace}/{name}: 1 replica, then {scaled}, each within {budget:g} s")


def namespace_deletes(lab: Lab, prefix: str, *, budget: float = BUDGET) -> Check:
    """A fresh namespace holding a ConfigMap is gone within ``budget`` of its delete."""
    label = "a namespace with content is deleted to the end"
    namespace = fresh_namespace(lab, prefix)
    core: Any = lab.core
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "content"}, "data": {"k": "v"}})
    lab.core.delete_namespace(namespace)
    gone = converges(lambda: checks.get_or_none(lambda: lab.core.read_namespace(namespace)) is None,
                     budget=budget, interval=0.3)
    if gone.ok:
        return Check(label, True, f"namespace {namespace} gone {gone.seconds:.1f} s after its delete")
    ns = checks.get_or_none(lambda: lab.core.read_namespace(namespace))
    said = "gone" if ns is None else (f"status.phase={ns.status.phase}, spec.finalizers={ns.spec.finalizers}, "
                                      f"conditions: {[c.type for c in ns.status.conditions or []]}")
    return Check(label, False, f"namespace {namespace}, deleted by the check {budget:g} s ago, is still there: "
                               f"{said} (kubectl get ns {namespace} -o yaml)")


def _replicasets(apps: client.AppsV1Api, namespace: str) -> str:
    items: list[Any] = apps.list_namespaced_replica_set(namespace).items
    return ", ".join(f"{r.metadata.name} ({r.status.ready_replicas or 0}/{r.spec.replicas} ready)"
                     for r in items) or "none"
