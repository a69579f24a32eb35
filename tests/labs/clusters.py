"""Which cluster, and which xdist group, a lab's test runs on (the fixtures are in conftest.py,
whose docstring says why).

On a cluster someone else runs (``OPERATORLAB_CLUSTER=existing``) no cluster of our own can
be started: the Tenant labs then run on the session's cluster, in the xdist group of every
other Tenant operator, and the labs that need the local cluster are only asked to say so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from operatorlab import paths
from operatorlab.cluster import Cluster, LocalCluster, current, manifests
from operatorlab.labs import Lab

# The cluster of the labs that run the Tenant operator.
TENANT_LABS = "labs-tenant"
ON_EXISTING_CLUSTER = os.environ.get("OPERATORLAB_CLUSTER") == "existing"
# The xdist group of their tests: their own cluster's, or on an existing cluster the
# group of the session's Tenant operators (two at once would fight over every Tenant).
TENANT_LABS_GROUP = "tenant-operator" if ON_EXISTING_CLUSTER else TENANT_LABS


def _placement(lab_cls: type[Lab]) -> tuple[str | None, str | None]:
    """``(fixture of the lab's own cluster, or None or "tenant-operator" for the session's; its xdist group)``."""
    if "local" in lab_cls.requires:
        return "private_cluster", f"lab-private-{lab_cls.id}"
    if lab_cls.xdist_group == "tenant-operator":
        # A cluster of the test's own: no Tenant operator meets another, and the Tenant labs run
        # side by side on several workers instead of one after another on one.
        return ("tenant-operator", TENANT_LABS_GROUP) if ON_EXISTING_CLUSTER else ("own_lab_cluster", None)
    return None, lab_cls.xdist_group


def cluster_for(lab_cls: type[Lab], request: pytest.FixtureRequest) -> Cluster:
    """The cluster a lab's test runs it on."""
    fixture, _ = _placement(lab_cls)
    return current() if fixture in (None, "tenant-operator") else request.getfixturevalue(fixture)


def xdist_group_of(lab_cls: type[Lab]) -> str | None:
    """The xdist group a lab's test joins: its own cluster's, or its operator's on the shared one."""
    return _placement(lab_cls)[1]


def own_cluster(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A local cluster of its own, CRDs applied, for a session fixture to yield; purged afterwards."""
    cluster = LocalCluster(name, root=tmp_path_factory.mktemp("clusters"))
    try:
        cluster.up(log=lambda _: None)
        from kubernetes import config

        manifests.apply_crds(config.new_client_from_config(config_file=str(cluster.kubeconfig)), paths.crds_dir())
        yield cluster
    finally:
        cluster.down(purge=True, log=lambda _: None)


def own_or_current(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """For a module fixture to yield: a cluster of its own (see :func:`own_cluster`); on a cluster
    someone else runs, the session's (its tests then belong in ``tenant-operator``'s group)."""
    if ON_EXISTING_CLUSTER:
        yield current()
        return
    yield from own_cluster(name, tmp_path_factory)


def own_kubeconfig(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """For a fixture to yield: the kubeconfig of a cluster of its own, purged afterwards; on a
    cluster someone else runs, ``$KUBECONFIG`` (the session's cluster, nothing started)."""
    if ON_EXISTING_CLUSTER:
        yield Path(os.environ["KUBECONFIG"])
        return
    for cluster in own_cluster(name, tmp_path_factory):
        yield cluster.kubeconfig


def module_cluster(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """For a test module's autouse ``kubeconfig`` fixture: a cluster of the module's own.

    ``KUBECONFIG`` names it while the module runs (what the CLI, kubectl, the labs and an
    operator started without a kubeconfig read), and the ``api_client``/``core``/``custom``
    fixtures of tests/conftest.py talk to it. On a cluster someone else runs, the
    session's cluster is used (the module then belongs in ``tenant-operator``'s group).
    """
    saved = os.environ["KUBECONFIG"]
    for kubeconfig in own_kubeconfig(name, tmp_path_factory):
        os.environ["KUBECONFIG"] = str(kubeconfig)
        try:
            yield kubeconfig
        finally:
            os.environ["KUBECONFIG"] = saved
