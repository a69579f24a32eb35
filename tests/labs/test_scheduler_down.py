"""The scheduler-down drill grades behaviour: Pods placed by hand are not a repair.

tests/labs/test_labs.py proves its protocol (its checks pass after setup, fail after inject,
pass after the reference repair). Here: the ways to get the workload running without a
scheduler, each caught by the check that makes a fresh Pod and waits for its node.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from operatorlab.labs import Lab
from operatorlab.labs import workloads as w
from operatorlab.wait import eventually
from tests.labs.clusters import ON_EXISTING_CLUSTER
from tests.labs.drilling import drill_module, failing, started

pytestmark = [pytest.mark.xdist_group("drill-scheduler-down"),
              pytest.mark.skipif(ON_EXISTING_CLUSTER, reason="stops kube-scheduler: needs the local cluster")]

DRILL = "scheduler-down"
D = drill_module(DRILL)


@pytest.fixture
def lab(private_cluster, tmp_path, nothing_left) -> Iterator[Lab]:
    yield from started(DRILL, private_cluster, tmp_path, nothing_left)


def _node(lab: Lab) -> str:
    return lab.core.list_node().items[0].metadata.name


def test_binding_the_pending_pods_by_hand_is_not_a_repair(lab):
    node = _node(lab)

    def bind_pending() -> bool:
        """What kube-scheduler does, done by hand: a Binding for each Pod with no node."""
        for pod in lab.core.list_namespaced_pod(D.NAMESPACE).items:
            if not pod.spec.node_name:
                body = client.V1Binding(metadata=client.V1ObjectMeta(name=pod.metadata.name),
                                        target=client.V1ObjectReference(kind="Node", name=node))
                lab.core.create_namespaced_pod_binding(pod.metadata.name, D.NAMESPACE, body, _preload_content=False)
        return w.deployment_ready(lab, D.NAMESPACE, D.APP, D.REPLICAS).passed

    eventually(bind_pending, timeout=60, message="the rollout finished with Pods bound by hand")
    assert failing(lab) == [D.PLACED]


def test_pinning_the_workload_to_a_node_is_not_a_repair(lab):
    w.apps(lab).patch_namespaced_deployment(D.APP, D.NAMESPACE, {"spec": {"template": {"spec": {
        "nodeName": _node(lab)}}}})
    assert failing(lab) == [D.PLACED]  # the Deployment rolls out (no scheduler needed), a fresh Pod does not
