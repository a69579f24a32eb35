"""Every manifest in crds/ and operators/*/deploy/ passes a server-side dry run.

A server-side dry run goes through everything a real write does (decoding,
defaulting, schema and object validation, admission) except storing the result,
so "valid YAML that the API server would refuse" is caught here, without Docker
or minikube. The deploy/ kustomizations are rendered by the real kustomize
(``kubectl kustomize``), exactly as ``make deploy`` applies them; the make
targets' own kubectl commands are dry-run too.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from operatorlab import kubectl, paths
from operatorlab.cluster import manifests

CRD_FILES = sorted(paths.crds_dir().glob("*.yaml"))
OPERATORS = sorted(p.parent.parent.name for p in paths.operators_dir().glob("*/deploy/kustomization.yaml"))
SYSTEM_NAMESPACE = "operatorlab-system"


def _kubectl(*args: str) -> str:
    result = subprocess.run([kubectl.executable(), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"kubectl {' '.join(args)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


def render(operator: str) -> list[dict]:
    """``operators/<operator>/deploy`` as kustomize renders it."""
    out = _kubectl("kustomize", str(paths.operators_dir() / operator / "deploy"))
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def system_namespace(api_client) -> str:
    """The shared operatorlab-system namespace, which namespaced dry runs need to exist.

    Server-side applied (idempotent, safe in parallel) and never deleted: other
    tests and a deployed operator share it.
    """
    manifests.apply(api_client, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}])
    return SYSTEM_NAMESPACE


def test_there_is_something_to_check():
    assert {p.name for p in CRD_FILES} >= {"website.yaml", "namespacebaseline.yaml", "tenant.yaml", "kopf-peering.yaml"}
    assert set(OPERATORS) >= {"tenant", "website", "namespacebaseline"}


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: p.name)
def test_crds_pass_a_server_side_dry_run(api_client, path: Path):
    objects = manifests.load(path)
    assert objects and {o["kind"] for o in objects} == {"CustomResourceDefinition"}
    applied = manifests.apply(api_client, objects, dry_run=True)
    assert applied == [f"CustomResourceDefinition/{o['metadata']['name']}" for o in objects]


@pytest.mark.parametrize("operator", OPERATORS)
def test_deploy_kustomization_passes_a_server_side_dry_run(api_client, system_namespace, operator: str):
    objects = render(operator)
    # Every resource file listed in kustomization.yaml made it into the render.
    listed = yaml.safe_load((paths.operators_dir() / operator / "deploy" / "kustomization.yaml").read_text())
    assert len(objects) == len(listed["resources"])
    name = f"{operator}-operator"
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == sorted([
        ("Namespace", system_namespace), ("ServiceAccount", name), ("ClusterRole", name),
        ("ClusterRoleBinding", name), ("Deployment", name)])
    applied = manifests.apply(api_client, objects, dry_run=True)
    assert len(applied) == len(objects)


def test_the_dry_run_does_refuse_a_broken_manifest(api_client, system_namespace):
    """The check above can fail: the API server's validation runs in a dry run too."""
    (deployment,) = [o for o in render("website") if o["kind"] == "Deployment"]
    deployment["spec"]["template"]["metadata"]["labels"] = {"app.kubernetes.io/name": "something-else"}
    with pytest.raises(client.ApiException) as refused:
        manifests.apply(api_client, [deployment], dry_run=True)
    assert refused.value.status == 422 and "selector" in refused.value.body


@pytest.mark.parametrize("operator", OPERATORS)
def test_make_deploy_kubectl_commands_pass_a_server_dry_run(system_namespace, operator: str):
    out = _kubectl("apply", "--server-side", "--dry-run=server", "-k", str(paths.operators_dir() / operator / "deploy"))
    assert f"deployment.apps/{operator}-operator serverside-applied (server dry run)" in out


