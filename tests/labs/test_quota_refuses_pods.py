"""The quota-refuses-pods drill grades behaviour: a quota taken away or loosened fails; defaults pass.

tests/labs/test_labs.py proves its protocol. Here: the ways to let the Pods in by weakening
the Tenant's quota, each caught by the check that the quota is what the Tenant says; and a
LimitRange giving the namespace default requests and limits, a repair the check accepts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab import tenants
from operatorlab.cluster import Cluster, current
from operatorlab.labs import Lab
from tests.labs.clusters import ON_EXISTING_CLUSTER, own_cluster
from tests.labs.drilling import drill_module, failing, started

DRILL = "quota-refuses-pods"
D = drill_module(DRILL)
# A cluster of its own (a Tenant operator must not meet another on one cluster), as take-over's.
pytestmark = pytest.mark.xdist_group("tenant-operator" if ON_EXISTING_CLUSTER else "labs-drill-quota")


@pytest.fixture(scope="module")
def quota_cluster(tmp_path_factory) -> Iterator[Cluster]:
    if ON_EXISTING_CLUSTER:
        yield current()
        return
    yield from own_cluster("labs-drill-quota", tmp_path_factory)


@pytest.fixture
def lab(quota_cluster, tmp_path, nothing_left) -> Iterator[Lab]:
    yield from started(DRILL, quota_cluster, tmp_path, nothing_left)


def test_deleting_the_quota_is_not_a_repair(lab):
    lab.core.delete_namespaced_resource_quota(tenants.QUOTA_NAME, D.NAMESPACE)
    assert failing(lab) == [D.QUOTA]


def test_loosening_the_quota_is_not_a_repair(lab):
    lab.core.replace_namespaced_resource_quota(tenants.QUOTA_NAME, D.NAMESPACE, _with_hard(lab, {"pods": "20"}))
    assert failing(lab) == [D.QUOTA]


def test_default_requests_and_limits_from_a_limitrange_are_a_repair(lab):
    lab.track("v1", "LimitRange", "defaults", D.NAMESPACE)
    lab.core.create_namespaced_limit_range(D.NAMESPACE, {"metadata": {"name": "defaults"}, "spec": {"limits": [
        {"type": "Container", "defaultRequest": {"cpu": "100m"}, "default": {"cpu": "200m"}}]}})
    assert failing(lab) == []


def _with_hard(lab: Lab, hard: dict):
    quota = lab.core.read_namespaced_resource_quota(tenants.QUOTA_NAME, D.NAMESPACE)
    quota.spec.hard = hard
    return quota
