"""``operatorlab why`` against real broken states, each made on the cluster the way a learner meets it:

- a healthy Tenant, reconciled by the real Tenant operator: "handlers completed", nothing wrong;
- a Tenant whose namespace name is taken by a hand-made namespace: the reconcile handler backs
  off (``NameTaken``): the retry time, the error and the condition, and the fix the operator's
  message names, which then heals it;
- the ``stuck-finalizer`` lab (operator killed, Tenant deleted): stuck Terminating, no operator
  seen, start it (or strip the finalizer, at a cost); the lab's own solve then proves the fix;
- the ``crd-group-mismatch`` lab: an operator runs, yet the new Tenant was never handled;
- a peering pause made with ``kopf freeze``: the operator handles nothing; ``kopf resume`` heals;
- a ServiceAccount whose ClusterRole lacks ``watch``: denied, with the rule that fixes it;
- a version of a CRD that is not served, and a schema that prunes status: a real write loses
  a field, the fixes make the server keep it.

The module runs on a cluster of its own (``why``), in one xdist group: its Tenant operators
must not meet the session's (Tenants are cluster-scoped: two operators would both reconcile
every one), and it then runs beside the session's Tenant tests instead of after them. On a
cluster someone else runs it joins the session's ``tenant-operator`` group on that cluster.
"""

from __future__ import annotations

import copy
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from operatorlab import rbac, tenants
from operatorlab.cli import main
from operatorlab.cluster import current, manifests
from operatorlab.diagnose import evidence, kopfstate, why
from operatorlab.diagnose.report import exit_code
from operatorlab.kubectl import kubectl
from operatorlab.labs import registry, runner
from operatorlab.operators import OperatorProcess, operator_path
from operatorlab.wait import eventually
from tests.labs.clusters import ON_EXISTING_CLUSTER, module_cluster

SYSTEM_NAMESPACE = "operatorlab-system"

pytestmark = pytest.mark.xdist_group("tenant-operator" if ON_EXISTING_CLUSTER else "why")


