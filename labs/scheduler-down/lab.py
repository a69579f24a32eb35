"""scheduler-down: kube-scheduler stops; every new Pod stays Pending with no node."""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab.faults.components import component_running, start_component, stop_component
from operatorlab.labs import Check, Lab
from operatorlab.labs import workloads as w
from operatorlab.wait import eventually

NAMESPACE, APP = "lab-sched", "web"
REPLICAS = 3
COMPONENT = "kube-scheduler"
PLACED = "a fresh Pod is placed on a node"
RUNNING = f"Deployment {NAMESPACE}/{APP} runs {REPLICAS} up-to-date ready replicas"


class SchedulerDown(Lab):
    title = "Nobody places the Pods"
    summary = (f"a restart of Deployment {NAMESPACE}/{APP} never finishes: its new Pod stays Pending with no node, "
               f"and so does any new Pod. Make the cluster place Pods again")
    drill = True
    requires = frozenset({"local"})
    settle = 0.0  # each check run makes a fresh Pod and waits for its node itself
    hints = (
        f"kubectl get pods -n {NAMESPACE} -o wide: the new Pods have no NODE. `kubectl describe pod` one of them: "
        "what do its conditions and events say? Is there any event at all?",
        "A Pod with no PodScheduled condition and no FailedScheduling event was never looked at. Which control-plane "
        "component binds Pods to Nodes? `operatorlab cluster status` shows each component of this cluster.",
        "kube-scheduler is stopped: `operatorlab cluster up` starts whatever is not running. Binding Pods by hand "
        "(spec.nodeName) is not a repair: the next Pod is Pending again. labs/scheduler-down/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        w.create_namespace(self, NAMESPACE)
        w.apps(self).create_namespaced_deployment(NAMESPACE, w.deployment(APP, replicas=REPLICAS))
        eventually(lambda: w.deployment_ready(self, NAMESPACE, APP, REPLICAS).passed, timeout=120,
                   message=f"Deployment {NAMESPACE}/{APP} ready")

    def inject(self) -> None:
        stop_component(self.ctx.cluster, COMPONENT)
        w.restart(self, NAMESPACE, APP)  # kubectl rollout restart

    def check(self) -> Iterator[Check]:
        placed = w.pod_placed(self, NAMESPACE, w.template_spec(self, NAMESPACE, APP), label=PLACED)
        yield placed
        # The restart's new Pod was Pending since inject: once Pods are placed again, it follows within
        # seconds (while they are not, there is nothing to wait for).
        yield w.deployment_ready(self, NAMESPACE, APP, REPLICAS, label=RUNNING, budget=w.BUDGET if placed.passed else 0)

    def solve(self) -> None:
        start_component(self.ctx.cluster, COMPONENT)

    def reset(self) -> None:
        if self.ctx.provider == "local" and not component_running(self.ctx.cluster, COMPONENT):
            start_component(self.ctx.cluster, COMPONENT)
        super().reset()
