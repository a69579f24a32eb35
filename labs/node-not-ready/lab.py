"""node-not-ready: the node's kubelet (kwok, on this cluster) stops; the node goes NotReady, new Pods stay Pending."""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab.faults.components import component_running, start_component, stop_component
from operatorlab.labs import Check, Lab
from operatorlab.labs import workloads as w
from operatorlab.wait import eventually

NAMESPACE = "lab-node"
COMPONENT = "kwok"
#: kube-controller-manager's --node-monitor-grace-period (50 s by default in v1.36), and some room.
NOT_READY_WITHIN = 120.0
NODES = "every Node is Ready"
RUNS = "a fresh Pod is placed on a node and becomes Ready there"
SPEC = {"containers": [{"name": "probe", "image": w.IMAGE}], "terminationGracePeriodSeconds": 0}


class NodeNotReady(Lab):
    title = "A node went dark"
    summary = ("kubectl get nodes says NotReady, and every new Pod stays Pending: bring the node back so "
               "that new Pods run on it")
    drill = True
    requires = frozenset({"local"})
    settle = 0.0  # each check run makes a fresh Pod and waits for it to run
    hints = (
        "kubectl describe node: what do its Ready condition and its taints say, and since when? Who is supposed "
        "to report a node's status?",
        "A node's kubelet posts its status and renews its Lease; when it stops, kube-controller-manager marks the "
        "node NotReady (Unknown) and taints it unreachable. On this cluster every node's kubelet is played by "
        "one process: `operatorlab cluster status` shows it.",
        "kwok, this cluster's kubelet, is stopped: `operatorlab cluster up` starts whatever is not running. Editing "
        "the node's status or taints by hand is not the repair: no kubelet would run the Pods. "
        "labs/node-not-ready/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        w.create_namespace(self, NAMESPACE)

    def inject(self) -> None:
        stop_component(self.ctx.cluster, COMPONENT)
        # The node lifecycle controller waits for its grace period without a heartbeat first.
        eventually(lambda: not w.nodes_ready(self, label=NODES).passed, timeout=NOT_READY_WITHIN,
                   interval=1.0, message=f"lab {self.id}: a node NotReady after {COMPONENT} stopped")

    def check(self) -> Iterator[Check]:
        yield w.nodes_ready(self, label=NODES, budget=w.BUDGET)
        yield w.pod_placed(self, NAMESPACE, SPEC, label=RUNS, ready=True)

    def solve(self) -> None:
        start_component(self.ctx.cluster, COMPONENT)

    def reset(self) -> None:
        if self.ctx.provider == "local" and not component_running(self.ctx.cluster, COMPONENT):
            start_component(self.ctx.cluster, COMPONENT)
        super().reset()