@pytest.fixture(scope="module", autouse=True)
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This module's cluster (tests/conftest.py's api_client, core and custom then talk to it)."""
    yield from module_cluster("why", tmp_path_factory)


def _why(api_client, target: str, **kw):
    facts = evidence.gather(api_client, target, **kw)
    return facts, why.diagnose(facts)


def _settled(api_client, target: str) -> evidence.Facts | None:
    """The facts once kopf completed a cycle for the object as it is and nothing is wrong (else None:
    poll again). kopf writes status and its annotations in two patches, so one may show first."""
    facts = evidence.gather(api_client, target)
    return facts if why.settled(facts) and not _problems(why.diagnose(facts)) else None


def _problems(findings) -> list[str]:
    return [f.title for f in findings if f.severity == "PROBLEM"]


def _run_fix(command: str) -> None:
    """Run a finding's fix as a learner would paste it (kubectl against the session's cluster)."""
    args = shlex.split(command)
    assert args[0] == "kubectl", command
    kubectl(args[1:], echo=False)


def _lab(lab_id: str, tmp_path):
    """A lab on the session's cluster, its state and learner files in tmp_path (not the checkout's labs/)."""
    (tmp_path / "labs" / lab_id).mkdir(parents=True)  # where a variant lab writes the learner's copy
    ctx = runner.context(current(), state_dir=tmp_path / "state", workdir_root=tmp_path / "labs")
    return runner.create(registry.get(lab_id), ctx)


def test_a_healthy_tenant_says_its_handlers_completed(api_client, kubeconfig, tenant_set, tmp_path, capsys):
    with OperatorProcess(operator_path("tenant"), kubeconfig=kubeconfig, log_path=tmp_path / "op.log") as op:
        name = tenant_set.name("ok")
        tenant_set.create(name)
        tenant_set.wait_converged([name], "1")
        facts = eventually(lambda: _settled(api_client, f"tenant/{name}"), timeout=30,
                           message="kopf completed its cycle")
        findings = why.diagnose(facts)
        assert _problems(findings) == [] and not [f for f in findings if f.severity == "WARNING"]
        ok = [f.title for f in findings if f.severity == "OK"]
        assert "kopf's handlers completed for the object as it is now" in ok
        assert "the operator reports Ready=True (Reconciled): " in "\n".join(ok)
        assert "CRD tenants.hedronite.io serves v1; its schema keeps what is written to status" in ok
        # Ours, and (under make test) other tests' operators on this cluster, which handle other kinds.
        seen = [f.title for f in findings if f.title.startswith("operator seen")]
        ours = f"operator seen: process {op.pid} on this machine: kopf run {operator_path('tenant')}"
        assert ours in seen and all(t.endswith("(does not handle Tenant)") for t in seen if t != ours)

        assert main(["why", f"tenants.hedronite.io/{name}"]) == 0
        out = capsys.readouterr().out
        assert "Nothing wrong found: kopf's handlers completed" in out and "PROBLEM" not in out


def test_a_backing_off_handler_shows_its_retry_the_condition_and_the_fix(api_client, kubeconfig, tenant_set,
                                                                         tmp_path):
    name = tenant_set.name("taken")
    taken = tenants.namespace_of(name)
    client.CoreV1Api(api_client).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=taken)))
    with OperatorProcess(operator_path("tenant"), kubeconfig=kubeconfig, log_path=tmp_path / "op.log"):
        tenant_set.create(name)

        def backing_off():
            facts, findings = _why(api_client, f"tenant/{name}")
            problems = _problems(findings)
            # kopf 1.45 (_cogs/clients/patching.py) patches the body (its progress annotation), then /status.
            return (facts, findings) if (any("backing off" in t for t in problems)
                                         and any("Ready=False" in t for t in problems)) else None

        facts, findings = eventually(backing_off, timeout=30,
                                     message="the reconcile handler backs off and the status says why")
        backoff, condition = [f for f in findings if f.severity == "PROBLEM"][:2]
        assert backoff.title.startswith("handler 'reconcile' (create) failed and is backing off: kopf retries it at ")
        (record,) = kopfstate.progress(facts.meta["annotations"])
        # NAME_TAKEN_RETRY_DELAY is 30 s (kopf's clock is its loop's, a fraction of a second off ours).
        assert record.delayed and 0 < (record.delayed - facts.now).total_seconds() <= 31
        assert any(d.startswith(f"last error: Namespace {taken} exists and was not created for this Tenant")
                   for d in backoff.details)
        assert condition.title.startswith("the operator reports Ready=False (NameTaken): ")
        assert backoff.fix == condition.fix == f"kubectl annotate namespace {taken} hedronite.io/adopt={name}"
        assert any(e.reason == "NameTaken" and e.type == "Warning" for e in facts.events)

        _run_fix(backoff.fix)  # hand the namespace over; kopf's next retry (<= 30 s) adopts it
        facts = eventually(lambda: _settled(api_client, f"tenant/{name}"), timeout=90,
                           message="the Tenant is handled after the fix")
        assert _problems(why.diagnose(facts)) == []
        assert tenant_set.phase(name) == "Ready"


def test_stuck_terminating_without_its_operator(api_client, tmp_path):
    lab = _lab("stuck-finalizer", tmp_path)
    target = f"tenant/{lab_module_tenant(lab)}"
    try:
        runner.setup(lab)
        assert _problems(_why(api_client, target)[1]) == []
        runner.inject(lab)  # the lab's own fault: SIGKILL the operator, then delete the Tenant
        facts, findings = _why(api_client, target)
        stuck = findings[0]
        assert stuck.severity == "PROBLEM" and stuck.title == (
            "stuck Terminating: kopf's finalizer waits for the operator's delete handler, and no operator is seen "
            "running for this cluster")
        assert stuck.fix and stuck.fix.startswith("operatorlab operator run tenant")
        assert stuck.alternative == (f"kubectl patch tenants.hedronite.io {facts.target.name} --type=merge "
                                     "-p '{\"metadata\":{\"finalizers\":null}}'")
        assert any("garbage collector (for a Tenant, its namespace and quota)" in d for d in stuck.details)
        assert facts.meta["finalizers"] == [kopfstate.FINALIZER] and not facts.operator_running
        runner.solve(lab)  # the fix: start the operator again
        assert all(c.passed for c in runner.check(lab, settle=lab.settle))
    finally:
        runner.reset(lab)


def lab_module_tenant(lab) -> str:
    """The Tenant a Tenant lab works on: the module constant its checks use."""
    return sys.modules[type(lab).__module__].TENANT


def test_an_operator_that_watches_another_group_never_handles_the_tenant(api_client, tmp_path):
    lab = _lab("crd-group-mismatch", tmp_path)
    module = sys.modules[type(lab).__module__]
    try:
        runner.setup(lab)
        assert _problems(_why(api_client, f"tenant/{module.OLD}")[1]) == []
        runner.inject(lab)  # the variant watches hedronite.com; a new Tenant is created
        facts, findings = _why(api_client, f"tenant/{module.NEW}")
        assert facts.operator_running  # the variant: its file is a tenant_operator.py
        (never,) = [f for f in findings if f.severity == "PROBLEM"]
        assert never.title.startswith("no kopf handler has ever handled this Tenant")
        assert "it may watch another group or version" in never.details[0]
        runner.solve(lab)
        eventually(lambda: why.settled(evidence.gather(api_client, f"tenant/{module.NEW}")), timeout=60,
                   message="the fixed operator handled the new Tenant")
    finally:
        runner.reset(lab)


@pytest.fixture
def peering(custom, unique):
    """A ClusterKopfPeering of a name of this test's own (kopf's peering CRDs are in crds/)."""
    name = f"why-{unique}"
    custom.create_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", {
        "apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}})
    yield name
    custom.delete_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", name)


def _kopf(command: str) -> None:
    """Run a ``kopf ...`` fix with this venv's kopf, against the session's cluster."""
    args = shlex.split(command)
    assert args[0] == "kopf", command
    subprocess.run([sys.executable, "-m", "kopf", *args[1:]], check=True, env=os.environ, capture_output=True,
                   timeout=60)


def test_a_peering_freeze_pauses_the_operator_until_resumed(api_client, kubeconfig, peering, tenant_set, unique,
                                                            tmp_path):
    operator = OperatorProcess(operator_path("tenant"), kubeconfig=kubeconfig, peering=peering,
                               log_path=tmp_path / "op.log")
    with operator:
        eventually(lambda: "Resuming operations after the pause" in operator.log(), timeout=30,
                   message="the operator resumed in its peering")
        freeze = f"why-freeze-{unique}"
        _kopf(f"kopf freeze --id {freeze} --peering {peering} --all-namespaces --lifetime 300")
        eventually(lambda: "Pausing operations in favour of" in operator.log(), timeout=30,
                   message="the operator paused for the freeze")
        name = tenant_set.name("frozen")
        tenant_set.create(name)
        facts, findings = _why(api_client, f"tenant/{name}")
        problems = [f for f in findings if f.severity == "PROBLEM"]
        (paused,) = [f for f in problems if "peering" in f.title]
        assert paused.title.startswith(f"kopf peering ClusterKopfPeering {peering} pauses ")
        assert paused.title.endswith(f"in favour of {freeze} (priority 100)")
        assert paused.fix == f"kopf resume --id {freeze} --peering={peering} --all-namespaces"
        assert any(f.title.startswith("no kopf handler has ever handled this Tenant") for f in problems)

        _kopf(paused.fix)
        facts = eventually(lambda: _settled(api_client, f"tenant/{name}"), timeout=60,
                           message="the resumed operator handled the Tenant")
        findings = why.diagnose(facts)
        assert _problems(findings) == []
        assert not [f for f in findings if "peering" in f.title and f.severity != "INFO"]


@pytest.fixture
def identity(api_client, unique):
    """A private copy of the Tenant operator's RBAC (as the missing-rbac lab makes it); removed afterwards."""
    name = f"why-{unique}"
    objects = rbac.operator_rbac("tenant", name=name)
    manifests.apply(api_client, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}])
    yield name, objects
    rbac_api = client.RbacAuthorizationV1Api(api_client)
    for delete in (rbac_api.delete_cluster_role_binding, rbac_api.delete_cluster_role,
                   lambda n: client.CoreV1Api(api_client).delete_namespaced_service_account(n, SYSTEM_NAMESPACE)):
        try:
            delete(name)
        except client.ApiException as e:
            if e.status != 404:
                raise


