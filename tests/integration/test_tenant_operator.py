"""The kopf Tenant operator against the real cluster: every promise of its README, proven.

All tests here share one xdist group: two Tenant operators at once would both
reconcile every (cluster-scoped) Tenant.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from operatorlab.faults.proxy import FaultProxy
from operatorlab.operators import OperatorProcess, operator_path
from operatorlab.wait import eventually
from tests.labs.clusters import ON_EXISTING_CLUSTER, module_cluster

# A cluster of their own, so they run beside the lessons' Tenant operators instead of
# queueing behind them; on a cluster someone else runs, in the group of every other.
pytestmark = pytest.mark.xdist_group("tenant-operator" if ON_EXISTING_CLUSTER else "tenant-operator-tests")


@pytest.fixture(scope="module", autouse=True)
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This module's cluster (tests/conftest.py's api_client, core and custom then talk to it)."""
    yield from module_cluster("tenant-operator-tests", tmp_path_factory)

TENANTS = ("hedronite.io", "v1", "tenants")
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"


def tenant(name: str, cpu_quota: object) -> dict:
    return {"apiVersion": "hedronite.io/v1", "kind": "Tenant", "metadata": {"name": name},
            "spec": {"cpuQuota": cpu_quota, "displayName": f"Team {name}"}}


