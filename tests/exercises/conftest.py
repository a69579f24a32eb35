"""The cluster the exercises are graded on.

An exercise that runs a cluster-wide operator (Tenant, NamespaceBaseline) or reconciles
Tenants must not share a cluster with the session's operators of that kind (they would
reconcile each other's objects), so those get a cluster of their own, ``exercises``, and an
xdist group of it: they run beside the session's operator tests instead of queueing behind
them. On a cluster someone else runs
(``OPERATORLAB_CLUSTER=existing``) no cluster of our own can be started: they then join the
session's operator group on the session's cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.clusters import ON_EXISTING_CLUSTER, own_kubeconfig

EXERCISES_CLUSTER = "exercises"


#: The groups of exercises that run a cluster-wide operator: they are graded on ``exercises``.
OPERATOR_GROUPS = ("tenant-operator", "nsb-operator")


def group_of(xdist_group: str | None) -> str | None:
    """The xdist group of an exercise's tests."""
    if xdist_group in OPERATOR_GROUPS and not ON_EXISTING_CLUSTER:
        return EXERCISES_CLUSTER
    return xdist_group


@pytest.fixture(scope="module")  # stopped when the group's tests are done (they run in a row)
def exercises_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The kubeconfig the Tenant exercises are graded against."""
    yield from own_kubeconfig(EXERCISES_CLUSTER, tmp_path_factory)
