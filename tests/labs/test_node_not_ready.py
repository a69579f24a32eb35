"""The node-not-ready drill grades behaviour: a node made to look usable by hand is not a repair.

tests/labs/test_labs.py proves its protocol. Here: the node's Ready condition written by hand
(as a kubelet would post it), which lifts the node's unreachable taints for a while, but no
kubelet runs what is placed there, so the check's fresh Pod never becomes Ready; and the taints
taken off by hand, which the node lifecycle controller puts back.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from operatorlab.labs import Lab
from tests.labs.clusters import ON_EXISTING_CLUSTER
from tests.labs.drilling import drill_module, failing, started

pytestmark = [pytest.mark.xdist_group("drill-node-not-ready"),
              pytest.mark.skipif(ON_EXISTING_CLUSTER, reason="stops kwok: needs the local cluster")]

DRILL = "node-not-ready"
D = drill_module(DRILL)


@pytest.fixture
def lab(private_cluster, tmp_path, nothing_left) -> Iterator[Lab]:
    yield from started(DRILL, private_cluster, tmp_path, nothing_left)


def test_a_ready_condition_written_by_hand_is_not_a_repair(lab):
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for node in lab.core.list_node().items:
        lab.core.patch_node_status(node.metadata.name, {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "written by hand",
             "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
    assert failing(lab) == [D.RUNS]  # the node says Ready; what is placed on it never runs


def test_taking_the_unreachable_taints_off_by_hand_is_not_a_repair(lab):
    for node in lab.core.list_node().items:
        lab.core.patch_node(node.metadata.name, {"spec": {"taints": None}})
    assert failing(lab) == [D.NODES, D.RUNS]  # the node stays Unknown; the controller taints it again