@pytest.mark.parametrize("operator", OPERATORS)
def test_make_undeploy_selects_only_the_operators_own_objects(operator: str):
    out = _kubectl("delete", "-k", str(paths.operators_dir() / operator / "deploy"),
                   "-l", f"app.kubernetes.io/name={operator}-operator", "--ignore-not-found",
                   "--dry-run=client", "-o", "name")
    name = f"{operator}-operator"
    assert sorted(out.split()) == sorted([
        f"serviceaccount/{name}", f"clusterrole.rbac.authorization.k8s.io/{name}",
        f"clusterrolebinding.rbac.authorization.k8s.io/{name}", f"deployment.apps/{name}"])  # not the namespace


def test_crds_apply_in_one_go_with_kubectl():
    # As make deploy does it. --force-conflicts: crds/ wins over fields another manager set
    # (here, maybe, a test that loosens a schema for a while).
    out = _kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", str(paths.crds_dir()))
    assert out.count("serverside-applied (server dry run)") == sum(len(manifests.load(p)) for p in CRD_FILES)


# --- what the rendered deploy/ promises: identity, probe, hardening ------------


@pytest.mark.parametrize("operator", OPERATORS)
def test_deployment_runs_as_its_service_account_with_the_kopf_liveness_probe(operator: str):
    objects = {o["kind"]: o for o in render(operator)}
    name = f"{operator}-operator"
    binding = objects["ClusterRoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": SYSTEM_NAMESPACE}]
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    (container,) = pod["containers"]
    assert container["image"] == f"operatorlab/{name}:dev"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probe = container["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz" and ports[probe["port"]] == 8080
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    (mount,) = container["volumeMounts"]
    assert mount["mountPath"] == "/tmp"
    assert {"name": mount["name"], "emptyDir": {}} in pod["volumes"]


@pytest.mark.parametrize("operator", OPERATORS)
def test_image_is_slim_non_root_and_serves_the_probe(operator: str):
    dockerfile = (paths.operators_dir() / operator / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+-slim$", dockerfile, re.M)
    assert re.search(r"^USER 10001:10001$", dockerfile, re.M)
    (cmd,) = re.findall(r"^CMD (\[.*\])$", dockerfile, re.M)
    argv = yaml.safe_load(cmd)
    assert argv[:2] == ["kopf", "run"] and "--liveness=http://0.0.0.0:8080/healthz" in argv
    assert "--standalone" in argv and argv[-1] == f"/app/{operator}_operator.py"
    lines = (paths.operators_dir() / operator / "requirements.txt").read_text().splitlines()
    requirements = {re.split(r"[<>=!~ ]", line)[0] for line in lines if line.strip() and not line.startswith("#")}
    assert requirements == {"kopf", "kubernetes"}  # the operator imports nothing else


def test_apply_crds_returns_once_each_crd_is_served_from_the_watch_cache(api_client, unique):
    """After apply_crds, a LIST from the watch cache (resourceVersion=0) answers at once.

    Right after a CRD is created, such a LIST waits for the cache to start (about
    a second here, a 429 "storage is (re)initializing" under load): an operator
    started then logs an ERROR. apply_crds waits that out, so it does not.
    """
    import time
    from tempfile import TemporaryDirectory

    group = f"served{unique}.operatorlab.test"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"things.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    ext = client.ApiextensionsV1Api(api_client)
    with TemporaryDirectory() as directory:
        (Path(directory) / "thing.yaml").write_text(yaml.safe_dump(crd))
        try:
            assert manifests.apply_crds(api_client, Path(directory)) == [f"CustomResourceDefinition/things.{group}"]
            started = time.monotonic()
            listed = client.CustomObjectsApi(api_client).list_cluster_custom_object(
                group, "v1", "things", resource_version="0")
            elapsed = time.monotonic() - started
        finally:
            ext.delete_custom_resource_definition(f"things.{group}")
    assert listed["items"] == []
    assert elapsed < 0.5, f"the first LIST from the watch cache took {elapsed:.2f}s: the cache was not ready"
