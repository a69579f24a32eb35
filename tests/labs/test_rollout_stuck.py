"""The rollout-stuck drill grades behaviour: a rollout forced through or held still fails.

tests/labs/test_labs.py proves its protocol. Here: the ways to make the rollout look done
while the Pod template still asks for more than any Node has, each caught by a check.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab.labs import Lab
from operatorlab.labs import workloads as w
from operatorlab.wait import eventually
from tests.labs.drilling import drill_module, failing, started

DRILL = "rollout-stuck"
D = drill_module(DRILL)
pytestmark = pytest.mark.xdist_group(D.RolloutStuck.xdist_group)  # as test_labs.py runs it: not at once


@pytest.fixture
def lab(tmp_path, nothing_left) -> Iterator[Lab]:
    from operatorlab.cluster import current

    yield from started(DRILL, current(), tmp_path, nothing_left)


def test_pinning_the_pods_to_a_node_is_not_a_repair(lab):
    # kwok admits a Pod bound to it whatever it requests (a kubelet would refuse it: OutOfcpu).
    w.apps(lab).patch_namespaced_deployment(D.APP, D.NAMESPACE, {"spec": {"template": {"spec": {
        "nodeName": lab.core.list_node().items[0].metadata.name}}}})
    eventually(lambda: w.deployment_ready(lab, D.NAMESPACE, D.APP, D.REPLICAS).passed, timeout=30,
               message="the pinned rollout finished")
    assert failing(lab) == [D.PLACED]


def test_pausing_the_rollout_is_not_a_repair(lab):
    w.apps(lab).patch_namespaced_deployment(D.APP, D.NAMESPACE, {"spec": {"paused": True}})
    assert failing(lab) == [D.PLACED, D.RUNNING, D.ROLLS]  # and no rollout is started on top of the stuck one
