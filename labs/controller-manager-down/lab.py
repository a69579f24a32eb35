"""controller-manager-down: kube-controller-manager stops; Deployments freeze, namespaces stick Terminating.

The check makes fresh work that only a running controller-manager does (a new Deployment
rolled out and scaled, a namespace with content deleted) and times it: a status patched
by hand, Pods or ReplicaSets made by hand, a namespace finalized by hand pass nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from kubernetes import client

from operatorlab.faults.components import component_running, start_component, stop_component
from operatorlab.labs import Check, Lab, checks
from operatorlab.labs.controller_probes import (
    deployment_manifest,
    deployment_rolls_out,
    deployment_state,
    namespace_deletes,
)
from operatorlab.wait import eventually

APP, DOOMED = "lab-kcm-app", "lab-kcm-doomed"
COMPONENT = "kube-controller-manager"


class ControllerManagerDown(Lab):
    title = "The loops stopped turning"
    summary = "a scaled Deployment never progresses and a deleted namespace sticks Terminating"
    drill = True
    requires = frozenset({"local"})
    settle = 0.0  # each check run makes fresh work and waits for it
    hints = (
        "Both objects were accepted by the API server, yet nothing acts on them. Compare the Deployment's "
        "metadata.generation with its status.observedGeneration.",
        "The API server only stores objects; controllers make them true. Which process runs the deployment, "
        "replicaset and namespace controllers? `operatorlab cluster status` shows every component.",
        "kube-controller-manager is stopped: start it (`operatorlab cluster up` starts whatever is not running). "
        "Patching a status or finalizing the namespace by hand passes nothing: the check makes new work. "
        "labs/controller-manager-down/SOLUTION.md (`operatorlab lab solve controller-manager-down`) explains it.",
    )

    def setup(self) -> None:
        self.track("v1", "Namespace", APP)
        self.track("v1", "Namespace", DOOMED)
        for name in (APP, DOOMED):
            self.core.create_namespace({"metadata": {"name": name}})
        apps = client.AppsV1Api(self.api)
        apps.create_namespaced_deployment(APP, deployment_manifest("web", 1))
        eventually(lambda: (apps.read_namespaced_deployment("web", APP).status.ready_replicas or 0) == 1,
                   timeout=120, message="Deployment web ready")

    def inject(self) -> None:
        stop_component(self.ctx.cluster, COMPONENT)
        client.AppsV1Api(self.api).patch_namespaced_deployment_scale("web", APP, {"spec": {"replicas": 2}})
        self.core.delete_namespace(DOOMED)

    def check(self) -> Iterator[Check]:
        """Fresh work first (a new Deployment, a namespace with content deleted), then the lab's own objects."""
        yield deployment_rolls_out(self, "lab-kcm-probe")
        yield namespace_deletes(self, "lab-kcm-probe")
        apps = client.AppsV1Api(self.api)
        if checks.get_or_none(lambda: apps.read_namespaced_deployment("web", APP)) is None:
            yield Check(f"Deployment {APP}/web has its replicas ready", False,
                        f"Deployment {APP}/web is gone: start again with operatorlab lab start {self.id}")
        else:
            state = deployment_state(apps, "web", APP)
            yield Check(f"Deployment {APP}/web has its replicas ready", state is None, state or "rolled out")
        ns = checks.get_or_none(lambda: self.core.read_namespace(DOOMED))
        stuck = ns is not None and ns.metadata.deletion_timestamp is not None
        yield Check(f"namespace {DOOMED} not stuck Terminating", not stuck,
                    f"namespace {DOOMED} has deletionTimestamp={ns.metadata.deletion_timestamp}, "
                    f"status.phase={ns.status.phase}" if stuck and ns is not None else "gone or live")

    def solve(self) -> None:
        start_component(self.ctx.cluster, COMPONENT)

    def reset(self) -> None:
        if self.ctx.provider == "local" and not component_running(self.ctx.cluster, COMPONENT):
            start_component(self.ctx.cluster, COMPONENT)  # namespaces cannot go without it
        super().reset()
