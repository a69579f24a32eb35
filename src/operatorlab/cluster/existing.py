"""The ``existing`` provider: a cluster someone else runs (minikube, kind, a real one).

Nothing is started or stopped; the current kubeconfig context (``$KUBECONFIG`` or
``~/.kube/config``) is used as it is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from operatorlab.cluster.provider import ClusterError, ComponentStatus, Log

#: Fault injections that need to own the control-plane processes.
UNAVAILABLE_INJECTIONS = ("stop/start kube-controller-manager", "stop/start kube-scheduler", "stop kwok")


class ExistingCluster:
    """The cluster of the current kubeconfig context."""

    provider: Literal["existing"] = "existing"
    name = "existing"

    def __init__(self) -> None:
        self.kubeconfig = Path(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0]).expanduser()

    def up(self, *, log: Log = print) -> ExistingCluster:
        """Check the cluster answers; start nothing.

        Raises:
            ClusterError: no kubeconfig, or the apiserver does not answer.
        """
        from kubernetes import client, config

        if not self.kubeconfig.is_file():
            raise ClusterError(
                f"no kubeconfig at {self.kubeconfig}. Start minikube or kind first, or use the "
                "built-in cluster: unset OPERATORLAB_CLUSTER && operatorlab cluster up"
            )
        try:
            api = config.new_client_from_config(config_file=str(self.kubeconfig))
            version = client.VersionApi(api).get_code()
        except Exception as e:  # any failure here means "cannot reach it"; say which context
            raise ClusterError(f"cannot reach the cluster of {self.kubeconfig}: {e}") from e
        _, context = config.list_kube_config_contexts(config_file=str(self.kubeconfig))
        log(f"using existing cluster: context {context['name']!r}, Kubernetes {version.git_version}")
        return self

    def down(self, *, purge: bool = False, log: Log = print) -> None:
        """Nothing to stop: the cluster is not ours."""

    def is_up(self) -> bool:
        try:
            self.up(log=lambda _: None)
            return True
        except ClusterError:
            return False

    def status(self) -> list[ComponentStatus]:
        return []  # its processes are not ours to list

    def stop_component(self, name: str) -> None:
        raise ClusterError(
            f"cannot stop {name} on an existing cluster: Operator Lab does not own its processes. "
            f"Unavailable here: {', '.join(UNAVAILABLE_INJECTIONS)}"
        )

    def start_component(self, name: str, *, timeout: float = 60.0) -> None:
        self.stop_component(name)

    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.kubeconfig)}