@pytest.fixture
def tenants(custom, core) -> Iterator[list[str]]:
    """Names of Tenants a test created; deleted (finalizers stripped) and waited for afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        try:
            custom.patch_cluster_custom_object(*TENANTS, name, {"metadata": {"finalizers": None}})
            custom.delete_cluster_custom_object(*TENANTS, name)
        except client.ApiException as e:
            if e.status != 404:
                raise
        try:
            core.delete_namespace(f"tenant-{name}")
        except client.ApiException as e:
            if e.status != 404:
                raise


@pytest.fixture
def operator(tmp_path) -> Iterator[OperatorProcess]:
    op = OperatorProcess(operator_path("tenant"), log_path=tmp_path / "operator.log").start()
    yield op
    op.stop()


def _status(custom, name: str) -> dict:
    return custom.get_cluster_custom_object(*TENANTS, name).get("status", {})


def _hard(core, name: str) -> dict:
    return core.read_namespaced_resource_quota("tenant-quota", f"tenant-{name}").spec.hard


def _namespace_names(core) -> set[str]:
    return {n.metadata.name for n in core.list_namespace().items}


def test_create_makes_namespace_and_quota_and_fills_status(operator, custom, core, tenants, unique):
    name = f"create-{unique}"
    tenants.append(name)
    custom.create_cluster_custom_object(*TENANTS, tenant(name, "2"))
    status = eventually(lambda: _status(custom, name).get("phase") == "Ready" and _status(custom, name),
                        timeout=30, message="status Ready")
    assert status["namespace"] == f"tenant-{name}"
    assert status["cpuQuota"] == "2"
    assert core.read_namespace(f"tenant-{name}").metadata.labels["hedronite.io/tenant"] == name
    assert _hard(core, name) == {"limits.cpu": "2", "requests.cpu": "2"}
    reasons = {e.reason for e in core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={name}").items}
    assert {"NamespaceCreated", "QuotaCreated"} <= reasons


def test_changing_cpu_quota_patches_the_quota(operator, custom, core, tenants, unique):
    name = f"update-{unique}"
    tenants.append(name)
    custom.create_cluster_custom_object(*TENANTS, tenant(name, "1"))
    eventually(lambda: _hard(core, name)["limits.cpu"] == "1", timeout=30, message="quota 1")
    uid = core.read_namespaced_resource_quota("tenant-quota", f"tenant-{name}").metadata.uid
    custom.patch_cluster_custom_object(*TENANTS, name, {"spec": {"cpuQuota": "2500m"}})
    eventually(lambda: _hard(core, name)["limits.cpu"] == "2500m", timeout=30, message="quota patched")
    # Patched in place, not deleted and re-created.
    assert core.read_namespaced_resource_quota("tenant-quota", f"tenant-{name}").metadata.uid == uid
    eventually(lambda: _status(custom, name).get("cpuQuota") == "2500m", timeout=30, message="status follows")


def test_delete_removes_the_namespace_then_the_tenant(operator, custom, core, tenants, unique):
    name = f"delete-{unique}"
    tenants.append(name)
    custom.create_cluster_custom_object(*TENANTS, tenant(name, "1"))
    eventually(lambda: _status(custom, name).get("phase") == "Ready", timeout=30, message="Ready")
    assert FINALIZER in custom.get_cluster_custom_object(*TENANTS, name)["metadata"]["finalizers"]
    custom.delete_cluster_custom_object(*TENANTS, name)
    # The namespace controller really finishes: the namespace is gone, not just Terminating.
    eventually(lambda: f"tenant-{name}" not in _namespace_names(core), timeout=120, message="namespace gone")
    eventually(lambda: name not in {t["metadata"]["name"] for t in
                                    custom.list_cluster_custom_object(*TENANTS)["items"]},
               timeout=30, message="Tenant gone")


def test_sigkill_right_after_a_namespace_create_then_restart_converges_without_duplicates(
        custom, core, tenants, unique, tmp_path):
    """The fault proxy SIGKILLs the operator once the apiserver answered 201 to its first namespace create.

    The kill comes from outside the operator: it is exactly between the namespace and the
    quota of one Tenant, and the restarted operator (same proxy, rule used up) converges
    every Tenant with exactly one quota each.
    """
    names = [f"kill-{unique}-{i}" for i in range(5)]
    tenants.extend(names)
    proxy = FaultProxy(Path(os.environ["KUBECONFIG"]), tmp_path, name="proxy").start()
    crashy = OperatorProcess(operator_path("tenant"), kubeconfig=proxy.kubeconfig, log_path=tmp_path / "crashy.log")
    try:
        crashy.start()
        assert crashy.identity is not None
        proxy.set_rules([{"action": "kill", "method": "POST", "path": "^/api/v1/namespaces$", "response": 201,
                          "pid": crashy.identity.pid, "started": crashy.identity.started, "times": 1,
                          "name": "kill"}])
        for name in names:
            custom.create_cluster_custom_object(*TENANTS, tenant(name, "1"))
        assert crashy.wait_exit(timeout=30), "the fault proxy did not kill the operator"
        assert len(proxy.stats()["hits"]["kill"]) == 1
        # Half-done: the namespace whose create was acknowledged exists, without its quota (others
        # handled concurrently by kopf's workers may be half-done too).
        half_done = [n for n in names if f"tenant-{n}" in _namespace_names(core)
                     and not core.list_namespaced_resource_quota(f"tenant-{n}").items]
        assert half_done, "expected a namespace without quota after the kill"
        crashy.start()
        for name in names:
            eventually(lambda n=name: _status(custom, n).get("phase") == "Ready", timeout=60, message=f"{name} Ready")
        for name in names:
            quotas = core.list_namespaced_resource_quota(f"tenant-{name}").items
            assert [q.metadata.name for q in quotas] == ["tenant-quota"]
        labelled = core.list_namespace(label_selector="hedronite.io/tenant").items
        assert sorted(n.metadata.name for n in labelled if n.metadata.name.startswith(f"tenant-kill-{unique}")) == \
            sorted(f"tenant-{n}" for n in names)
    finally:
        crashy.stop()
        proxy.stop()


def test_resume_recreates_a_namespace_deleted_while_the_operator_was_down(custom, core, tenants, unique, tmp_path):
    name = f"resume-{unique}"
    tenants.append(name)
    op = OperatorProcess(operator_path("tenant"), log_path=tmp_path / "op.log").start()
    custom.create_cluster_custom_object(*TENANTS, tenant(name, "1"))
    eventually(lambda: _status(custom, name).get("phase") == "Ready", timeout=30, message="Ready")
    op.stop()
    core.delete_namespace(f"tenant-{name}")
    eventually(lambda: f"tenant-{name}" not in _namespace_names(core), timeout=120, message="namespace gone")
    time.sleep(1)
    assert f"tenant-{name}" not in _namespace_names(core), "nothing recreates it while the operator is down"
    op.start()
    try:
        eventually(lambda: _hard(core, name)["limits.cpu"] == "1", timeout=60, message="on.resume recreated it")
        assert "resum" in op.log().lower()
    finally:
        op.stop()


@pytest.mark.parametrize(("name", "cpu_quota", "field"), [
    ("dotted.name", "1", "metadata.name"),
    ("x" * 57, "1", "metadata.name"),   # tenant-<57 chars> is 64: longer than a DNS-1123 label
    ("badquota", "four", "spec.cpuQuota"),
    ("negative", -1, "spec.cpuQuota"),
])
def test_bad_specs_are_refused_by_the_schema(custom, name, cpu_quota, field):
    with pytest.raises(client.ApiException) as refused:
        custom.create_cluster_custom_object(*TENANTS, tenant(name, cpu_quota))
    assert refused.value.status == 422
    assert field in json.loads(refused.value.body)["message"]


@pytest.fixture
def loose_tenant_schema(api_client) -> Iterator[None]:
    """The Tenant CRD without its metadata.name rule, as an older CRD version might have been.

    Objects stored under an older, looser schema stay stored when the schema tightens:
    the operator must cope with input the current schema would refuse.
    """
    from operatorlab import paths
    from operatorlab.cluster import manifests

    ext = client.ApiextensionsV1Api(api_client)
    ext.patch_custom_resource_definition("tenants.hedronite.io", [
        {"op": "remove", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/metadata"}])
    yield
    manifests.apply(api_client, manifests.load(paths.crds_dir() / "tenant.yaml"))


def test_input_that_slipped_past_the_schema_is_reported_not_retried(
        operator, custom, core, tenants, unique, loose_tenant_schema):
    name = f"dotted.{unique}"  # a fine Tenant name, but tenant-dotted.x is no namespace name
    tenants.append(name)
    eventually(lambda: custom.create_cluster_custom_object(*TENANTS, tenant(name, "1")),
               timeout=30, message="the looser schema takes effect")
    status = eventually(lambda: _status(custom, name).get("phase") == "Failed" and _status(custom, name),
                        timeout=30, message="status Failed")
    assert "DNS-1123" in status["message"] and "rename the Tenant" in status["message"]
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}").items
    assert [e.reason for e in events if e.type == "Warning"] == ["ReconcileFailed"]
    time.sleep(3)  # a retry storm would show up as more attempts by now
    assert operator.running
    assert operator.log().count("Handler 'reconcile' failed permanently: tenant name") == 1
    # Deleting it is not blocked by a finalizer that can never succeed.
    custom.delete_cluster_custom_object(*TENANTS, name)
    eventually(lambda: name not in {t["metadata"]["name"] for t in
                                    custom.list_cluster_custom_object(*TENANTS)["items"]},
               timeout=30, message="Tenant deleted")


# --- ownership: claim before touching, delete only what is ours, nothing outlives its owner ---


def _ready(custom, name: str) -> dict:
    """The Tenant's Ready condition ({} if none yet)."""
    conditions = _status(custom, name).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def _snapshot(core, namespace: str) -> dict:
    """Everything of a namespace (and its ConfigMaps) a take-over would change."""
    ns = core.read_namespace(namespace)
    return {
        "labels": ns.metadata.labels, "annotations": ns.metadata.annotations,
        "ownerReferences": ns.metadata.owner_references, "resourceVersion": ns.metadata.resource_version,
        "spec": ns.spec.to_dict(), "deletionTimestamp": ns.metadata.deletion_timestamp,
        "configmaps": {c.metadata.name: c.metadata.resource_version
                       for c in core.list_namespaced_config_map(namespace).items if c.metadata.name == "precious"},
        "quotas": [q.metadata.name for q in core.list_namespaced_resource_quota(namespace).items],
    }


