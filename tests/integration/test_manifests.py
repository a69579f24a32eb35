"""Every manifest in crds/ and operators/*/deploy/ passes a server-side dry run, and
``make deploy`` refuses to go on with one that does not.

A server-side dry run goes through everything a real write does (decoding,
defaulting, schema and object validation, admission, Pod Security) except storing
the result, so "valid YAML that the API server would refuse" is caught here,
without Docker or minikube. The deploy/ kustomizations are rendered by the real
kustomize (``kubectl kustomize``), exactly as ``make deploy`` applies them; the
make targets' own kubectl commands and ``operators/manifests.sh`` (the checks
``make deploy`` runs first) run against the test cluster too, and so does
``make deploy`` itself with a broken manifest.

What the NamespaceBaseline kustomization promises (its own namespace, guarded from
the first apply by the baseline's default-deny and one egress door, and a
default-deny the operator takes as its own) is proven against the real operator.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from operatorlab import kubectl, paths
from operatorlab.cluster import manifests
from operatorlab.operators import OperatorProcess, load_module, operator_path
from operatorlab.wait import eventually

CRD_FILES = sorted(paths.crds_dir().glob("*.yaml"))
OPERATORS = sorted(p.parent.parent.name for p in paths.operators_dir().glob("*/deploy/kustomization.yaml"))
SHARED_NAMESPACE = "operatorlab-system"  # tenant and website
NSB_NAMESPACE = "namespacebaseline-system"  # the NamespaceBaseline operator's own
NSB = ("hedronite.io", "v1alpha1", "namespacebaselines")
DENY, EGRESS = "baseline-default-deny", "namespacebaseline-operator-apiserver"
MANIFESTS_SH = paths.operators_dir() / "manifests.sh"
ROOT = paths.operators_dir().parent


def namespace_of(operator: str) -> str:
    return NSB_NAMESPACE if operator == "namespacebaseline" else SHARED_NAMESPACE


def _kubectl(*args: str, stdin: str | None = None) -> str:
    result = subprocess.run([kubectl.executable(), *args], capture_output=True, text=True, timeout=60, input=stdin)
    assert result.returncode == 0, f"kubectl {' '.join(args)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """Run a command with $KUBECTL set to the cluster's kubectl (and $KUBECONFIG inherited)."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "KUBECTL": kubectl.executable(), **env})


def manifests_sh(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    return _run(["bash", str(MANIFESTS_SH), *map(str, args)], **env)


def render(operator: str | Path) -> list[dict]:
    """``operators/<operator>/deploy`` (or a kustomization directory) as kustomize renders it."""
    directory = operator if isinstance(operator, Path) else paths.operators_dir() / operator / "deploy"
    return [doc for doc in yaml.safe_load_all(_kubectl("kustomize", str(directory))) if doc]


def expected_objects(operator: str) -> list[tuple[str, str]]:
    name = f"{operator}-operator"
    objects = [("Namespace", namespace_of(operator)), ("ServiceAccount", name), ("ClusterRole", name),
               ("ClusterRoleBinding", name), ("Deployment", name)]
    if operator == "namespacebaseline":
        objects += [("NetworkPolicy", DENY), ("NetworkPolicy", EGRESS), ("NamespaceBaseline", NSB_NAMESPACE)]
    return sorted(objects)


def copy_deploy(operator: str, to: Path) -> Path:
    """A private copy of ``operators/<operator>/deploy`` to break or rename."""
    return Path(shutil.copytree(paths.operators_dir() / operator / "deploy", to))


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


@pytest.fixture(scope="module")
def operator_namespaces(api_client) -> list[str]:
    """Every operator's Namespace, as its kustomization renders it (labels included), applied for real.

    Namespaced dry runs need their namespace to exist. Server-side applied
    (idempotent, safe in parallel) and never deleted: other tests and a deployed
    operator share them.
    """
    namespaces = [o for operator in OPERATORS for o in render(operator) if o["kind"] == "Namespace"]
    manifests.apply(api_client, namespaces)
    return sorted({ns["metadata"]["name"] for ns in namespaces})


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
def test_deploy_kustomization_passes_a_server_side_dry_run(api_client, operator_namespaces, operator: str):
    objects = render(operator)
    # Every resource file listed in kustomization.yaml made it into the render.
    listed = yaml.safe_load((paths.operators_dir() / operator / "deploy" / "kustomization.yaml").read_text())
    assert len(objects) == len(listed["resources"])
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == expected_objects(operator)
    applied = manifests.apply(api_client, objects, dry_run=True)
    assert len(applied) == len(objects)


@pytest.mark.parametrize("operator", OPERATORS)
def test_everything_namespaced_is_in_the_operators_namespace(api_client, operator: str):
    """Nothing lands in whatever namespace the kubeconfig names, and nothing cluster-scoped carries one."""
    from kubernetes.dynamic import DynamicClient

    resources = DynamicClient(api_client).resources
    for obj in render(operator):
        namespaced = resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).namespaced
        where = obj["metadata"].get("namespace")
        assert where == (namespace_of(operator) if namespaced else None), f"{obj['kind']} {obj['metadata']['name']}"


