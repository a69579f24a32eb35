"""``operatorlab doctor`` on the real machine and cluster: every check passes on the session's healthy
cluster, and each one reports its PROBLEM (or WARNING), with its fix, on a real broken state:
a cluster that is not up, its ports taken by another program, an identity without RBAC for
CRDs, a CRD not applied, no kubectl, too little disk.
"""

from __future__ import annotations

import json
import shlex
import socket
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from operatorlab import paths, rbac
from operatorlab.cli import main
from operatorlab.cluster import ExistingCluster, LocalCluster, current, manifests
from operatorlab.cluster.local import _PORTS
from operatorlab.diagnose import doctor
from operatorlab.diagnose.report import exit_code
from operatorlab.kubectl import kubectl


def _by_title(findings, start: str):
    (found,) = [f for f in findings if f.title.startswith(start)]
    return found


def _server(api_client) -> str:
    return str(client.VersionApi(api_client).get_code().git_version)


def test_every_check_passes_on_the_healthy_session_cluster(capsys):
    cluster = current()
    findings = doctor.run(cluster)
    assert exit_code(findings) == 0, [f for f in findings if f.severity == "PROBLEM"]
    for start in ("Python", "kopf", "kubernetes", "jupyterlab", "disk:", "ports:", "cluster reachable",
                  "RBAC:", "CRDs of crds/ applied and served"):
        assert _by_title(findings, start).severity in ("OK", "WARNING"), start
    assert _by_title(findings, "cluster reachable").severity == "OK"
    assert _by_title(findings, "CRDs of crds/").severity == "OK"

    # The command itself: each check in words, exit code 0.
    argv = ["doctor"] + (["--name", cluster.name] if cluster.provider == "local" else [])
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "  OK       cluster reachable" in out and "PROBLEM" not in out
    assert out.rstrip().splitlines()[-1].startswith("no problems")


def test_a_cluster_that_is_not_up_is_a_problem_and_its_checks_wait(tmp_path):
    stopped = LocalCluster("doctor-down", root=tmp_path)
    findings = doctor.run(stopped)
    down = _by_title(findings, "the local cluster 'doctor-down' is not up")
    assert down.severity == "PROBLEM" and down.fix == "operatorlab cluster up --name doctor-down"
    assert _by_title(findings, "not checked until the cluster answers").severity == "INFO"
    assert not [f for f in findings if f.title.startswith(("RBAC", "CRDs"))]
    assert exit_code(findings) == 1


def test_ports_a_stopped_cluster_remembers_taken_by_another_program(tmp_path):
    stopped = LocalCluster("doctor-ports", root=tmp_path)
    assert doctor.check_ports(stopped).severity == "OK"  # nothing remembered: ports are chosen at start
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with socket.socket() as spare:
            spare.bind(("127.0.0.1", 0))
            others = spare.getsockname()[1]
        # What the cluster wrote when it last ran (state.json, its own record): its ports.
        stopped.dir.mkdir(parents=True)
        ports = dict.fromkeys(_PORTS, others) | {"kube-apiserver": port}
        (stopped.dir / "state.json").write_text(json.dumps({"ports": ports}))
        finding = doctor.check_ports(LocalCluster("doctor-ports", root=tmp_path))
        assert finding.severity == "WARNING" and f"kube-apiserver {port}" in finding.title
        assert finding.fix == "operatorlab cluster up --name doctor-ports"
    assert doctor.check_ports(LocalCluster("doctor-ports", root=tmp_path)).severity == "OK"