@pytest.fixture
def foreign_namespace(core, unique) -> Iterator[tuple[str, str]]:
    """``(tenant name, namespace)``: a namespace tenant-<name> made by hand, a ConfigMap in it.

    It even carries the operator's label: a label anyone can set does not make it the Tenant's.
    """
    name = f"own-{unique}"
    namespace = f"tenant-{name}"
    core.create_namespace({"metadata": {"name": namespace, "labels": {"hedronite.io/tenant": name, "team": "x"}}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "precious"}, "data": {"keep": "me"}})
    yield name, namespace
    try:
        core.delete_namespace(namespace)
    except client.ApiException as e:
        if e.status != 404:
            raise


def test_a_foreign_namespace_survives_create_update_and_delete_of_the_tenant(
        operator, custom, core, tenants, foreign_namespace):
    name, namespace = foreign_namespace
    tenants.append(name)
    before = _snapshot(core, namespace)
    custom.create_cluster_custom_object(*TENANTS, tenant(name, "1"))
    ready = eventually(lambda: _ready(custom, name).get("reason") == "NameTaken" and _ready(custom, name),
                       timeout=30, message="Ready=False, NameTaken")
    assert ready["status"] == "False" and ready["observedGeneration"] == 1 and ready["lastTransitionTime"]
    assert f"Namespace {namespace} exists" in ready["message"]
    assert f"kubectl annotate namespace {namespace} hedronite.io/adopt={name}" in ready["message"]
    assert _status(custom, name)["phase"] == "NameTaken"
    assert _snapshot(core, namespace) == before

    custom.patch_cluster_custom_object(*TENANTS, name, {"spec": {"cpuQuota": "3"}})
    eventually(lambda: _ready(custom, name).get("observedGeneration") == 2, timeout=60,
               message="the update is seen, and refused the same way")
    assert _ready(custom, name)["reason"] == "NameTaken"
    assert _snapshot(core, namespace) == before

    custom.delete_cluster_custom_object(*TENANTS, name)
    eventually(
        lambda: name not in {t["metadata"]["name"] for t in custom.list_cluster_custom_object(*TENANTS)["items"]},
        timeout=30, message="Tenant deleted (its finalizer let go)",
    )
    assert _snapshot(core, namespace) == before
    assert "nothing deleted" in operator.log()
    warnings = [e for e in core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}").items
                if e.type == "Warning"]
    assert {e.reason for e in warnings} == {"NameTaken"}


