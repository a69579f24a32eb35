"""controller-manager-down: kube-controller-manager stops; Deployments freeze, namespaces stick Terminating."""

from __future__ import annotations

from operatorlab.faults.components import component_running, start_component, stop_component
from operatorlab.labs import Check, Lab
from operatorlab.wait import eventually

APP, DOOMED = "lab-kcm-app", "lab-kcm-doomed"
COMPONENT = "kube-controller-manager"


def _deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}}


class ControllerManagerDown(Lab):
    title = "The loops stopped turning"
    summary = "a scaled Deployment never progresses and a namespace sticks Terminating: name the loop that stopped"
    drill = True
    requires = frozenset({"local"})
    settle = 60.0
    hints = (
        "Both objects were accepted by the API server, yet nothing acts on them. Compare the Deployment's "
        "metadata.generation with its status.observedGeneration.",
        "The API server only stores objects; controllers make them true. Which process runs the deployment, "
        "replicaset and namespace controllers? `operatorlab cluster status` shows every component.",
        "kube-controller-manager is stopped: start it (`operatorlab cluster up` starts whatever is not running).",
    )

    def setup(self) -> None:
        from kubernetes import client

        self.track("v1", "Namespace", APP)
        self.track("v1", "Namespace", DOOMED)
        for name in (APP, DOOMED):
            self.core.create_namespace({"metadata": {"name": name}})
        apps = client.AppsV1Api(self.api)
        apps.create_namespaced_deployment(APP, _deployment(1))
        eventually(lambda: (apps.read_namespaced_deployment("web", APP).status.ready_replicas or 0) == 1,
                   timeout=60, message="Deployment web ready")

    def inject(self) -> None:
        from kubernetes import client

        stop_component(self.ctx.cluster, COMPONENT)
        client.AppsV1Api(self.api).patch_namespaced_deployment_scale("web", APP, {"spec": {"replicas": 2}})
        self.core.delete_namespace(DOOMED)

    def check(self) -> list[Check]:
        from kubernetes import client

        results = []
        d = client.AppsV1Api(self.api).read_namespaced_deployment("web", APP)
        ready, want = d.status.ready_replicas or 0, d.spec.replicas
        ok = ready == want and d.status.observed_generation == d.metadata.generation
        results.append(Check(f"Deployment {APP}/web has its {want} replicas ready", ok,
                             f"{ready}/{want} ready; metadata.generation={d.metadata.generation}, "
                             f"status.observedGeneration={d.status.observed_generation}"))
        try:
            ns = self.core.read_namespace(DOOMED)
            if not ns.metadata.deletion_timestamp:
                results.append(Check(f"namespace {DOOMED} not stuck Terminating", True, "live"))
                return results
            results.append(Check(f"namespace {DOOMED} not stuck Terminating", False,
                                 f"namespace {DOOMED} has deletionTimestamp={ns.metadata.deletion_timestamp}, "
                                 f"status.phase={ns.status.phase}, conditions: {len(ns.status.conditions or [])}"))
        except client.ApiException as e:
            if e.status != 404:
                raise
            results.append(Check(f"namespace {DOOMED} not stuck Terminating", True, "gone"))
        return results

    def solve(self) -> None:
        start_component(self.ctx.cluster, COMPONENT)

    def reset(self) -> None:
        if self.ctx.provider == "local" and not component_running(self.ctx.cluster, COMPONENT):
            start_component(self.ctx.cluster, COMPONENT)  # namespaces cannot go without it
        super().reset()
