"""Shared by the lab tests: the clusters labs run on; nothing a lab recorded outlives its reset.

A Tenant operator reconciles every Tenant of its cluster (they are cluster-scoped), so two
at once on one cluster would fight. Each test of a lab that runs one therefore gets a
cluster of its own (``labs-tenant-<lab>``, about 5 s to start): such tests run side by
side on any worker instead of one after another. Labs that stop control-plane components
get another, ``labs-private``, never the shared one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from operatorlab.cluster import LocalCluster
from operatorlab.labs import Lab
from operatorlab.labs.state import LabState
from tests.labs.clusters import TENANT_LABS, own_cluster


def _assert_nothing_left(lab: Lab, recorded: LabState) -> None:
    """Nothing the lab recorded outlives its reset: processes, files, state, objects of any kind."""
    for role, rec in recorded.processes.items():
        assert not rec.identity.alive, f"{role} still runs"
        assert not Path(rec.log).exists(), rec.log
    for path in recorded.files:
        assert not Path(path).exists(), path
    assert not lab.state.path.exists()
    dynamic = DynamicClient(lab.api)
    for obj in recorded.objects:
        resource = dynamic.resources.get(api_version=obj.api_version, kind=obj.kind)
        with pytest.raises(NotFoundError):
            resource.get(name=obj.name, namespace=obj.namespace)


@pytest.fixture
def nothing_left() -> Callable[[Lab, LabState], None]:
    return _assert_nothing_left


@pytest.fixture
def own_lab_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster of one lab test's own, for a lab that runs the Tenant operator: started (about
    5 s) and purged around the test, so such tests need no xdist group and run side by side."""
    yield from own_cluster(f"{TENANT_LABS}-{request.node.callspec.params['lab_id']}", tmp_path_factory)


# Module-scoped, as every cluster of a test group: a group's tests run in a row on one xdist
# worker, so its cluster is stopped once they are done instead of idling to the session's end.

@pytest.fixture(scope="module")
def private_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster for labs that stop control-plane components."""
    yield from own_cluster("labs-private", tmp_path_factory)