def test_an_identity_without_rbac_for_crds_is_a_problem_until_an_admin_binds_it(api_client, namespace, tmp_path):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(
        name="learner")))
    kubeconfig = rbac.service_account_kubeconfig(api_client, namespace, "learner", tmp_path / "learner.kubeconfig")
    learner = config.new_client_from_config(config_file=str(kubeconfig))
    assert doctor.check_crd_rbac(api_client).severity == "OK"
    denied = doctor.check_crd_rbac(learner)
    assert denied.severity == "PROBLEM"
    assert f"system:serviceaccount:{namespace}:learner may not create CRDs" in denied.title
    assert denied.fix and f"--serviceaccount={namespace}:learner" in denied.fix
    binding = shlex.split(denied.fix)[3]
    try:
        kubectl(shlex.split(denied.fix)[1:], echo=False)  # the fix, as an admin runs it
        assert doctor.check_crd_rbac(learner).severity == "OK"
    finally:
        client.RbacAuthorizationV1Api(api_client).delete_cluster_role_binding(binding)


def test_a_crd_of_crds_not_applied_or_not_serving_a_version_is_a_problem(api_client, unique, tmp_path):
    group = f"doctor-{unique}.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"gizmos.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    crds_dir = tmp_path / "crds"
    crds_dir.mkdir()
    (crds_dir / "gizmo.yaml").write_text(yaml.safe_dump(crd))
    cluster = current()
    missing = doctor.check_crds(api_client, cluster, crds_dir)
    assert missing.severity == "PROBLEM" and f"gizmos.{group} not applied" in missing.title
    assert missing.fix and missing.fix.startswith("operatorlab cluster up")
    try:
        manifests.apply(api_client, [crd])
        manifests.wait_crds_established(api_client, [f"gizmos.{group}"])
        assert doctor.check_crds(api_client, cluster, crds_dir).severity == "OK"
        wanted = {**crd, "spec": {**crd["spec"], "versions": [
            *crd["spec"]["versions"], {"name": "v2", "served": True, "storage": False,
                                       "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
        (crds_dir / "gizmo.yaml").write_text(yaml.safe_dump(wanted))
        assert "does not serve v2" in doctor.check_crds(api_client, cluster, crds_dir).title
    finally:
        client.ApiextensionsV1Api(api_client).delete_custom_resource_definition(f"gizmos.{group}")
    # The project's own crds/ are applied on the session cluster (by conftest.py).
    assert doctor.check_crds(api_client, cluster, paths.crds_dir()).severity == "OK"


def test_no_kubectl_anywhere_is_a_problem_for_an_existing_cluster(api_client, tmp_path):
    server = _server(api_client)
    existing = ExistingCluster()
    (missing,) = doctor.check_kubectl(existing, server, {"PATH": str(tmp_path)}, built=tmp_path / "kubectl")
    assert missing.severity == "PROBLEM" and missing.title == "no kubectl: none on PATH, none built in the cache"
    assert missing.fix == "make setup"
    from operatorlab.kubectl import executable

    real = Path(executable())
    (on_path,) = doctor.check_kubectl(existing, server, {"PATH": str(real.parent)}, built=tmp_path / "kubectl")
    assert on_path.severity in ("OK", "WARNING") and on_path.title.startswith(f"kubectl {real} is v1.")
    (built,) = doctor.check_kubectl(existing, server, {"PATH": str(tmp_path)}, built=real)
    assert built.title.startswith(f"kubectl built for the lab {real} is v1.")


@pytest.mark.local_cluster
def test_the_local_clusters_own_kubectl_is_checked_whatever_path_holds(api_client, tmp_path):
    cluster = current()
    findings = doctor.check_kubectl(cluster, _server(api_client), {"PATH": str(tmp_path)}, built=tmp_path / "k")
    if cluster.provider == "local":  # `operatorlab cluster env` puts the kubectl built with it first
        assert [(f.severity, f.title.split(" /")[0]) for f in findings] == [("OK", "the cluster's kubectl")]
    else:  # an existing cluster has only the shell's
        assert [f.title for f in findings] == ["no kubectl: none on PATH, none built in the cache"]


def test_too_little_disk_is_a_problem_on_the_real_filesystem():
    cache = paths.cache_root()
    assert doctor.check_disk({cache: 1}).severity == "OK"
    short = doctor.check_disk({cache: 10**18})
    assert short.severity == "PROBLEM" and str(cache) in short.title and "OPERATORLAB_CACHE" in (short.fix or "")