def test_name_taken_retries_slowly_then_adoption_by_annotation_takes_over(
        operator, custom, core, tenants, foreign_namespace):
    """A minute of NameTaken costs a few attempts and one Event; the annotation hands the namespace over."""
    name, namespace = foreign_namespace
    tenants.append(name)
    custom.create_cluster_custom_object(*TENANTS, tenant(name, "2"))
    eventually(lambda: _ready(custom, name).get("reason") == "NameTaken", timeout=30, message="NameTaken")
    started = time.monotonic()
    time.sleep(60)
    attempts = operator.log().count(f"Handler 'reconcile' failed temporarily: Namespace {namespace} exists")
    events = [e for e in core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}").items
              if e.reason == "NameTaken"]
    print(f"NameTaken for {time.monotonic() - started:.0f}s: {attempts} attempts, {len(events)} Event(s)")
    # Every 30 s (each: one GET of the namespace, one status write by kopf): 2 or 3 in a minute.
    assert 2 <= attempts <= 4, operator.log()
    assert len(events) == 1 and (events[0].count or 1) == 1

    core.patch_namespace(namespace, {"metadata": {"annotations": {"hedronite.io/adopt": name}}})
    eventually(lambda: _ready(custom, name).get("status") == "True", timeout=45, message="adopted, then Ready")
    ns = core.read_namespace(namespace)
    tenant_uid = custom.get_cluster_custom_object(*TENANTS, name)["metadata"]["uid"]
    assert [(r.kind, r.name, r.uid, r.controller) for r in ns.metadata.owner_references] == \
        [("Tenant", name, tenant_uid, True)]
    assert "hedronite.io/adopt" not in (ns.metadata.annotations or {})
    assert ns.metadata.labels["team"] == "x"  # others' labels stay
    assert core.read_namespaced_config_map("precious", namespace).data == {"keep": "me"}
    assert _hard(core, name)["limits.cpu"] == "2"
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}").items
    reasons = {e.reason for e in events}
    assert "NamespaceAdopted" in reasons
    # Adopted means ours: it goes with the Tenant.
    custom.delete_cluster_custom_object(*TENANTS, name)
    eventually(lambda: namespace not in _namespace_names(core), timeout=120, message="adopted namespace deleted")


def test_a_tenant_deleted_without_its_finalizer_leaves_nothing_behind(custom, core, tenants, unique, tmp_path):
    """Stopped operator, finalizer stripped (what `kubectl replace` of a manifest without it does), Tenant deleted:
    the garbage collector removes the namespace and the quota by their owner reference."""
    name = f"orphan-{unique}"
    tenants.append(name)
    op = OperatorProcess(operator_path("tenant"), log_path=tmp_path / "op.log").start()
    try:
        custom.create_cluster_custom_object(*TENANTS, tenant(name, "1"))
        eventually(lambda: _status(custom, name).get("phase") == "Ready", timeout=30, message="Ready")
    finally:
        op.stop()
    quota_refs = core.read_namespaced_resource_quota("tenant-quota", f"tenant-{name}").metadata.owner_references
    assert [r.kind for r in quota_refs] == ["Tenant"]
    current = custom.get_cluster_custom_object(*TENANTS, name)
    replacement = {k: current[k] for k in ("apiVersion", "kind", "spec")}
    replacement["metadata"] = {"name": name, "resourceVersion": current["metadata"]["resourceVersion"]}
    custom.replace_cluster_custom_object(*TENANTS, name, replacement)  # as `kubectl replace` would
    assert not custom.get_cluster_custom_object(*TENANTS, name)["metadata"].get("finalizers")
    custom.delete_cluster_custom_object(*TENANTS, name)
    eventually(lambda: f"tenant-{name}" not in _namespace_names(core), timeout=180,
               message="the garbage collector deleted the orphaned namespace (and its quota with it)")