def test_a_service_account_lacking_watch_is_denied_with_the_rule_that_fixes_it(api_client, identity, tenant_set):
    name, objects = identity
    user = f"system:serviceaccount:{SYSTEM_NAMESPACE}:{name}"
    role = copy.deepcopy(next(o for o in objects if o["kind"] == "ClusterRole"))
    for rule in role["rules"]:
        if rule["resources"] == ["tenants"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "watch"]
    manifests.apply(api_client, [o if o["kind"] != "ClusterRole" else role for o in objects])
    tenant = tenant_set.name("rbac")
    tenant_set.create(tenant)

    facts, findings = _why(api_client, f"tenant/{tenant}", as_user=user)
    (denied,) = [f for f in findings if f.title.startswith(user)]
    assert denied.severity == "PROBLEM" and denied.title == f"{user} may not watch tenants.hedronite.io cluster-wide"
    (check,) = [d.removeprefix("check: ") for d in denied.details if d.startswith("check: ")]
    assert check == f"kubectl auth can-i watch tenants.hedronite.io --all-namespaces --as {user}"
    can_i = shlex.split(check)[1:]
    assert kubectl(can_i, echo=False, check=False) == "no"  # kubectl's impersonation agrees with the review
    assert facts.roles == (name,) and denied.fix and denied.fix.startswith(f"kubectl patch clusterrole {name} ")
    allowed = {(a.verb, a.subresource or a.resource) for a in facts.access if a.allowed}
    assert allowed == {("list", "tenants"), ("patch", "tenants"), ("patch", "status"), ("create", "events")}

    _run_fix(denied.fix)
    assert kubectl(can_i, echo=False, check=False) == "yes"
    findings = _why(api_client, f"tenant/{tenant}", as_user=user)[1]
    (granted,) = [f for f in findings if f.title.startswith(user)]
    assert granted.severity == "OK" and "watch tenants.hedronite.io cluster-wide" in granted.title


