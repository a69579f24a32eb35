"""Clusters: start, find and describe a real Kubernetes API server.

Two providers share one interface (``up``, ``down``, ``status``, ``is_up``, ``env``,
``kubeconfig``, ``stop_component``/``start_component``):

- :class:`~operatorlab.cluster.local.LocalCluster` (default): etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler and kwok as child processes.
- :class:`~operatorlab.cluster.existing.ExistingCluster` (``OPERATORLAB_CLUSTER=existing``):
  the current kubeconfig context, e.g. minikube or kind.
"""

from __future__ import annotations

import os

from operatorlab.cluster.existing import ExistingCluster
from operatorlab.cluster.local import ClusterError, LocalCluster

__all__ = ["ClusterError", "ExistingCluster", "LocalCluster", "current", "get_cluster"]


def get_cluster(name: str | None = None) -> LocalCluster | ExistingCluster:
    """The cluster chosen by the environment.

    ``$OPERATORLAB_CLUSTER`` selects the provider: ``local`` (default) or ``existing``.
    ``name`` (default ``$OPERATORLAB_CLUSTER_NAME`` or ``lab``) names a local cluster.

    Raises:
        ValueError: an unknown provider name.
    """
    provider = os.environ.get("OPERATORLAB_CLUSTER", "local")
    if provider == "existing":
        return ExistingCluster()
    if provider == "local":
        return LocalCluster(name or os.environ.get("OPERATORLAB_CLUSTER_NAME", "lab"))
    raise ValueError(f"OPERATORLAB_CLUSTER={provider!r}: expected 'local' or 'existing'")


def current() -> LocalCluster | ExistingCluster:
    """The cluster ``$KUBECONFIG`` points at: the local cluster that wrote it, if any.

    Notebooks call this: under ``make lab`` and under the test session alike,
    ``KUBECONFIG`` names the cluster to use.
    """
    from pathlib import Path

    kubeconfig = os.environ.get("KUBECONFIG")
    if kubeconfig and (Path(kubeconfig).parent / "state.json").is_file():
        local = LocalCluster(Path(kubeconfig).parent.name, root=Path(kubeconfig).parent.parent)
        if local.kubeconfig == Path(kubeconfig):
            return local
    return get_cluster() if not kubeconfig else ExistingCluster()