def test_the_dry_run_does_refuse_a_broken_manifest(api_client, operator_namespaces):
    """The check above can fail: the API server's validation runs in a dry run too."""
    (deployment,) = [o for o in render("website") if o["kind"] == "Deployment"]
    deployment["spec"]["template"]["metadata"]["labels"] = {"app.kubernetes.io/name": "something-else"}
    with pytest.raises(client.ApiException) as refused:
        manifests.apply(api_client, [deployment], dry_run=True)
    assert refused.value.status == 422 and "selector" in refused.value.body


@pytest.mark.parametrize("operator", OPERATORS)
def test_make_deploy_kubectl_commands_pass_a_server_dry_run(operator_namespaces, operator: str):
    # As make deploy applies it: kubectl kustomize | kubectl apply --server-side -f -
    rendered = _kubectl("kustomize", str(paths.operators_dir() / operator / "deploy"))
    out = _kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", stdin=rendered)
    assert f"deployment.apps/{operator}-operator serverside-applied (server dry run)" in out
    assert out.count("serverside-applied (server dry run)") == len(expected_objects(operator))


@pytest.mark.parametrize("operator", OPERATORS)
def test_make_undeploy_selects_only_the_operators_own_objects(operator: str):
    rendered = _kubectl("kustomize", str(paths.operators_dir() / operator / "deploy"))
    out = _kubectl("delete", "-f", "-", "-l", f"app.kubernetes.io/name={operator}-operator", "--ignore-not-found",
                   "--dry-run=client", "-o", "name", stdin=rendered)
    name = f"{operator}-operator"
    own = [f"serviceaccount/{name}", f"clusterrole.rbac.authorization.k8s.io/{name}",
           f"clusterrolebinding.rbac.authorization.k8s.io/{name}", f"deployment.apps/{name}"]
    if operator == "namespacebaseline":
        # Its own namespace goes (the policies in it with it), and the egress door, and the baseline,
        # which undeploy deletes first (delete-custom-resources), while the operator still runs.
        own += [f"namespace/{NSB_NAMESPACE}", f"networkpolicy.networking.k8s.io/{EGRESS}",
                f"namespacebaseline.hedronite.io/{NSB_NAMESPACE}"]
    assert sorted(out.split()) == sorted(own)  # never the shared operatorlab-system


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
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": namespace_of(operator)}]
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


# --- Pod Security: every operator's Pod passes `restricted` -------------------


@pytest.fixture
def restricted_namespace(core, unique):
    """A fresh namespace that enforces (and warns about) the restricted Pod Security Standard."""
    name = f"psa-{unique}"
    level = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn")}
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=level)))
    yield name
    core.delete_namespace(name)


def _pod_from_template(deployment: dict, namespace: str) -> dict:
    """The Pod the Deployment's ReplicaSet would create (its template), in ``namespace``."""
    template = deployment["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": deployment["metadata"]["name"], "namespace": namespace,
                         "labels": template["metadata"]["labels"]},
            "spec": template["spec"]}


def _deployment_in(deployment: dict, namespace: str) -> str:
    """The Deployment as YAML, moved to ``namespace``."""
    return yaml.safe_dump({**deployment, "metadata": {**deployment["metadata"], "namespace": namespace}})