@pytest.fixture
def gadgets(api_client, unique):
    """A CRD of this test's own: v1 served (status declares only phase), v1beta1 defined but not served."""
    group = f"why-{unique}.example.com"
    schema = {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"gadgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema,
                                  "subresources": {"status": {}}},
                                 {"name": "v1beta1", "served": False, "storage": False, "schema": schema,
                                  "subresources": {"status": {}}}]}}
    manifests.apply(api_client, [crd])
    manifests.wait_crds_established(api_client, [f"gadgets.{group}"])
    yield group
    client.ApiextensionsV1Api(api_client).delete_custom_resource_definition(f"gadgets.{group}")


def test_an_unserved_version_and_a_status_pruning_schema(api_client, custom, gadgets, namespace):
    group = gadgets
    eventually(lambda: custom.create_namespaced_custom_object(group, "v1", namespace, "gadgets", {
        "apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 1}}),
        timeout=30, message="the new CRD serves v1")

    def write_status() -> dict:
        custom.patch_namespaced_custom_object_status(group, "v1", namespace, "gadgets", "g1", {
            "status": {"phase": "Ready", "reconcile": {"done": True}}})
        return custom.get_namespaced_custom_object(group, "v1", namespace, "gadgets", "g1")["status"]

    assert write_status() == {"phase": "Ready"}  # the API server dropped what the schema does not declare

    facts, findings = _why(api_client, f"gadgets.v1beta1.{group}/g1", namespace=namespace)
    assert facts.obj is not None and facts.resource and facts.resource.version == "v1"  # read through v1
    first = findings[0]
    assert first.title == f"version v1beta1 of gadgets.{group} is not served (served: false in the CRD)"
    (pruned,) = [f for f in findings if "prunes status" in f.title]
    assert pruned.severity == "WARNING" and "status declares only phase" in pruned.title
    assert not [t for t in _problems(_why(api_client, f"gadgets.v1.{group}/g1", namespace=namespace)[1])
                if "not served" in t]

    assert first.fix and pruned.fix
    _run_fix(first.fix)
    _run_fix(pruned.fix)
    eventually(lambda: not [t for t in _problems(_why(api_client, f"gadgets.v1beta1.{group}/g1",
                                                       namespace=namespace)[1]) if "not served" in t],
               timeout=30, message="v1beta1 served after the fix")
    assert eventually(lambda: write_status().get("reconcile"), timeout=30, message="status keeps reconcile") \
        == {"done": True}
    findings = _why(api_client, f"gadgets.{group}/g1", namespace=namespace)[1]
    assert not [f for f in findings if "prunes status" in f.title]
    assert f"CRD gadgets.{group} serves v1; its schema keeps what is written to status" in [f.title for f in findings]


def test_an_unknown_kind_and_a_missing_object(api_client, capsys):
    findings = _why(api_client, "gizmo/nothing")[1]
    assert _problems(findings) == ["this cluster has no resource type 'gizmo'"]
    findings = _why(api_client, "tenant/no-such-tenant-here")[1]
    assert _problems(findings) == ["there is no Tenant no-such-tenant-here"]
    assert main(["why", "tenant/no-such-tenant-here"]) == 1
    assert "Likely cause: there is no Tenant no-such-tenant-here" in capsys.readouterr().out
    assert exit_code(findings) == 1
