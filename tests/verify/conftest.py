"""The cluster ``operatorlab verify`` is proven on.

The suite runs cluster-wide operators (Tenant, NamespaceBaseline) and applies CRDs, so it
gets a cluster of its own, ``verify``, and an xdist group of it: its tests run one after
another, beside the session's operator tests instead of behind them. On a cluster someone
else runs (``OPERATORLAB_CLUSTER=existing``) none can be started: they then join the
session's operator group on the session's cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.clusters import ON_EXISTING_CLUSTER, own_kubeconfig

VERIFY_CLUSTER = "verify"
#: The xdist group of every test that runs the suite.
VERIFY_GROUP = "tenant-operator" if ON_EXISTING_CLUSTER else VERIFY_CLUSTER


@pytest.fixture(scope="module")  # stopped when the suite's tests are done (they run in a row)
def verify_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The kubeconfig the suite grades on."""
    yield from own_kubeconfig(VERIFY_CLUSTER, tmp_path_factory)
