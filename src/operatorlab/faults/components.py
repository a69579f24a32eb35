"""Stop and start control-plane components of a local cluster: the loops that make objects true.

Only the built-in local cluster lets Operator Lab own these processes; on an existing
cluster (minikube, kind) each call raises :class:`ComponentUnavailable` naming what is
unavailable and the command that gives a cluster where it works.
"""

from __future__ import annotations

from typing import Any

from operatorlab.cluster.existing import UNAVAILABLE_INJECTIONS


class ComponentUnavailable(RuntimeError):
    """This cluster does not let us stop or start its control-plane components."""


def require_local(cluster: Any, what: str) -> None:
    """Raise :class:`ComponentUnavailable` unless ``cluster`` is a local one whose processes we own."""
    provider = getattr(cluster, "provider", "existing")
    if provider != "local":
        raise ComponentUnavailable(
            f"{what} needs the built-in local cluster: on this {provider} "
            f"cluster Operator Lab does not own the control-plane processes. "
            f"Unavailable here: {', '.join(UNAVAILABLE_INJECTIONS)}. "
            f"Use it with: unset OPERATORLAB_CLUSTER && operatorlab cluster up"
        )


def stop_component(cluster: Any, name: str) -> None:
    """Stop one control-plane component (kube-controller-manager, kube-scheduler, kwok)."""
    require_local(cluster, f"stopping {name}")
    cluster.stop_component(name)


def start_component(cluster: Any, name: str, *, timeout: float = 60.0) -> None:
    """Start it again and wait until it is healthy."""
    require_local(cluster, f"starting {name}")
    cluster.start_component(name, timeout=timeout)


def component_running(cluster: Any, name: str) -> bool:
    return any(r.name == name and r.running for r in cluster.status())