@pytest.mark.parametrize("operator", OPERATORS)
def test_every_operator_pod_passes_the_restricted_pod_security_standard(core, restricted_namespace, operator: str):
    """PodSecurity admission enforces on Pods only (on a Deployment it merely warns,
    https://kubernetes.io/docs/concepts/security/pod-security-admission/#workload-resources-and-pod-templates),
    so a Pod built from the template is dry-run created where `restricted` is enforced."""
    (deployment,) = [o for o in render(operator) if o["kind"] == "Deployment"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    # The ServiceAccount admission plugin refuses a Pod whose ServiceAccount does not exist.
    core.create_namespaced_service_account(restricted_namespace, {"metadata": {"name": account}})
    pod = core.create_namespaced_pod(restricted_namespace, _pod_from_template(deployment, restricted_namespace),
                                     dry_run="All")
    assert pod.metadata.namespace == restricted_namespace and pod.spec.service_account_name == account
    # And the Deployment itself draws no Pod Security warning there (kubectl turns one into an error).
    out = _kubectl("--warnings-as-errors", "apply", "--server-side", "--dry-run=server", "-f", "-",
                   stdin=_deployment_in(deployment, restricted_namespace))
    assert "serverside-applied (server dry run)" in out


def test_restricted_refuses_an_operator_pod_that_may_run_as_root(core, restricted_namespace):
    """The check above can fail: without runAsNonRoot the very same Pod is refused, and the Deployment warned about."""
    (deployment,) = [o for o in render("namespacebaseline") if o["kind"] == "Deployment"]
    del deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"]
    core.create_namespaced_service_account(restricted_namespace, {"metadata": {"name": "namespacebaseline-operator"}})
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(restricted_namespace, _pod_from_template(deployment, restricted_namespace),
                                   dry_run="All")
    message = json.loads(refused.value.body)["message"]
    assert refused.value.status == 403
    assert 'violates PodSecurity "restricted:latest": runAsNonRoot != true' in message, message
    warned = subprocess.run([kubectl.executable(), "--warnings-as-errors", "apply", "--server-side",
                             "--dry-run=server", "-f", "-"], input=_deployment_in(deployment, restricted_namespace),
                            capture_output=True, text=True, timeout=60)
    assert warned.returncode != 0 and "would violate PodSecurity" in warned.stderr


# --- the NamespaceBaseline operator's own namespace, guarded from the start ----


def test_namespacebaseline_runs_in_its_own_namespace_under_restricted_pod_security():
    (namespace,) = [o for o in render("namespacebaseline") if o["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == NSB_NAMESPACE != SHARED_NAMESPACE
    labels = namespace["metadata"]["labels"]
    assert {labels[f"pod-security.kubernetes.io/{mode}"] for mode in ("enforce", "warn", "audit")} == {"restricted"}


def test_namespacebaseline_guards_come_before_what_runs_in_the_namespace():
    """Applied in this order (kustomize's fifo): no moment with the operator running and its namespace open."""
    kinds = [o["kind"] for o in render("namespacebaseline")]
    assert kinds[0] == "Namespace"
    assert max(i for i, kind in enumerate(kinds) if kind == "NetworkPolicy") < kinds.index("Deployment")


def test_the_kustomizations_default_deny_is_the_one_the_operator_would_make():
    """Same name, spec and mark (labels) as the operator's own, for the baseline the kustomization ships."""
    operator = load_module("namespacebaseline")
    objects = {(o["kind"], o["metadata"]["name"]): o for o in render("namespacebaseline")}
    baseline = objects[("NamespaceBaseline", NSB_NAMESPACE)]
    policy = objects[("NetworkPolicy", DENY)]
    made = operator.deny_policy_manifest(baseline["metadata"]["name"], NSB_NAMESPACE)
    assert (policy["metadata"]["name"], policy["metadata"]["namespace"]) == (made["metadata"]["name"], NSB_NAMESPACE)
    assert policy["spec"] == made["spec"]
    assert policy["metadata"]["labels"].items() >= made["metadata"]["labels"].items()
    # allowDNS false: the operator needs no DNS, so its namespace gets no DNS door.
    assert operator.parse_baseline(baseline["metadata"]["name"], baseline["spec"]).allow_dns is False


def test_the_egress_door_opens_only_the_api_server_ports_for_the_operator_pod():
    objects = {(o["kind"], o["metadata"]["name"]): o for o in render("namespacebaseline")}
    door = objects[("NetworkPolicy", EGRESS)]
    template = objects[("Deployment", "namespacebaseline-operator")]["spec"]["template"]
    selector = door["spec"]["podSelector"]["matchLabels"]
    assert selector and template["metadata"]["labels"].items() >= selector.items()
    assert door["spec"]["policyTypes"] == ["Egress"]  # no ingress door: the kubelet's probe needs none
    assert door["spec"]["egress"] == [{"ports": [{"protocol": "TCP", "port": port} for port in (443, 6443, 8443)]}]


def test_the_baseline_selects_exactly_the_operators_namespace(core, namespace, operator_namespaces):
    """Through kubernetes.io/metadata.name, which the API server sets on every namespace to its name."""
    (baseline,) = [o for o in render("namespacebaseline") if o["kind"] == "NamespaceBaseline"]
    assert "namespace" not in baseline["metadata"]  # cluster-scoped
    selector = baseline["spec"]["namespaceLabel"]
    # Another namespace cannot be labelled into it: the API server puts its own name back.
    core.patch_namespace(namespace, {"metadata": {"labels": {"kubernetes.io/metadata.name": NSB_NAMESPACE}}})
    assert core.read_namespace(namespace).metadata.labels["kubernetes.io/metadata.name"] == namespace
    assert [ns.metadata.name for ns in core.list_namespace(label_selector=selector).items] == [NSB_NAMESPACE]


@pytest.mark.xdist_group("nsb-operator")  # a cluster-wide NamespaceBaseline operator: one at a time
def test_the_operator_takes_the_kustomizations_default_deny_as_its_own(api_client, core, custom, operator_namespaces,
                                                                         tmp_path):
    """The chicken and the egg: the policies exist before the operator (and the baseline) do; once the
    operator runs, it counts the default-deny as its baseline's, writes nothing, and leaves the door alone."""
    networking = client.NetworkingV1Api(api_client)
    guards = [o for o in render("namespacebaseline")
              if o["kind"] in ("Namespace", "NetworkPolicy", "NamespaceBaseline")]
    manifests.apply(api_client, guards)
    before = {p.metadata.name: p.metadata.resource_version
              for p in networking.list_namespaced_network_policy(NSB_NAMESPACE).items}
    assert set(before) == {DENY, EGRESS}
    op = OperatorProcess(operator_path("namespacebaseline"), env={"NSB_RESYNC_SECONDS": "3600"},
                         log_path=tmp_path / "operator.log").start()
    try:
        def ready() -> dict | None:
            status = custom.get_cluster_custom_object(*NSB, NSB_NAMESPACE).get("status", {})
            conditions = {c["type"]: c for c in status.get("conditions", [])}
            return status if conditions.get("Ready", {}).get("status") == "True" else None

        status = eventually(ready, timeout=30, message="the NamespaceBaseline becomes Ready")
        uid = custom.get_cluster_custom_object(*NSB, NSB_NAMESPACE)["metadata"]["uid"]
        time.sleep(1)  # anything the reconcile would write, it writes before it records Ready; a margin all the same
        after = {p.metadata.name: p.metadata.resource_version
                 for p in networking.list_namespaced_network_policy(NSB_NAMESPACE).items}
        events = core.list_namespaced_event("default", field_selector=f"involvedObject.uid={uid}").items
    finally:
        op.stop()
        custom.patch_cluster_custom_object(*NSB, NSB_NAMESPACE, {"metadata": {"finalizers": None}})
        custom.delete_cluster_custom_object(*NSB, NSB_NAMESPACE)
    assert (status["phase"], status["namespaces"], status["policies"]) == ("Ready", 1, 1)
    assert after == before  # nothing written, no DNS policy added, the door untouched
    assert not {e.reason for e in events} & {"PolicyCreated", "PolicyUpdated", "PolicyAdopted", "NameTaken"}


# --- operators/manifests.sh: what make deploy checks before anything else ------


@pytest.mark.parametrize("operator", OPERATORS)
def test_manifests_check_passes_every_operator_strictly(operator_namespaces, operator: str):
    done = manifests_sh("check", "--strict", paths.crds_dir(), paths.operators_dir() / operator / "deploy")
    assert done.returncode == 0, done.stderr
    count = len(expected_objects(operator))
    assert f"deploy: {count} of {count} object(s) pass a server-side dry run" in done.stderr


def test_manifests_check_refuses_a_broken_manifest_with_the_servers_words(tmp_path, operator_namespaces):
    deploy = copy_deploy("website", tmp_path / "deploy")
    edit(deploy / "deployment.yaml", "      labels:\n        app.kubernetes.io/name: website-operator",
         "      labels:\n        app.kubernetes.io/name: something-else")
    done = manifests_sh("check", paths.crds_dir(), deploy)
    assert done.returncode == 1
    assert f"the API server refuses {deploy} (server-side dry run; nothing was applied)" in done.stderr
    assert "`selector` does not match template `labels`" in done.stderr


def test_manifests_check_refuses_a_custom_resource_its_crd_refuses(tmp_path, operator_namespaces):
    deploy = copy_deploy("namespacebaseline", tmp_path / "deploy")
    edit(deploy / "baseline.yaml", "namespaceLabel: kubernetes.io/metadata.name=", "namespaceLabel: no label ")
    done = manifests_sh("check", paths.crds_dir(), deploy)
    assert done.returncode == 1 and "spec.namespaceLabel" in done.stderr and "should match" in done.stderr


def test_manifests_check_counts_a_pod_security_warning_as_an_error(tmp_path, operator_namespaces):
    deploy = copy_deploy("namespacebaseline", tmp_path / "deploy")
    edit(deploy / "deployment.yaml", "        runAsNonRoot: true\n", "")
    done = manifests_sh("check", paths.crds_dir(), deploy)
    assert done.returncode == 1
    assert 'would violate PodSecurity "restricted:latest": runAsNonRoot != true' in done.stderr


def test_manifests_check_before_a_first_deploy_names_what_it_cannot_judge_yet(tmp_path, core, unique):
    """A namespace not created yet: its objects are dry-run in `default` (and still refused when broken);
    --strict, which make deploy runs once the namespace exists, does not let them through."""
    fresh = f"first-deploy-{unique}"
    deploy = copy_deploy("tenant", tmp_path / "deploy")
    edit(deploy / "kustomization.yaml", f"namespace: {SHARED_NAMESPACE}", f"namespace: {fresh}")
    done = manifests_sh("check", paths.crds_dir(), deploy)
    assert done.returncode == 0, done.stderr
    assert f"namespace {fresh} does not exist yet: its 2 object(s) were dry-run in namespace default" in done.stderr
    strict = manifests_sh("check", "--strict", paths.crds_dir(), deploy)
    assert strict.returncode == 1 and f'namespaces "{fresh}" not found' in strict.stderr
    edit(deploy / "deployment.yaml", "  replicas: 1", "  replicas: -1")
    broken = manifests_sh("check", paths.crds_dir(), deploy)
    assert broken.returncode == 1 and "spec.replicas" in broken.stderr
    with pytest.raises(client.ApiException) as absent:  # a check applies nothing
        core.read_namespace(fresh)
    assert absent.value.status == 404


def test_manifests_check_before_a_first_deploy_waits_for_a_crd_not_installed_yet(tmp_path, unique):
    group = f"first{unique}.operatorlab.test"
    crds = tmp_path / "crds"
    crds.mkdir()
    (crds / "thing.yaml").write_text(yaml.safe_dump({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{group}"},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}))
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    (deploy / "kustomization.yaml").write_text("resources: [thing.yaml]\n")
    (deploy / "thing.yaml").write_text(yaml.safe_dump({"apiVersion": f"{group}/v1", "kind": "Thing",
                                                       "metadata": {"name": "one"}}))
    done = manifests_sh("check", crds, deploy)
    assert done.returncode == 0, done.stderr
    assert "Thing one: its CRD is not installed yet" in done.stderr
    strict = manifests_sh("check", "--strict", crds, deploy)
    assert strict.returncode == 1 and "ensure CRDs are installed first" in strict.stderr


def _repo_copy(tmp_path: Path, operator: str, crds: str = "*.yaml") -> Path:
    """What `make deploy OPERATOR=<operator>` reads, copied: the Makefile, crds/ (those matching ``crds``),
    manifests.sh, the operator."""
    repo = tmp_path / "repo"
    (repo / "operators").mkdir(parents=True)
    (repo / "crds").mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, repo / name)
    for crd in paths.crds_dir().glob(crds):
        shutil.copy(crd, repo / "crds" / crd.name)
    shutil.copy(MANIFESTS_SH, repo / "operators" / "manifests.sh")
    shutil.copytree(paths.operators_dir() / operator, repo / "operators" / operator)
    return repo


def test_make_deploy_stops_at_a_broken_manifest_before_building_or_applying_anything(tmp_path, core, unique):
    """The real Makefile, in a copy of the repository whose Deployment the API server refuses.

    DEPLOY_VIA is empty, so a deploy that got past its checks would stop at the image
    build instead, saying so: the unbroken copy does, which shows the broken one stopped earlier.
    """
    fresh = f"broken-deploy-{unique}"
    repo = _repo_copy(tmp_path, "namespacebaseline")
    deploy = repo / "operators" / "namespacebaseline" / "deploy"
    edit(deploy / "kustomization.yaml", f"namespace: {NSB_NAMESPACE}", f"namespace: {fresh}")

    def make_deploy() -> subprocess.CompletedProcess[str]:
        return _run(["make", "-C", str(repo), "--no-print-directory", "deploy", "OPERATOR=namespacebaseline",
                     "DEPLOY_VIA=", f"KUBECTL={kubectl.executable()}"])

    passed = make_deploy()
    assert passed.returncode == 2 and "make deploy builds the image into minikube or kind" in passed.stderr
    edit(deploy / "deployment.yaml", "  replicas: 1", "  replicas: -1")
    stopped = make_deploy()
    assert stopped.returncode != 0
    assert "make deploy: stopped before building the image or applying anything" in stopped.stderr
    assert "spec.replicas" in stopped.stderr and "builds the image" not in stopped.stderr
    with pytest.raises(client.ApiException) as absent:
        core.read_namespace(fresh)
    assert absent.value.status == 404


@pytest.mark.xdist_group("nsb-operator")  # the baseline namespacebaseline-system, as in the operator test above
def test_make_deploy_then_undeploy_on_a_fresh_namespace(api_client, core, custom, tmp_path, unique):
    """The real Makefile, every step but the image build (kwok plays the kubelet: no image needed).

    In a copy of the repository whose namespace is new to the cluster: the first
    deploy's checks name what waits for the namespace, --strict judges it once the
    namespace exists, the Pod is admitted under `restricted`, a second deploy changes
    nothing, and undeploy removes the baseline, the operator's objects and the namespace.
    """
    fresh = f"nsb-deploy-{unique}"
    # Only its own CRD: make deploy applies crds/ for real, and tests of the other operators
    # loosen their CRDs for a while (the NamespaceBaseline's are in this test's xdist group).
    repo = _repo_copy(tmp_path, "namespacebaseline", crds="namespacebaseline.yaml")
    deploy = repo / "operators" / "namespacebaseline" / "deploy"
    edit(deploy / "kustomization.yaml", f"namespace: {NSB_NAMESPACE}", f"namespace: {fresh}")
    edit(deploy / "clusterrolebinding.yaml", f"namespace: {NSB_NAMESPACE}", f"namespace: {fresh}")
    rbac_api = client.RbacAuthorizationV1Api(api_client)

    def make(target: str) -> subprocess.CompletedProcess[str]:
        done = _run(["make", "-C", str(repo), "--no-print-directory", target, "OPERATOR=namespacebaseline",
                     "DEPLOY_VIA=none", f"KUBECTL={kubectl.executable()}"])
        assert done.returncode == 0, f"make {target}:\n{done.stdout}{done.stderr}"
        return done

    try:
        first = make("deploy")
        waits = f"namespace {fresh} does not exist yet: its 4 object(s) were dry-run in namespace default"
        assert waits in first.stderr
        assert 'deployment "namespacebaseline-operator" successfully rolled out' in first.stdout
        namespace = core.read_namespace(fresh)
        assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
        selector = "app.kubernetes.io/name=namespacebaseline-operator"
        (pod,) = core.list_namespaced_pod(fresh, label_selector=selector).items
        assert pod.spec.security_context.run_as_non_root is True  # admitted where restricted is enforced
        networking = client.NetworkingV1Api(api_client)
        assert {p.metadata.name for p in networking.list_namespaced_network_policy(fresh).items} == {DENY, EGRESS}
        assert custom.get_cluster_custom_object(*NSB, NSB_NAMESPACE)["spec"]["allowDNS"] is False
        again = make("deploy")
        assert "not judged in full yet" not in again.stderr
        make("undeploy")
        for read in (lambda: custom.get_cluster_custom_object(*NSB, NSB_NAMESPACE),
                     lambda: rbac_api.read_cluster_role("namespacebaseline-operator"),
                     lambda: rbac_api.read_cluster_role_binding("namespacebaseline-operator"),
                     lambda: core.read_namespace(fresh)):
            with pytest.raises(client.ApiException) as gone:
                read()
            assert gone.value.status == 404
        assert client.ApiextensionsV1Api(api_client).read_custom_resource_definition(
            "namespacebaselines.hedronite.io")  # the CRDs stay
    finally:
        _run(["make", "-C", str(repo), "--no-print-directory", "undeploy", "OPERATOR=namespacebaseline",
              f"KUBECTL={kubectl.executable()}"])


@pytest.mark.xdist_group("nsb-operator")  # NamespaceBaselines: no NamespaceBaseline operator may add its finalizer
def test_undeploy_deletes_the_custom_resources_first_and_waits_for_them(api_client, custom, tmp_path, unique):
    """Only the kustomization's custom resources; and one held by a finalizer (no operator to remove it) is reported."""
    free, held = f"undeploy-{unique}-free", f"undeploy-{unique}-held"
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    objects = [
        {"apiVersion": "hedronite.io/v1alpha1", "kind": "NamespaceBaseline",
         "metadata": {"name": name, **({"finalizers": ["operatorlab.test/held"]} if name == held else {})},
         "spec": {"namespaceLabel": f"nsb-test={unique}"}} for name in (free, held)]
    objects.append({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": f"kept-{unique}", "namespace": "default"}})
    (deploy / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    (deploy / "kustomization.yaml").write_text("resources: [objects.yaml]\n")
    manifests.apply(api_client, objects)
    try:
        done = manifests_sh("delete-custom-resources", paths.crds_dir(), deploy, DELETE_TIMEOUT="3s")
        assert done.returncode == 1
        assert "kopf's finalizer on them" in done.stderr and "--type=merge" in done.stderr
        with pytest.raises(client.ApiException) as gone:
            custom.get_cluster_custom_object(*NSB, free)
        assert gone.value.status == 404
        assert custom.get_cluster_custom_object(*NSB, held)["metadata"]["deletionTimestamp"]
        client.CoreV1Api(api_client).read_namespaced_config_map(f"kept-{unique}", "default")  # not a custom resource
    finally:
        custom.patch_cluster_custom_object(*NSB, held, {"metadata": {"finalizers": None}})
        client.CoreV1Api(api_client).delete_namespaced_config_map(f"kept-{unique}", "default")
    again = manifests_sh("delete-custom-resources", paths.crds_dir(), deploy)
    assert again.returncode == 0, again.stderr


def test_apply_crds_returns_once_each_crd_is_served_from_the_watch_cache(api_client, unique):
    """After apply_crds, a LIST from the watch cache (resourceVersion=0) answers at once.

    Right after a CRD is created, such a LIST waits for the cache to start (about
    a second here, a 429 "storage is (re)initializing" under load): an operator
    started then logs an ERROR. apply_crds waits that out, so it does not.
    """
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
