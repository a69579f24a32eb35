"""What every cluster provider is: the :class:`Cluster` protocol and its error.

Two providers implement it:

- :class:`~operatorlab.cluster.local.LocalCluster`: the control plane as child processes;
- :class:`~operatorlab.cluster.existing.ExistingCluster`: the current kubeconfig context
  (minikube, kind, a real cluster), started and stopped by someone else.

Callers (the CLI, the labs, the notebooks) hold a :class:`Cluster` and never ask which
provider it is by ``hasattr``: what differs is in the protocol (``status()`` is empty for a
cluster whose processes are not ours; ``stop_component`` raises :class:`ClusterError`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

#: Where a provider prints its progress (``print`` by default, a no-op to keep quiet).
Log = Callable[[str], None]

ProviderName = Literal["local", "existing"]


class ClusterError(RuntimeError):
    """A cluster could not be started, reached or changed; the message says why and what to run."""


@dataclass(frozen=True)
class ComponentStatus:
    """One row of ``operatorlab cluster status``: a control-plane process and its health."""

    name: str
    pid: int | None
    port: int | None
    running: bool
    healthy: bool
    log: Path


class Cluster(Protocol):
    """A real Kubernetes API server the lab can use."""

    @property
    def provider(self) -> ProviderName:
        """``local`` (our processes) or ``existing`` (someone else's)."""
        ...

    @property
    def name(self) -> str:
        """A name for messages and for per-cluster state (lab state, logs)."""
        ...

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig: what ``KUBECONFIG`` is set to for this cluster."""
        ...

    def up(self, *, log: Log = print) -> Cluster:
        """Make sure it serves (start what is ours and not running); return self."""
        ...

    def down(self, *, purge: bool = False, log: Log = print) -> None:
        """Stop what is ours (nothing, for an existing cluster)."""
        ...

    def is_up(self) -> bool:
        """Whether the API server answers now."""
        ...

    def status(self) -> list[ComponentStatus]:
        """Each control-plane process we own; empty when we own none."""
        ...

    def env(self) -> dict[str, str]:
        """Environment variables that point kubectl and clients at this cluster."""
        ...

    def stop_component(self, name: str) -> None:
        """Stop one control-plane component. Raises :class:`ClusterError` where we own none."""
        ...

    def start_component(self, name: str, *, timeout: float = 60.0) -> None:
        """Start a stopped component again and wait until it is healthy."""
        ...
