"""pending-node-selector: the node lost the label a workload's nodeSelector asks for; its new Pods stay Pending."""

from __future__ import annotations

from collections.abc import Iterator

from kubernetes import client

from operatorlab.labs import Check, Lab
from operatorlab.labs import workloads as w
from operatorlab.wait import eventually

NAMESPACE, APP = "lab-pns", "db"
REPLICAS = 2
KEY, VALUE = "disktype", "ssd"
RENAMED = "disk"  # the key the inject "tidies" the label to
SELECTOR = {KEY: VALUE}
#: Marks the Nodes this lab labelled, so reset takes off only its own labels.
MARK = "hedronite.io/drill-labelled"
PLACED = f"a fresh Pod asking for nodeSelector {KEY}={VALUE} is placed on a node"
RUNNING = f"Deployment {NAMESPACE}/{APP} runs {REPLICAS} up-to-date ready replicas"


class PendingNodeSelector(Lab):
    title = "No node will take it"
    summary = (f"after a restart, the new Pods of Deployment {NAMESPACE}/{APP} stay Pending. Its placement rules "
               f"are right and must stay as they are: make its Pods run")
    drill = True
    # Its own pytest-xdist group: it relabels Nodes, so two runs of it must not overlap on one cluster.
    xdist_group = "drill-pending-node-selector"
    settle = 0.0  # each check run makes a fresh Pod and waits for its node itself
    hints = (
        f"kubectl describe pod -n {NAMESPACE} on a Pending Pod: what does the scheduler say in its events?",
        "The scheduler found no node matching the Pod's node selector. Compare the Deployment's "
        "spec.template.spec.nodeSelector with the labels of the Nodes: kubectl get nodes --show-labels.",
        f"Someone renamed the Nodes' label {KEY}={VALUE} to {RENAMED}={VALUE}. Put it back: "
        f"kubectl label node <node> {KEY}={VALUE}. Editing the Deployment (dropping its nodeSelector, pinning "
        f"nodeName) is not the repair asked for. labs/pending-node-selector/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        for node in _nodes(self):
            _patch_labels(self, node, {KEY: VALUE}, mark=True)
        w.create_namespace(self, NAMESPACE)
        w.apps(self).create_namespaced_deployment(NAMESPACE, w.deployment(APP, replicas=REPLICAS,
                                                                          node_selector=SELECTOR))
        eventually(lambda: w.deployment_ready(self, NAMESPACE, APP, REPLICAS).passed, timeout=120,
                   message=f"Deployment {NAMESPACE}/{APP} ready")

    def inject(self) -> None:
        # A "tidy-up" of node labels renames the key; the running Pods stay (a nodeSelector is
        # only read when a Pod is scheduled) until the next rollout.
        for node in _labelled(self):
            _patch_labels(self, node, {KEY: None, RENAMED: VALUE})
        w.restart(self, NAMESPACE, APP)

    def check(self) -> Iterator[Check]:
        spec = {**w.template_spec(self, NAMESPACE, APP), "nodeSelector": SELECTOR}
        placed = w.pod_placed(self, NAMESPACE, spec, label=PLACED)
        yield placed
        yield w.deployment_ready(self, NAMESPACE, APP, REPLICAS, label=RUNNING, budget=w.BUDGET if placed.passed else 0)

    def solve(self) -> None:
        for node in _labelled(self):
            _patch_labels(self, node, {KEY: VALUE, RENAMED: None})

    def reset(self) -> None:
        for node in _labelled(self):
            _patch_labels(self, node, {KEY: None, RENAMED: None}, mark=False)
        super().reset()


def _nodes(lab: Lab) -> list[client.V1Node]:
    """The Nodes Pods may go to (not cordoned, no NoSchedule taint): on the local cluster, kwok's."""
    return [n for n in lab.core.list_node().items if not n.spec.unschedulable
            and not any(t.effect in ("NoSchedule", "NoExecute") for t in n.spec.taints or [])]


def _labelled(lab: Lab) -> list[client.V1Node]:
    return [n for n in lab.core.list_node().items if MARK in (n.metadata.annotations or {})]


def _patch_labels(lab: Lab, node: client.V1Node, labels: dict[str, str | None], *, mark: bool | None = None) -> None:
    """Set (a value) or remove (None) ``labels`` on ``node``; with ``mark``, add or remove the lab's mark."""
    patch: dict = {"metadata": {"labels": labels}}
    if mark is not None:
        patch["metadata"]["annotations"] = {MARK: "pending-node-selector" if mark else None}
    lab.core.patch_node(node.metadata.name, patch)
