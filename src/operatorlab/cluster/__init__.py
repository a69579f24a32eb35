"""Clusters: start, find and describe a real Kubernetes API server.

Two providers implement one protocol, :class:`~operatorlab.cluster.provider.Cluster`:

- :class:`~operatorlab.cluster.local.LocalCluster` (default): etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler and kwok as child processes.
- :class:`~operatorlab.cluster.existing.ExistingCluster` (``OPERATORLAB_CLUSTER=existing``):
  the current kubeconfig context, e.g. minikube or kind.
"""

from __future__ import annotations

import os
from pathlib import Path

from operatorlab.cluster.existing import ExistingCluster
from operatorlab.cluster.local import LocalCluster
from operatorlab.cluster.provider import Cluster, ClusterError, ComponentStatus

__all__ = ["Cluster", "ClusterError", "ComponentStatus", "ExistingCluster", "LocalCluster", "current", "get_cluster"]


def get_cluster(name: str | None = None, *, nodes: int = 1) -> Cluster:
    """The cluster chosen by the environment.

    ``$OPERATORLAB_CLUSTER`` selects the provider: ``local`` (default) or ``existing``.
    ``name`` (default ``$OPERATORLAB_CLUSTER_NAME`` or ``lab``) names a local cluster, and
    ``nodes`` is how many simulated Nodes it has; an existing cluster has its own.

    Raises:
        ValueError: an unknown provider name.
    """
    provider = os.environ.get("OPERATORLAB_CLUSTER", "local")
    if provider == "existing":
        return ExistingCluster()
    if provider == "local":
        return LocalCluster(name or os.environ.get("OPERATORLAB_CLUSTER_NAME", "lab"), nodes=nodes)
    raise ValueError(f"OPERATORLAB_CLUSTER={provider!r}: expected 'local' or 'existing'")


def current() -> Cluster:
    """The cluster ``$KUBECONFIG`` points at: the local cluster that wrote it, if any.

    Notebooks call this: under ``make lab`` and under the test session alike,
    ``KUBECONFIG`` names the cluster to use.
    """
    kubeconfig = os.environ.get("KUBECONFIG")
    if kubeconfig and (Path(kubeconfig).parent / "state.json").is_file():
        local = LocalCluster(Path(kubeconfig).parent.name, root=Path(kubeconfig).parent.parent)
        if local.kubeconfig == Path(kubeconfig):
            return local
    return get_cluster() if not kubeconfig else ExistingCluster()
