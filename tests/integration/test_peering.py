"""Two replicas of the Website operator at once: kopf peering lets one work, the other wait.

Both run with one peering name (``--peering``) and different priorities (kopf pauses
*every* operator when two of equal priority meet: peering is not leader election).
They are confined to the test's namespace, so they use a namespaced ``KopfPeering``
(crds/kopf-peering.yaml) of that name in it. Every Website is then reconciled by the
higher-priority replica only; the other pauses, and takes over when the first stops.
"""

from __future__ import annotations

import re

import pytest
from kubernetes import client

from operatorlab import paths
from operatorlab.cluster import manifests
from operatorlab.operators import OperatorProcess, operator_path
from operatorlab.wait import eventually

PEERING = "websites"
WEBSITES = ("example.com", "v1")
N = 5


@pytest.fixture
def peering(api_client, custom, namespace) -> str:
    """kopf's peering CRDs (idempotent; shared, never deleted) and a KopfPeering in the namespace."""
    manifests.apply_crds(api_client, paths.crds_dir())
    custom.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", {
        "apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING}})
    return PEERING


def _peers(custom, namespace: str) -> dict:
    return custom.get_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", PEERING).get("status", {})


def _handled(log: str, namespace: str, name: str) -> int:
    """How many times this replica's reconcile handler succeeded for one Website."""
    return len(re.findall(rf"\[{re.escape(namespace)}/{re.escape(name)}\] Handler 'reconcile' succeeded", log))


def _written_by_us(deployment: client.V1Deployment) -> tuple:
    """When an operator last changed a Deployment (not its resourceVersion: the Deployment
    controller keeps rewriting status). A no-op server-side apply changes neither."""
    ours = [(f.operation, f.time) for f in deployment.metadata.managed_fields if f.manager == "website-operator"]
    return deployment.metadata.generation, ours


def _ready(custom, namespace: str, name: str) -> bool:
    status = custom.get_namespaced_custom_object(*WEBSITES, namespace, "websites", name).get("status", {})
    return status.get("readyReplicas") == status.get("replicas") == 1


def test_two_replicas_handle_each_website_once_and_fail_over(peering, custom, api_client, namespace, tmp_path):
    active = OperatorProcess(operator_path("website"), namespaces=[namespace], peering=peering,
                             extra_args=["--priority=100"], log_path=tmp_path / "active.log")
    standby = OperatorProcess(operator_path("website"), namespaces=[namespace], peering=peering,
                              extra_args=["--priority=50"], log_path=tmp_path / "standby.log")
    try:
        active.start()
        # A replica starts paused (kopf waits to see its peers when peering is asked for)
        # and resumes only once it knows nobody outranks it.
        eventually(lambda: "Resuming operations after the pause" in active.log(), timeout=30,
                   message="the higher priority replica resumed")
        standby.start()
        peers = eventually(lambda: len(_peers(custom, namespace)) == 2 and _peers(custom, namespace), timeout=30,
                           message="both replicas in the KopfPeering")
        assert sorted(p["priority"] for p in peers.values()) == [50, 100]

        names = [f"site-{i}" for i in range(N)]
        for name in names:
            custom.create_namespaced_custom_object(*WEBSITES, namespace, "websites", {
                "apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": name}, "spec": {}})
        for name in names:
            eventually(lambda n=name: _ready(custom, namespace, n), timeout=60, message=f"{name} ready")
        for name in names:
            assert _handled(active.log(), namespace, name) == 1, f"{name}: handled once by the active replica"
            assert _handled(standby.log(), namespace, name) == 0, f"{name}: never by the paused one"
        assert "Resuming operations" not in standby.log()
        assert "Handler 'deployment_status'" not in standby.log(), "a paused replica runs no handler at all"

        # Fail-over: the active replica stops (and says goodbye in the KopfPeering).
        apps = client.AppsV1Api(api_client)
        versions = {n: _written_by_us(apps.read_namespaced_deployment(n, namespace)) for n in names}
        active.stop()
        eventually(lambda: "Resuming operations after the pause" in standby.log(), timeout=30,
                   message="the standby took over")
        custom.create_namespaced_custom_object(*WEBSITES, namespace, "websites", {
            "apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": "after"}, "spec": {}})
        eventually(lambda: _ready(custom, namespace, "after"), timeout=60, message="served by the new active replica")
        # Readiness comes from the Deployment's status handler; the reconcile's own
        # success line may follow it (a retry after a conflict, say): wait for it.
        eventually(lambda: _handled(standby.log(), namespace, "after") == 1, timeout=30,
                   message="the new active replica's reconcile of 'after' succeeded")
        assert _handled(active.log(), namespace, "after") == 0
        # Taking over, it re-checked the existing Websites (on.resume): idempotent, nothing written.
        for name in names:
            eventually(lambda n=name: _handled(standby.log(), namespace, n) == 1, timeout=30,
                       message=f"{name} re-checked once")
            assert _written_by_us(apps.read_namespaced_deployment(name, namespace)) == versions[name]
    finally:
        active.stop()
        standby.stop()
