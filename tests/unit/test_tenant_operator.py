"""Unit tests of the tenant operator's pure parts: names, manifests, the CRD's
schema patterns, and how reconcile_tenant routes API errors to kopf errors.

No cluster here. Where reconcile_tenant needs a CoreV1Api, a StubCore answers
each call with a canned object or error set up by the test. It has no state
and no API semantics: it only lets us check our own comparisons and error
routing. What the API server really does is for tests/integration/.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from kubernetes.client import (
    ApiException,
    V1Namespace,
    V1ObjectMeta,
    V1OwnerReference,
    V1ResourceQuota,
    V1ResourceQuotaSpec,
)

from tests.unit.stubs import StubApi, api_error, crd_schema

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / "tenant.yaml"


def _load_operator() -> Any:
    # Loaded by path under another name: "operator" would shadow the stdlib
    # module, and the operator is a script, not a package.
    spec = importlib.util.spec_from_file_location(
        "tenant_operator", ROOT / "operators" / "tenant" / "tenant_operator.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


op = _load_operator()


# --- names ------------------------------------------------------------------


def test_namespace_name_prefixes_tenant() -> None:
    assert op.namespace_name("team-a") == "tenant-team-a"
    assert op.namespace_name("a" * 56) == "tenant-" + "a" * 56  # exactly 63


@pytest.mark.parametrize(
    "tenant",
    [
        "a.b",  # a valid Tenant name (DNS subdomain), not a valid label
        "a" * 57,  # tenant-<57> is 64 characters
        "a" * 60,
        "Team",  # uppercase
        "team-",  # ends with '-'
        "",  # "tenant-" ends with '-'
        "team\n",  # '$' would match before a trailing newline
        "team_a",
    ],
)
def test_namespace_name_refuses_what_is_not_a_label(tenant: str) -> None:
    with pytest.raises(ValueError, match="DNS-1123 label") as raised:
        op.namespace_name(tenant)
    assert repr("tenant-" + tenant) in str(raised.value)
    assert "rename the Tenant" in str(raised.value)


def test_namespace_name_message_for_dots_says_what_and_how() -> None:
    with pytest.raises(ValueError) as raised:
        op.namespace_name("a.b")
    message = str(raised.value)
    assert message.startswith("tenant name 'a.b' cannot be used as a namespace name: 'tenant-a.b'")
    assert "at most 63 characters" in message


# --- manifests --------------------------------------------------------------


def test_namespace_manifest() -> None:
    manifest = op.namespace_manifest("blue")
    assert manifest["apiVersion"] == "v1" and manifest["kind"] == "Namespace"
    assert manifest["metadata"] == {
        "name": "tenant-blue",
        "labels": {"hedronite.io/tenant": "blue"},
    }


@pytest.mark.parametrize("quota, text", [(4, "4"), ("500m", "500m"), ("2.5", "2.5")])
def test_quota_manifest_caps_cpu_requests_and_limits(quota: Any, text: str) -> None:
    manifest = op.quota_manifest("blue", quota)
    assert manifest["kind"] == "ResourceQuota"
    assert manifest["metadata"]["name"] == "tenant-quota"
    assert manifest["metadata"]["namespace"] == "tenant-blue"
    assert manifest["metadata"]["labels"] == {"hedronite.io/tenant": "blue"}
    assert manifest["spec"] == {"hard": {"requests.cpu": text, "limits.cpu": text}}


def test_manifests_refuse_bad_names() -> None:
    with pytest.raises(ValueError):
        op.namespace_manifest("a.b")
    with pytest.raises(ValueError):
        op.quota_manifest("a.b", 1)


@pytest.mark.parametrize("value, text", [(4, "4"), (0, "0"), ("4", "4"), ("500m", "500m"), ("2.5", "2.5")])
def test_cpu_quota_accepts_quantities(value: Any, text: str) -> None:
    assert op.cpu_quota({"cpuQuota": value}) == text


@pytest.mark.parametrize("value", [None, "four", "", "-1", -1, 2.5, True, "1Gi", "2.5555", "4\n"])
def test_cpu_quota_refuses_the_rest(value: Any) -> None:
    spec = {} if value is None else {"cpuQuota": value}
    with pytest.raises(ValueError, match=re.escape("spec.cpuQuota")):
        op.cpu_quota(spec)


# --- the CRD ----------------------------------------------------------------


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text())


def test_crd_identity(crd: dict[str, Any]) -> None:
    assert crd["metadata"]["name"] == "tenants.hedronite.io"
    assert crd["spec"]["group"] == "hedronite.io"
    assert crd["spec"]["scope"] == "Cluster"
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["singular"]) == ("Tenant", "tenants", "tenant")
    assert names["shortNames"] == ["tn"]
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


def test_crd_printer_columns(crd: dict[str, Any]) -> None:
    (version,) = crd["spec"]["versions"]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Namespace": ".status.namespace",
        "Quota": ".spec.cpuQuota",
        "Phase": ".status.phase",
        "Age": ".metadata.creationTimestamp",
    }


def test_crd_schema_shape(crd: dict[str, Any]) -> None:
    schema = crd_schema(crd)
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["cpuQuota"]
    assert spec["properties"]["displayName"] == {
        "description": spec["properties"]["displayName"]["description"],
        "type": "string",
        "maxLength": 253,
    }
    cpu = spec["properties"]["cpuQuota"]
    assert cpu["x-kubernetes-int-or-string"] is True
    assert "type" not in cpu  # int-or-string forbids a type
    assert cpu["minimum"] == 0  # integers: pattern checks strings only
    status = schema["properties"]["status"]
    assert status["x-kubernetes-preserve-unknown-fields"] is True


def _fields(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    for key, sub in schema.get("properties", {}).items():
        found.append((f"{path}.{key}", sub))
        found.extend(_fields(sub, f"{path}.{key}"))
    return found


def test_crd_every_field_is_described(crd: dict[str, Any]) -> None:
    # metadata itself may carry nothing but name/generateName restrictions.
    undescribed = [
        path for path, sub in _fields(crd_schema(crd)) if path != ".metadata" and not sub.get("description")
    ]
    assert undescribed == []


def test_crd_cpu_pattern_is_the_operators(crd: dict[str, Any]) -> None:
    cpu = crd_schema(crd)["properties"]["spec"]["properties"]["cpuQuota"]
    assert cpu["pattern"] == op.CPU_QUOTA_PATTERN


@pytest.mark.parametrize("text", ["4", "500m", "2.5", "0", "0.125", "16000m"])
def test_crd_cpu_pattern_accepts(crd: dict[str, Any], text: str) -> None:
    pattern = crd_schema(crd)["properties"]["spec"]["properties"]["cpuQuota"]["pattern"]
    assert re.search(pattern, text)


@pytest.mark.parametrize("text", ["four", "", "-1", "1Gi", "2.", ".5", "2.5555", "500 m", "1e3"])
def test_crd_cpu_pattern_refuses(crd: dict[str, Any], text: str) -> None:
    pattern = crd_schema(crd)["properties"]["spec"]["properties"]["cpuQuota"]["pattern"]
    assert not re.search(pattern, text)


@pytest.mark.parametrize("tenant", ["blue", "a" * 56, "a" * 57, "a.b", "Blue", "b-", "x"])
def test_crd_name_rule_agrees_with_namespace_name(crd: dict[str, Any], tenant: str) -> None:
    name = crd_schema(crd)["properties"]["metadata"]["properties"]["name"]
    schema_accepts = len(tenant) <= name["maxLength"] and bool(re.search(name["pattern"], tenant))
    try:
        op.namespace_name(tenant)
        operator_accepts = True
    except ValueError:
        operator_accepts = False
    assert schema_accepts == operator_accepts


# --- reconcile_tenant: comparisons and error routing ------------------------


UID = "0f3c2a9e-1111-4222-8333-444455556666"
OURS = [V1OwnerReference(api_version="hedronite.io/v1", kind="Tenant", name="blue", uid=UID,
                         controller=True, block_owner_deletion=True)]


def namespace(
    labels: dict[str, str] | None = None,
    terminating: bool = False,
    owners: list[V1OwnerReference] | None = OURS,
    annotations: dict[str, str] | None = None,
) -> V1Namespace:
    return V1Namespace(
        metadata=V1ObjectMeta(
            name="tenant-blue",
            uid="ns-uid",
            resource_version="41",
            labels=labels if labels is not None else {"hedronite.io/tenant": "blue"},
            annotations=annotations,
            owner_references=owners,
            deletion_timestamp="2026-01-01T00:00:00Z" if terminating else None,
        )
    )


def quota(cpu: str, owners: list[V1OwnerReference] | None = OURS) -> V1ResourceQuota:
    return V1ResourceQuota(
        metadata=V1ObjectMeta(name="tenant-quota", namespace="tenant-blue",
                              labels={"hedronite.io/tenant": "blue"}, owner_references=owners),
        spec=V1ResourceQuotaSpec(hard={"requests.cpu": cpu, "limits.cpu": cpu}),
    )


class Reports(list):
    def __call__(self, reason: str, message: str) -> None:
        self.append(reason)


def test_reconcile_creates_what_is_missing() -> None:
    core = StubApi(
        read_namespace=api_error(404),
        create_namespace=namespace(),
        read_namespaced_resource_quota=api_error(404),
        create_namespaced_resource_quota=quota("2"),
    )
    reports = Reports()
    status = op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core, report=reports)
    assert status == {"namespace": "tenant-blue", "cpuQuota": "2", "phase": "Ready"}
    assert core.called() == [
        "read_namespace",
        "create_namespace",
        "read_namespaced_resource_quota",
        "create_namespaced_resource_quota",
    ]
    assert op._as_dict(core.calls[1][1]["body"]) == op.namespace_manifest("blue", UID)
    assert core.calls[3][1]["namespace"] == "tenant-blue"
    assert op._as_dict(core.calls[3][1]["body"]) == op.quota_manifest("blue", "2", UID)
    # What it creates is claimed: owned by the Tenant (by uid), and labelled.
    for body in (op._as_dict(core.calls[1][1]["body"]), op._as_dict(core.calls[3][1]["body"])):
        assert body["metadata"]["ownerReferences"] == [{
            "apiVersion": "hedronite.io/v1", "kind": "Tenant", "name": "blue", "uid": UID,
            "controller": True, "blockOwnerDeletion": True}]
        assert body["metadata"]["labels"] == {"hedronite.io/tenant": "blue"}
    assert reports == ["NamespaceCreated", "QuotaCreated"]


def test_reconcile_writes_nothing_when_nothing_differs() -> None:
    # The API stores "2.5" as "2500m": the same amount, so no patch. Other
    # labels on the namespace are not ours to remove.
    core = StubApi(
        read_namespace=namespace({"hedronite.io/tenant": "blue", "kubernetes.io/metadata.name": "tenant-blue"}),
        read_namespaced_resource_quota=quota("2500m"),
    )
    reports = Reports()
    status = op.reconcile_tenant("blue", {"cpuQuota": "2.5"}, uid=UID, core=core, report=reports)
    assert status["phase"] == "Ready" and status["cpuQuota"] == "2.5"
    assert core.called() == ["read_namespace", "read_namespaced_resource_quota"]
    assert reports == []


def test_reconcile_patches_only_what_differs() -> None:
    core = StubApi(
        read_namespace=namespace({"team": "blue"}),
        patch_namespace=namespace(),
        read_namespaced_resource_quota=quota("1"),
        patch_namespaced_resource_quota=quota("3"),
    )
    reports = Reports()
    op.reconcile_tenant("blue", {"cpuQuota": "3"}, uid=UID, core=core, report=reports)
    patches = {method: kwargs["body"] for method, kwargs in core.calls if method.startswith("patch")}
    assert patches == {
        "patch_namespace": {"metadata": {"labels": {"hedronite.io/tenant": "blue"}}},
        "patch_namespaced_resource_quota": {"spec": {"hard": {"requests.cpu": "3", "limits.cpu": "3"}}},
    }
    assert reports == ["NamespaceLabeled", "QuotaUpdated"]


def test_reconcile_409_on_create_reads_theirs_and_continues() -> None:
    # Someone created the objects between our GET and our POST.
    core = StubApi(
        read_namespace=[api_error(404), namespace()],
        create_namespace=api_error(409, "already exists"),
        read_namespaced_resource_quota=[api_error(404), quota("2")],
        create_namespaced_resource_quota=api_error(409, "already exists"),
    )
    status = op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert status["phase"] == "Ready"
    assert core.called().count("read_namespace") == 2
    assert core.called().count("read_namespaced_resource_quota") == 2
    assert not [m for m in core.called() if m.startswith("patch")]


def test_reconcile_waits_for_a_terminating_namespace() -> None:
    core = StubApi(read_namespace=namespace(terminating=True))
    with pytest.raises(kopf.TemporaryError, match="Terminating"):
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert core.called() == ["read_namespace"]


@pytest.mark.parametrize("name, spec", [("a.b", {"cpuQuota": 2}), ("blue", {"cpuQuota": "four"}), ("blue", {})])
def test_reconcile_bad_input_is_permanent_and_touches_nothing(name: str, spec: dict[str, Any]) -> None:
    core = StubApi()
    with pytest.raises(kopf.PermanentError) as raised:
        op.reconcile_tenant(name, spec, uid=UID, core=core)
    assert isinstance(raised.value.__cause__, ValueError)
    assert core.calls == []


def test_reconcile_429_retries_after_retry_after() -> None:
    core = StubApi(read_namespace=api_error(429, "too many requests", {"Retry-After": "7"}))
    with pytest.raises(kopf.TemporaryError) as raised:
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert raised.value.delay == 7
    assert "429" in str(raised.value)


@pytest.mark.parametrize("status", [500, 503, 504])
def test_reconcile_5xx_retries_after_the_default_delay(status: int) -> None:
    core = StubApi(read_namespace=api_error(status, "etcdserver: request timed out"))
    with pytest.raises(kopf.TemporaryError) as raised:
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert raised.value.delay == op.DEFAULT_RETRY_DELAY == 10
    assert "etcdserver: request timed out" in str(raised.value)


def test_reconcile_422_is_permanent_with_the_servers_reason() -> None:
    core = StubApi(
        read_namespace=namespace(),
        read_namespaced_resource_quota=api_error(404),
        create_namespaced_resource_quota=api_error(422, 'ResourceQuota "tenant-quota" is invalid'),
    )
    with pytest.raises(kopf.PermanentError, match='ResourceQuota "tenant-quota" is invalid'):
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)


def test_reconcile_403_is_temporary_and_points_at_rbac() -> None:
    core = StubApi(read_namespace=api_error(403, 'namespaces "tenant-blue" is forbidden'))
    with pytest.raises(kopf.TemporaryError) as raised:
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert "ClusterRole" in str(raised.value)
    assert 'namespaces "tenant-blue" is forbidden' in str(raised.value)
    assert raised.value.delay == 10


def test_reconcile_403_in_a_terminating_namespace_is_not_blamed_on_rbac() -> None:
    core = StubApi(
        read_namespace=namespace(),
        read_namespaced_resource_quota=api_error(404),
        create_namespaced_resource_quota=api_error(
            403,
            'resourcequotas "tenant-quota" is forbidden: unable to create new content '
            "in namespace tenant-blue because it is being terminated",
        ),
    )
    with pytest.raises(kopf.TemporaryError) as raised:
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert "being deleted" in str(raised.value)
    assert "ClusterRole" not in str(raised.value)


@pytest.mark.parametrize("status", [400, 401])
def test_reconcile_other_api_errors_are_left_alone(status: int) -> None:
    error = api_error(status)
    core = StubApi(read_namespace=error)
    with pytest.raises(ApiException) as raised:
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert raised.value is error


def test_retry_delay_ignores_what_it_cannot_read() -> None:
    assert op.retry_delay(api_error(429, headers={"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"})) == 10
    assert op.retry_delay(api_error(429, headers={"Retry-After": "0"})) == 1
    assert op.retry_delay(api_error(429)) == 10


# --- delete_tenant_namespace ------------------------------------------------


def test_delete_deletes_our_namespace_on_condition_it_is_still_the_one_checked() -> None:
    core = StubApi(read_namespace=namespace(), delete_namespace=None)
    assert op.delete_tenant_namespace("blue", uid=UID, core=core) is True
    method, kwargs = core.calls[1]
    assert (method, kwargs["name"], kwargs["body"].preconditions.uid) == ("delete_namespace", "tenant-blue", "ns-uid")


@pytest.mark.parametrize("owners", [None, [V1OwnerReference(api_version="hedronite.io/v1", kind="Tenant",
                                                            name="blue", uid="an-earlier-blue")]])
def test_delete_leaves_a_namespace_that_is_not_the_tenants(owners: list[V1OwnerReference] | None) -> None:
    # Labelled like ours, but no owner reference to this Tenant: someone else's.
    core = StubApi(read_namespace=namespace(owners=owners))
    assert op.delete_tenant_namespace("blue", uid=UID, core=core) is False
    assert core.called() == ["read_namespace"]


def test_delete_without_uid_needs_an_owner_reference_naming_the_tenant() -> None:
    other = [V1OwnerReference(api_version="hedronite.io/v1", kind="Tenant", name="green", uid="g")]
    assert op.delete_tenant_namespace("blue", uid=None, core=StubApi(read_namespace=namespace(owners=other))) is False
    core = StubApi(read_namespace=namespace(), delete_namespace=None)
    assert op.delete_tenant_namespace("blue", uid=None, core=core) is True


@pytest.mark.parametrize("outcome", [{"read_namespace": api_error(404)},
                                     {"read_namespace": namespace(), "delete_namespace": api_error(404)},
                                     {"read_namespace": namespace(), "delete_namespace": api_error(409)}])
def test_delete_of_a_gone_or_replaced_namespace_is_fine(outcome: dict[str, Any]) -> None:
    assert op.delete_tenant_namespace("blue", uid=UID, core=StubApi(**outcome)) is False


def test_delete_for_an_unusable_name_does_nothing() -> None:
    # Such a Tenant never got a namespace; its finalizer must not block forever.
    core = StubApi()
    assert op.delete_tenant_namespace("a.b", uid=UID, core=core) is False
    assert core.calls == []


def test_delete_routes_errors_like_reconcile() -> None:
    core = StubApi(read_namespace=namespace(), delete_namespace=api_error(503))
    with pytest.raises(kopf.TemporaryError):
        op.delete_tenant_namespace("blue", uid=UID, core=core)


# --- ownership: claim before touching ----------------------------------------


def test_a_namespace_that_is_not_ours_is_never_written() -> None:
    core = StubApi(read_namespace=namespace(labels={"team": "x"}, owners=None))
    with pytest.raises(op.NameTaken) as raised:
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert core.called() == ["read_namespace"]
    message = str(raised.value)
    assert "Namespace tenant-blue exists and was not created for this Tenant" in message
    assert "kubectl annotate namespace tenant-blue hedronite.io/adopt=blue" in message
    assert raised.value.delay == op.NAME_TAKEN_RETRY_DELAY == 30
    assert isinstance(raised.value, kopf.TemporaryError)


def test_our_label_alone_does_not_make_a_namespace_ours() -> None:
    core = StubApi(read_namespace=namespace(owners=None))
    with pytest.raises(op.NameTaken):
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert core.called() == ["read_namespace"]


def test_a_quota_that_is_not_ours_is_never_written() -> None:
    core = StubApi(read_namespace=namespace(), read_namespaced_resource_quota=quota("9", owners=None))
    with pytest.raises(op.NameTaken, match="ResourceQuota tenant-blue/tenant-quota exists") as raised:
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert "kubectl annotate resourcequota tenant-quota -n tenant-blue hedronite.io/adopt=blue" in str(raised.value)
    assert not core.calls_to("patch")


def test_an_object_another_controller_owns_is_not_adopted_even_when_annotated() -> None:
    theirs = [V1OwnerReference(api_version="v1", kind="Thing", name="x", uid="x", controller=True)]
    core = StubApi(read_namespace=namespace(owners=theirs, annotations={"hedronite.io/adopt": "blue"}))
    with pytest.raises(op.NameTaken, match=r"controlled by Thing x.*cannot be adopted"):
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)
    assert core.called() == ["read_namespace"]


def test_an_annotation_naming_another_tenant_adopts_nothing() -> None:
    core = StubApi(read_namespace=namespace(owners=None, annotations={"hedronite.io/adopt": "green"}))
    with pytest.raises(op.NameTaken):
        op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core)


def test_adoption_adds_owner_and_label_removes_the_annotation_conditionally() -> None:
    other = V1OwnerReference(api_version="v1", kind="ConfigMap", name="keep", uid="k")
    core = StubApi(
        read_namespace=namespace(labels={"team": "x"}, owners=[other], annotations={"hedronite.io/adopt": "blue"}),
        patch_namespace=namespace(),
        read_namespaced_resource_quota=quota("2"),
    )
    reports = Reports()
    op.reconcile_tenant("blue", {"cpuQuota": 2}, uid=UID, core=core, report=reports)
    (_, patch), = core.calls_to("patch_namespace")
    assert patch["body"] == {"metadata": {
        "resourceVersion": "41",
        "annotations": {"hedronite.io/adopt": None},
        "labels": {"hedronite.io/tenant": "blue"},
        # A strategic merge patch: merged by uid into the existing references.
        "ownerReferences": [{"apiVersion": "hedronite.io/v1", "kind": "Tenant", "name": "blue", "uid": UID,
                             "controller": True, "blockOwnerDeletion": True}],
    }}
    assert reports == ["NamespaceAdopted"]


def test_ownership_is_by_uid() -> None:
    owner = op.owner_body("blue", UID)
    assert op.ownership({"ownerReferences": [{"uid": UID}]}, owner) == op.OURS
    assert op.ownership({"ownerReferences": [{"uid": "other", "name": "blue"}]}, owner) == op.TAKEN
    assert op.ownership({"labels": {"hedronite.io/tenant": "blue"}}, owner) == op.TAKEN
    assert op.ownership({"annotations": {"hedronite.io/adopt": "blue"}}, owner) == op.ADOPTABLE


# --- status: the Ready condition ---------------------------------------------


def test_ready_condition_keeps_its_transition_time_until_the_status_flips() -> None:
    first = op.ready_conditions([], ready=False, reason="NameTaken", message="m", generation=1, now="T1")
    assert first == [{"type": "Ready", "status": "False", "reason": "NameTaken", "message": "m",
                      "observedGeneration": 1, "lastTransitionTime": "T1"}]
    again = op.ready_conditions(first, ready=False, reason="Retrying", message="n", generation=2, now="T2")
    assert again[0]["lastTransitionTime"] == "T1" and again[0]["observedGeneration"] == 2
    flipped = op.ready_conditions([{"type": "Other", "status": "True"}, *again],
                                  ready=True, reason="Reconciled", message="ok", generation=2, now="T3")
    assert flipped[0] == {"type": "Other", "status": "True"}
    assert flipped[1]["status"] == "True" and flipped[1]["lastTransitionTime"] == "T3"


class FakePatch:
    """kopf.Patch's ``status.update`` only, recording what would be written."""

    def __init__(self) -> None:
        self.status: dict[str, Any] = {}


def test_record_status_writes_only_what_changed_and_says_whether_ready_changed() -> None:
    body = kopf.Body({"metadata": {"generation": 3}, "status": {}})
    patch = FakePatch()
    assert op.record_status(body, patch, {"phase": "NameTaken"}, ready=False, reason="NameTaken", message="m")
    assert patch.status["phase"] == "NameTaken" and patch.status["observedGeneration"] == 3
    assert patch.status["conditions"][0]["reason"] == "NameTaken" and patch.status["message"] == "m"
    # The same outcome again (a retry): nothing to write, no Event due.
    body = kopf.Body({"metadata": {"generation": 3}, "status": dict(patch.status)})
    patch = FakePatch()
    assert not op.record_status(body, patch, {"phase": "NameTaken"}, ready=False, reason="NameTaken", message="m")
    assert patch.status == {}
