"""Shared by the lab tests: the clusters labs run on; nothing a lab recorded outlives its reset.

A Tenant operator reconciles every Tenant of its cluster (they are cluster-scoped), so two
at once on one cluster would fight; a lab that stops a control-plane component must not stop
the session's. Each such lab therefore has a cluster of its own (``labs-<lab>``, about 5 s to
start), shared by all of that lab's tests, which run one after another on one worker; the
labs run side by side (see tests/labs/clusters.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from operatorlab.cluster import Cluster, current
from operatorlab.labs import Lab
from operatorlab.labs.state import LabState
from tests.labs.clusters import CLUSTER_GROUPS, ON_EXISTING_CLUSTER, GroupClusters, group_of


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


GROUP_CLUSTERS = GroupClusters()


def pytest_collection_finish(session: pytest.Session) -> None:
    GROUP_CLUSTERS.count(session.items)


@pytest.fixture(scope="session")
def group_clusters() -> Iterator[GroupClusters]:
    yield GROUP_CLUSTERS
    GROUP_CLUSTERS.release_all()


@pytest.fixture
def group_cluster(request: pytest.FixtureRequest, group_clusters: GroupClusters,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster a lab's test runs on: its group's own (one per lab that needs its own; see
    clusters.py), else the session's, as on a cluster someone else runs."""
    group = group_of(request.node)
    if ON_EXISTING_CLUSTER or group not in CLUSTER_GROUPS:
        yield current()
        return
    yield from group_clusters.lend(group, tmp_path_factory)
