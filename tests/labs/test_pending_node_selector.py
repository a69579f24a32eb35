"""The pending-node-selector drill grades behaviour: changing the workload instead of the Node fails.

tests/labs/test_labs.py proves its protocol. Here: the ways to get the Pods running while the
placement rule still matches no Node, each caught by the check that makes a fresh Pod with
the rule and waits for its node.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab.labs import Lab
from operatorlab.labs import workloads as w
from operatorlab.wait import eventually
from tests.labs.drilling import drill_module, failing, started

DRILL = "pending-node-selector"
D = drill_module(DRILL)
pytestmark = pytest.mark.xdist_group(D.PendingNodeSelector.xdist_group)  # as test_labs.py runs it: not at once


@pytest.fixture
def lab(tmp_path, nothing_left) -> Iterator[Lab]:
    from operatorlab.cluster import current

    yield from started(DRILL, current(), tmp_path, nothing_left)


def _patch_template(lab: Lab, spec: dict) -> None:
    w.apps(lab).patch_namespaced_deployment(D.APP, D.NAMESPACE, {"spec": {"template": {"spec": spec}}})
    eventually(lambda: w.deployment_ready(lab, D.NAMESPACE, D.APP, D.REPLICAS).passed, timeout=30,
               message="the workload rolled out")


def test_pinning_the_pods_to_a_node_is_not_a_repair(lab):
    _patch_template(lab, {"nodeName": lab.core.list_node().items[0].metadata.name})
    assert failing(lab) == [D.PLACED]


def test_dropping_the_placement_rule_is_not_a_repair(lab):
    _patch_template(lab, {"nodeSelector": None})
    assert failing(lab) == [D.PLACED]
