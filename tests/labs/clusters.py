"""Which cluster, and which xdist group, a lab's test runs on (the fixtures are in conftest.py,
whose docstring says why).

A lab that runs the Tenant operator, or stops a control-plane component, gets a cluster of its
own: one per lab, shared by every test of that lab (its protocol in test_labs.py, its bypasses
in test_<lab>.py), which are one xdist group (:func:`lab_group`) and so run one after another
on one worker. :class:`GroupClusters` starts the cluster for the group's first test and purges
it after the group's last, counted at collection: one cluster start per lab, none idling.

On a cluster someone else runs (``OPERATORLAB_CLUSTER=existing``) no cluster of our own can
be started: the Tenant labs then run on the session's cluster, in the xdist group of every
other Tenant operator, and the labs that need the local cluster are only asked to say so.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from operatorlab import paths
from operatorlab.cluster import Cluster, LocalCluster, current, manifests
from operatorlab.labs import Lab, registry

ON_EXISTING_CLUSTER = os.environ.get("OPERATORLAB_CLUSTER") == "existing"
LABS = registry.discover()


def needs_own_cluster(lab_cls: type[Lab]) -> bool:
    """A lab that stops control-plane components, or runs a Tenant operator (two on one cluster
    would both reconcile every Tenant, as Tenants are cluster-scoped)."""
    return "local" in lab_cls.requires or lab_cls.xdist_group == "tenant-operator"


def lab_group(lab_id: str) -> str:
    """The xdist group of every test of a lab with a cluster of its own, and that cluster's name;
    on an existing cluster, the group of the session's Tenant operators."""
    return "tenant-operator" if ON_EXISTING_CLUSTER else f"labs-{lab_id}"


# The groups whose tests share a cluster of the group's own (see GroupClusters).
CLUSTER_GROUPS = frozenset(lab_group(i) for i, c in LABS.items() if needs_own_cluster(c)) - {"tenant-operator"}


def xdist_group_of(lab_cls: type[Lab]) -> str | None:
    """The xdist group a lab's tests join: its own cluster's, or its operator's on the shared one."""
    return lab_group(lab_cls.id) if needs_own_cluster(lab_cls) else lab_cls.xdist_group


def group_of(item: pytest.Item) -> str | None:
    """The xdist group a test was marked with (the closest mark, as pytest-xdist reads it)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


class GroupClusters:
    """The clusters of this worker's test groups: one per group in :data:`CLUSTER_GROUPS`, started
    when the group's first test asks for it (the ``group_cluster`` fixture) and purged after its last.

    pytest-xdist's ``loadgroup`` sends all of a group's tests to one worker, and every worker
    collects the whole session, so the tests collected in a group are the tests this worker will
    run in it: those that ask for the fixture are counted. One counted but skipped before its
    fixtures leaves its group's cluster up until :meth:`release_all` at the session's end.
    """

    def __init__(self) -> None:
        self.users: Counter[str] = Counter()
        self.running: dict[str, LocalCluster] = {}

    def count(self, items: Iterable[pytest.Item]) -> None:
        self.users = Counter(g for item in items if "group_cluster" in getattr(item, "fixturenames", ())
                             and (g := group_of(item)) in CLUSTER_GROUPS)

    def lend(self, group: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
        """For a test's fixture to yield: the group's cluster, started if it is not running yet."""
        try:
            if group not in self.running:
                self.running[group] = next(_started(group, tmp_path_factory))
            yield self.running[group]
        finally:
            self.users[group] -= 1
            if self.users[group] <= 0:
                self.release(group)

    def release(self, group: str) -> None:
        if (cluster := self.running.pop(group, None)) is not None:
            cluster.down(purge=True, log=lambda _: None)

    def release_all(self) -> None:
        for group in list(self.running):
            self.release(group)


def _started(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A local cluster started with the CRDs applied (purged again if that fails), not stopped."""
    cluster = LocalCluster(name, root=tmp_path_factory.mktemp("clusters"))
    try:
        cluster.up(log=lambda _: None)
        from kubernetes import config

        manifests.apply_crds(config.new_client_from_config(config_file=str(cluster.kubeconfig)), paths.crds_dir())
    except BaseException:
        cluster.down(purge=True, log=lambda _: None)
        raise
    yield cluster


def own_cluster(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A local cluster of its own, CRDs applied, for a session fixture to yield; purged afterwards."""
    cluster = next(_started(name, tmp_path_factory))
    try:
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
