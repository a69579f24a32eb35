"""The local provider on the real binaries: up, reuse, status, component restarts, down."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from kubernetes import client, config

from operatorlab.cluster import ExistingCluster, LocalCluster, current, process
from operatorlab.cluster.local import COMPONENTS
from operatorlab.wait import eventually

_real_free_port = process.free_port

pytestmark = pytest.mark.local_cluster  # every test here starts clusters of its own from the binaries


@pytest.fixture(scope="module")
def spare(tmp_path_factory) -> LocalCluster:
    """A second, private cluster this module may stop and break (not the session's)."""
    cluster = LocalCluster("spare", root=tmp_path_factory.mktemp("clusters"))
    cluster.up(log=lambda _: None)
    yield cluster
    cluster.down(purge=True, log=lambda _: None)


def _api(cluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(cluster.kubeconfig))


def test_up_serves_a_real_api_with_a_ready_node(spare):
    api = _api(spare)
    assert client.VersionApi(api).get_code().git_version == "v1.36.3"
    nodes = client.CoreV1Api(api).list_node().items
    assert [n.metadata.name for n in nodes] == ["kwok-node-0"]
    assert {c.type: c.status for c in nodes[0].status.conditions}["Ready"] == "True"


def test_simulated_node_renews_its_lease_like_a_kubelet(spare):
    """Without Lease renewals the node-lifecycle controller marks the node NotReady and
    every Pod on it Ready=False; kwok must heartbeat through the Lease."""
    coordination = client.CoordinationV1Api(_api(spare))
    first = eventually(lambda: coordination.read_namespaced_lease("kwok-node-0", "kube-node-lease").spec.renew_time,
                       timeout=30, message="node Lease exists")
    eventually(lambda: coordination.read_namespaced_lease("kwok-node-0", "kube-node-lease").spec.renew_time > first,
               timeout=30, message="node Lease renewed")


def test_status_reports_every_component_healthy_with_pid_and_port(spare):
    rows = spare.status()
    assert [r.name for r in rows] == list(COMPONENTS)
    for row in rows:
        assert row.running and row.healthy, row
        assert row.pid and process.is_running(row.pid)
        assert 0 < row.port < 65536
        assert row.log.is_file() and row.log.is_relative_to(spare.dir)


def test_second_up_reuses_the_running_processes(spare):
    before = {r.name: r.pid for r in spare.status()}
    messages: list[str] = []
    LocalCluster("spare", root=spare.dir.parent).up(log=messages.append)
    assert {r.name: r.pid for r in spare.status()} == before
    assert any("already up" in m for m in messages)


def test_rbac_is_enforced_for_unprivileged_identities(spare):
    """The scheduler's identity may bind Pods but not delete namespaces: RBAC is really on."""
    api = config.new_client_from_config(config_file=str(spare.dir / "components" / "kube-scheduler.kubeconfig"))
    with pytest.raises(client.ApiException) as denied:
        client.CoreV1Api(api).delete_namespace("default")
    assert denied.value.status == 403


def test_deployment_pods_become_running_on_the_simulated_node(spare):
    api = _api(spare)
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx:1.25")]),
            ),
        ),
    )
    apps.create_namespaced_deployment("default", deployment)
    eventually(lambda: apps.read_namespaced_deployment("web", "default").status.ready_replicas == 2,
               timeout=60, message="deployment ready")
    pods = core.list_namespaced_pod("default", label_selector="app=web").items
    assert {p.status.phase for p in pods} == {"Running"}
    assert {p.spec.node_name for p in pods} == {"kwok-node-0"}


def test_a_stopped_controller_manager_stops_its_loops_and_comes_back(spare):
    api = _api(spare)
    core = client.CoreV1Api(api)
    spare.stop_component("kube-controller-manager")
    assert not {r.name: r.running for r in spare.status()}["kube-controller-manager"]
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="orphaned")))
    core.delete_namespace("orphaned")
    # Nobody runs the namespace controller: the namespace stays Terminating.
    assert core.read_namespace("orphaned").status.phase == "Terminating"
    spare.start_component("kube-controller-manager")
    eventually(lambda: "orphaned" not in {n.metadata.name for n in core.list_namespace().items},
               timeout=90, message="namespace controller finishes once restarted")
    with pytest.raises(ValueError):
        spare.stop_component("etcd")


def test_existing_provider_uses_the_configured_kubeconfig(spare, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(spare.kubeconfig))
    messages: list[str] = []
    existing = ExistingCluster().up(log=messages.append)
    assert existing.kubeconfig == spare.kubeconfig
    assert "v1.36.3" in messages[0]
    with pytest.raises(Exception, match="does not own"):
        existing.stop_component("kube-scheduler")


def test_current_finds_the_local_cluster_behind_kubeconfig(spare, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(spare.kubeconfig))
    found = current()
    assert isinstance(found, LocalCluster) and found.dir == spare.dir


def test_a_port_taken_before_the_bind_means_new_ports_and_down_leaves_nothing(tmp_path, monkeypatch):
    # The race a busy machine runs: the controller-manager's port is free when chosen
    # and taken (here by us) before the component binds it.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        chosen = iter([*(process.free_port() for _ in range(3)), taken])
        monkeypatch.setattr(process, "free_port", lambda: next(chosen, None) or _real_free_port())
        messages: list[str] = []
        cluster = LocalCluster("short-lived", root=tmp_path).up(log=messages.append)
    assert any("was taken after it was chosen" in m for m in messages), messages
    assert taken not in {r.port for r in cluster.status()}
    assert all(r.healthy for r in cluster.status())

    pids = {r.name: r.pid for r in cluster.status()}
    cluster.down(purge=True, log=lambda _: None)
    for name, pid in pids.items():
        assert not process.is_running(pid), f"{name} (pid {pid}) still running"
    assert not cluster.dir.exists()
    # And no process of ours mentions the directory any more.
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_mentions(p, str(tmp_path))]
    assert leftovers == []


def _cmdline_mentions(proc: Path, text: str) -> bool:
    try:
        return text in (proc / "cmdline").read_bytes().decode(errors="replace") and int(proc.name) != os.getpid()
    except OSError:
        return False
