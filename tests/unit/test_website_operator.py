"""Unit tests of the Website operator's pure parts: spec validation, manifests,
the CRD's rules, rollout status, and how reconcile_website routes API errors.

No cluster here. Where reconcile_website needs an AppsV1Api or CoreV1Api, a Stub
answers each call with a canned object or error set up by the test. It has no
state and no API semantics (server-side apply's merging is the API server's, and
is tested in tests/integration/): it only lets us check our own requests,
comparisons and error routing.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from kubernetes.client import ApiException

from tests.unit.stubs import StubApi, api_error, crd_schema

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / "website.yaml"
OWNER_UID = "0b7a9f0e-1111-2222-3333-444455556666"


def _load_operator() -> Any:
    # Loaded by path under another name: "operator" would shadow the stdlib
    # module, and the operator is a script, not a package.
    path = ROOT / "operators" / "website" / "website_operator.py"
    spec = importlib.util.spec_from_file_location("website_operator", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


op = _load_operator()
SITE = {"image": "nginx:1.25", "port": 80, "replicas": 2}


# --- spec validation ----------------------------------------------------------


def test_website_spec_fills_in_the_crd_defaults() -> None:
    assert op.website_spec("shop", {}) == {"image": "nginx:1.25", "port": 80, "replicas": 1}


def test_website_spec_keeps_what_is_given() -> None:
    spec = {"image": "registry.example.com/web@sha256:" + "a" * 64, "port": 8080, "replicas": 0}
    assert op.website_spec("a" * 63, spec) == spec


@pytest.mark.parametrize("name", ["1shop", "Shop", "shop.example", "shop-", "a" * 64, "", "shop\n", "shop_1"])
def test_website_spec_refuses_names_that_are_no_service_name(name: str) -> None:
    with pytest.raises(ValueError, match="DNS-1035 label") as raised:
        op.website_spec(name, {})
    assert repr(name) in str(raised.value) and "rename the Website" in str(raised.value)


@pytest.mark.parametrize(("field", "value"), [
    ("image", ""), ("image", "nginx 1.25"), ("image", " nginx"), ("image", 7), ("image", None),
    ("port", 0), ("port", 65536), ("port", 70000), ("port", "80"), ("port", True), ("port", 80.0),
    ("replicas", -1), ("replicas", 51), ("replicas", "2"), ("replicas", False),
])
def test_website_spec_refuses_unusable_fields(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"spec.{field}") as raised:
        op.website_spec("shop", {field: value})
    assert repr(value) in str(raised.value)


# --- manifests --------------------------------------------------------------


OWNER_REFERENCE = {"apiVersion": "example.com/v1", "kind": "Website", "name": "shop", "uid": OWNER_UID,
                   "controller": True, "blockOwnerDeletion": True}


def test_children_are_controlled_by_the_website() -> None:
    owner = op.owner_body("shop", OWNER_UID)
    manifests = (op.deployment_manifest("shop", "web", SITE, owner), op.service_manifest("shop", "web", SITE, owner))
    for manifest in manifests:
        assert manifest["metadata"]["ownerReferences"] == [OWNER_REFERENCE]


def test_deployment_manifest() -> None:
    owner = op.owner_body("shop", OWNER_UID)
    manifest = op.deployment_manifest("shop", "web", SITE, owner)
    labels = {"app.kubernetes.io/name": "shop", "app.kubernetes.io/managed-by": "website-operator"}
    assert (manifest["apiVersion"], manifest["kind"]) == ("apps/v1", "Deployment")
    assert manifest["metadata"] == {"name": "shop", "namespace": "web", "labels": labels,
                                    "ownerReferences": [OWNER_REFERENCE]}
    spec = manifest["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"] == {"matchLabels": labels}
    assert spec["template"]["metadata"]["labels"] == labels
    (container,) = spec["template"]["spec"]["containers"]
    assert container["image"] == "nginx:1.25"
    assert container["ports"] == [{"name": "http", "containerPort": 80, "protocol": "TCP"}]
    assert container["readinessProbe"]["tcpSocket"] == {"port": "http"}


def test_service_manifest_targets_the_named_container_port() -> None:
    owner = op.owner_body("shop", OWNER_UID)
    manifest = op.service_manifest("shop", "web", {**SITE, "port": 8080}, owner)
    assert (manifest["apiVersion"], manifest["kind"]) == ("v1", "Service")
    assert manifest["metadata"]["ownerReferences"] == [OWNER_REFERENCE]
    assert manifest["spec"] == {
        "selector": {"app.kubernetes.io/name": "shop", "app.kubernetes.io/managed-by": "website-operator"},
        "ports": [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}],
    }


def test_image_or_port_change_the_pod_template_replicas_do_not() -> None:
    owner = op.owner_body("shop", OWNER_UID)

    def template(site: dict[str, Any]) -> dict[str, Any]:
        return op.deployment_manifest("shop", "web", site, owner)["spec"]["template"]

    assert template({**SITE, "image": "nginx:1.26"}) != template(SITE)  # a new ReplicaSet
    assert template({**SITE, "port": 8080}) != template(SITE)
    assert template({**SITE, "replicas": 5}) == template(SITE)  # scales the same one


def test_owning_website_reads_the_controller_reference() -> None:
    owner = OWNER_REFERENCE
    def deployment(name: str, **ref: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, "ownerReferences": [{**owner, **ref}]}}

    assert op.owning_website(deployment("shop")) == "shop"
    assert op.owning_website(deployment("shop", controller=False)) is None
    assert op.owning_website(deployment("shop", kind="Tenant")) is None
    assert op.owning_website({"metadata": {}}) is None
    # A Deployment of another name that claims the Website as its controller is not its Deployment.
    assert op.owning_website(deployment("decoy")) is None


# --- rollout status ---------------------------------------------------------


def deployment(wanted: int = 2, generation: int = 1, **status: int) -> dict[str, Any]:
    return {"metadata": {"generation": generation}, "spec": {"replicas": wanted}, "status": status}


def test_rollout_status_complete() -> None:
    body = deployment(2, observedGeneration=1, replicas=2, updatedReplicas=2, readyReplicas=2)
    assert op.rollout_status(body) == {"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "rollout": "Complete",
                                       "rolloutMessage": None}


def test_rollout_status_says_why_pods_are_refused() -> None:
    """The Deployment controller copies the ReplicaSet's ReplicaFailure condition onto the Deployment."""
    body = deployment(2, observedGeneration=1, replicas=0, updatedReplicas=0)
    body["status"]["conditions"] = [
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated"},
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
         "message": 'pods "shop-1" is forbidden: failed quota: tenant-quota: must specify limits.cpu'},
    ]
    status = op.rollout_status(body)
    assert status["rollout"] == "ReplicaFailure"
    assert status["rolloutMessage"] == ('FailedCreate: pods "shop-1" is forbidden: failed quota: tenant-quota: '
                                        'must specify limits.cpu')
    body["status"]["conditions"][1]["status"] = "False"  # resolved: the message goes (None removes it)
    assert op.rollout_status(body)["rollout"] == "Progressing" and op.rollout_status(body)["rolloutMessage"] is None


def test_website_spec_keeps_resources_and_the_deployment_carries_them() -> None:
    resources = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": 1}}
    site = op.website_spec("shop", {"resources": resources})
    assert site["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1"}}
    owner = op.owner_body("shop", "uid-1")
    (container,) = op.deployment_manifest("shop", "ns", site, owner)["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == site["resources"]
    (container,) = op.deployment_manifest("shop", "ns", op.website_spec("shop", {}), owner)[
        "spec"]["template"]["spec"]["containers"]
    assert "resources" not in container  # not stated: nothing sent, so nothing owned


@pytest.mark.parametrize("resources", [
    "100m", {"requests": "100m"}, {"requests": {"gpu": 1}}, {"limits": {"cpu": "lots"}}, {"limits": {"cpu": True}},
    {"minimum": {"cpu": "1"}},
])
def test_website_spec_refuses_unusable_resources(resources: Any) -> None:
    with pytest.raises(ValueError, match=r"spec\.resources"):
        op.website_spec("shop", {"resources": resources})


@pytest.mark.parametrize("body", [
    deployment(2),  # just created: no status yet
    deployment(2, observedGeneration=1, replicas=2, updatedReplicas=2, readyReplicas=1),  # a Pod not ready
    deployment(2, observedGeneration=1, replicas=3, updatedReplicas=2, readyReplicas=2),  # an old Pod left
    deployment(2, generation=2, observedGeneration=1, replicas=2, updatedReplicas=2, readyReplicas=2),  # not seen yet
])
def test_rollout_status_progressing(body: dict[str, Any]) -> None:
    status = op.rollout_status(body)
    assert status["rollout"] == "Progressing"
    assert status["replicas"] == 2
    assert status["readyReplicas"] == body["status"].get("readyReplicas", 0)


def test_rollout_status_zero_replicas_is_complete() -> None:
    assert op.rollout_status(deployment(0, observedGeneration=1))["rollout"] == "Complete"


# --- the CRD ----------------------------------------------------------------


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text())


def test_crd_identity(crd: dict[str, Any]) -> None:
    assert crd["metadata"]["name"] == "websites.example.com"
    assert (crd["spec"]["group"], crd["spec"]["scope"]) == ("example.com", "Namespaced")
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["singular"]) == ("Website", "websites", "website")
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


def test_crd_printer_columns(crd: dict[str, Any]) -> None:
    (version,) = crd["spec"]["versions"]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Image": ".spec.image", "Port": ".spec.port", "Desired": ".spec.replicas",
        "Ready": ".status.readyReplicas", "Rollout": ".status.rollout", "Phase": ".status.phase",
        "Age": ".metadata.creationTimestamp",
    }


def test_crd_defaults_and_limits_are_the_operators(crd: dict[str, Any]) -> None:
    fields = crd_schema(crd)["properties"]["spec"]["properties"]
    assert fields["image"]["default"] == op.DEFAULT_IMAGE
    port = fields["port"]
    assert (port["default"], port["minimum"], port["maximum"]) == (op.DEFAULT_PORT, 1, 65535)
    assert fields["replicas"]["default"] == op.DEFAULT_REPLICAS
    assert (fields["replicas"]["minimum"], fields["replicas"]["maximum"]) == (0, op.MAX_REPLICAS)


@pytest.mark.parametrize("name", ["shop", "a" * 63, "a" * 64, "1shop", "shop.example", "Shop", "s-1", "s-"])
def test_crd_name_rule_agrees_with_the_operator(crd: dict[str, Any], name: str) -> None:
    rule = crd_schema(crd)["properties"]["metadata"]["properties"]["name"]
    schema_accepts = len(name) <= rule["maxLength"] and bool(re.search(rule["pattern"], name))
    try:
        op.website_spec(name, {})
        operator_accepts = True
    except ValueError:
        operator_accepts = False
    assert schema_accepts == operator_accepts
    assert rule["pattern"] == op.NAME_PATTERN


@pytest.mark.parametrize("image", ["nginx:1.25", "a", "nginx 1.25", "nginx\t", " nginx"])
def test_crd_image_rule_agrees_with_the_operator(crd: dict[str, Any], image: str) -> None:
    rule = crd_schema(crd)["properties"]["spec"]["properties"]["image"]
    schema_accepts = bool(re.search(rule["pattern"], image))
    try:
        op.website_spec("shop", {"image": image})
        operator_accepts = True
    except ValueError:
        operator_accepts = False
    assert schema_accepts == operator_accepts


def test_crd_every_field_is_described(crd: dict[str, Any]) -> None:
    def fields(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
        found = []
        for key, sub in schema.get("properties", {}).items():
            found += [(f"{path}.{key}", sub), *fields(sub, f"{path}.{key}")]
        return found

    assert [p for p, sub in fields(crd_schema(crd)) if p != ".metadata" and not sub.get("description")] == []


# --- reconcile_website: requests, change detection, error routing -------------


class Reports(list):
    def __call__(self, reason: str, message: str) -> None:
        self.append((reason, message))


def live(manifest: dict[str, Any], **status: Any) -> dict[str, Any]:
    """What the API server returns for an applied manifest (status included)."""
    obj = copy.deepcopy(manifest)
    obj["metadata"].update(uid="child-uid", resourceVersion="7")
    obj["status"] = status
    return obj


def desired(site: dict[str, Any] = SITE) -> tuple[dict[str, Any], dict[str, Any]]:
    owner = op.owner_body("shop", OWNER_UID)
    return op.deployment_manifest("shop", "web", site, owner), op.service_manifest("shop", "web", site, owner)


def reconcile(
    apps: StubApi, core: StubApi, spec: dict[str, Any] = SITE, reports: Reports | None = None
) -> dict[str, Any]:
    return op.reconcile_website("shop", "web", spec, uid=OWNER_UID, apps=apps, core=core, report=reports)


CREATE_ENTRY = {"manager": "website-operator", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}}
APPLY_ENTRY = {"manager": "website-operator", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {}}


def created(manifest: dict[str, Any], *entries: dict[str, Any]) -> dict[str, Any]:
    """A child as the API returns it after our create (and our apply): with its field managers."""
    obj = live(manifest)
    obj["metadata"]["managedFields"] = list(entries or [CREATE_ENTRY])
    return obj


def test_reconcile_creates_an_absent_child_then_applies_it_as_ours() -> None:
    deployment_, service = desired()
    apps = StubApi(read_namespaced_deployment=api_error(404), create_namespaced_deployment=created(deployment_),
                   patch_namespaced_deployment=[created(deployment_, CREATE_ENTRY, APPLY_ENTRY), live(deployment_)])
    core = StubApi(read_namespaced_service=api_error(404), create_namespaced_service=created(service),
                   patch_namespaced_service=[created(service, CREATE_ENTRY, APPLY_ENTRY), live(service)])
    reports = Reports()
    status = reconcile(apps, core, reports=reports)
    assert status == {"deployment": "shop", "service": "shop", "phase": "Applied"}
    assert apps.called() == ["read_namespaced_deployment", "create_namespaced_deployment",
                             "patch_namespaced_deployment", "patch_namespaced_deployment"]
    (_, create), = apps.calls_to("create_namespaced_deployment")
    assert create["namespace"] == "web" and create["field_manager"] == "website-operator"
    assert op._as_dict(create["body"]) == deployment_  # a plain POST: 409 if the name was taken meanwhile
    (_, applied), (_, handover) = apps.calls_to("patch_namespaced_deployment")
    assert applied == {
        "name": "shop", "namespace": "web", "body": deployment_, "field_manager": "website-operator",
        "force": True, "_content_type": "application/apply-patch+yaml",
    }
    # The create's ownership entry goes once the apply owns the fields (a port it stops sending is removed).
    assert handover["body"] == {"metadata": {"resourceVersion": "7", "managedFields": [APPLY_ENTRY]}}
    assert [op._as_dict(kw["body"]) for _, kw in core.calls_to("create_namespaced_service")] == [service]
    assert reports == [
        ("DeploymentCreated", "created Deployment web/shop: image nginx:1.25, port 80, replicas 2"),
        ("ServiceCreated", "created Service web/shop: port 80"),
    ]


def test_the_hand_over_is_recomputed_when_the_child_changed_meanwhile() -> None:
    # The Deployment controller stamps its revision annotation right after our
    # create: the conditional removal answers 409; we read the child again and
    # remove our create's entry from what is there now, keeping the newcomer's.
    deployment_, service = desired()
    controller = {"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}}
    stamped = created(deployment_, CREATE_ENTRY, APPLY_ENTRY, controller)
    stamped["metadata"]["resourceVersion"] = "8"
    apps = StubApi(read_namespaced_deployment=[api_error(404), stamped],
                   create_namespaced_deployment=created(deployment_),
                   patch_namespaced_deployment=[created(deployment_, CREATE_ENTRY, APPLY_ENTRY),
                                                api_error(409, "the object has been modified"), live(deployment_)])
    core = StubApi(read_namespaced_service=live(service), patch_namespaced_service=live(service))
    reconcile(apps, core)
    handovers = [kw["body"] for _, kw in apps.calls_to("patch_namespaced_deployment") if "_content_type" not in kw]
    assert handovers == [
        {"metadata": {"resourceVersion": "7", "managedFields": [APPLY_ENTRY]}},
        {"metadata": {"resourceVersion": "8", "managedFields": [APPLY_ENTRY, controller]}},
    ]


def test_a_hand_over_that_keeps_conflicting_is_retried_soon() -> None:
    deployment_, service = desired()
    apps = StubApi(read_namespaced_deployment=[api_error(404), created(deployment_, CREATE_ENTRY, APPLY_ENTRY)],
                   create_namespaced_deployment=created(deployment_),
                   patch_namespaced_deployment=[created(deployment_, CREATE_ENTRY, APPLY_ENTRY),
                                                api_error(409, "the object has been modified")])
    core = StubApi(read_namespaced_service=live(service), patch_namespaced_service=live(service))
    with pytest.raises(kopf.TemporaryError) as raised:
        reconcile(apps, core)
    assert raised.value.delay == op.CONFLICT_RETRY_DELAY and "kept changing" in str(raised.value)
    assert len(apps.calls_to("patch_namespaced_deployment")) == 1 + op.HANDOVER_ATTEMPTS


def test_a_name_taken_between_our_read_and_our_create_is_not_taken_over() -> None:
    # Absent when read; someone creates a Service of the name before our POST:
    # the API refuses the POST (409), and the object found is not ours.
    deployment_, service = desired()
    apps = StubApi(read_namespaced_deployment=live(deployment_), patch_namespaced_deployment=live(deployment_))
    core = StubApi(read_namespaced_service=[api_error(404), foreign(service)],
                   create_namespaced_service=api_error(409, 'services "shop" already exists'))
    reports = Reports()
    with pytest.raises(op.NameTaken) as raised:
        reconcile(apps, core, reports=reports)
    assert core.called() == ["read_namespaced_service", "create_namespaced_service", "read_namespaced_service"]
    assert "Service web/shop exists and was not created for this Website" in str(raised.value)
    assert reports == []


@pytest.mark.parametrize("found", ["ours", "adoptable"])
def test_a_child_created_meanwhile_that_is_ours_or_adoptable_is_applied(found: str) -> None:
    # Our own earlier attempt (or another replica of ours) created it, or its
    # maker marked it for adoption: the 409 leads to the usual claim.
    deployment_, service = desired()
    meanwhile = live(service) if found == "ours" else foreign(service, annotations={"example.com/adopt": "shop"})
    apps = StubApi(read_namespaced_deployment=live(deployment_), patch_namespaced_deployment=live(deployment_))
    core = StubApi(read_namespaced_service=[api_error(404), meanwhile],
                   create_namespaced_service=api_error(409, 'services "shop" already exists'),
                   patch_namespaced_service=live(service))
    reports = Reports()
    reconcile(apps, core, reports=reports)
    applies = [kw for _, kw in core.calls_to("patch_namespaced_service") if "_content_type" in kw]
    assert [kw["body"] for kw in applies] == [service]
    expected = [] if found == "ours" else [("ServiceAdopted", "adopted Service web/shop (example.com/adopt=shop)")]
    assert reports == expected


def test_a_child_created_and_deleted_meanwhile_is_retried_soon() -> None:
    deployment_, _ = desired()
    apps = StubApi(read_namespaced_deployment=live(deployment_), patch_namespaced_deployment=live(deployment_))
    core = StubApi(read_namespaced_service=api_error(404), create_namespaced_service=api_error(409, "already exists"))
    with pytest.raises(kopf.TemporaryError) as raised:
        reconcile(apps, core)
    assert raised.value.delay == op.CONFLICT_RETRY_DELAY and "appeared and vanished" in str(raised.value)
    assert not core.calls_to("patch")


def test_create_entry_removal_keeps_every_other_manager() -> None:
    other = {"manager": "kubectl-edit", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}}
    meta = {"resourceVersion": "9", "managedFields": [CREATE_ENTRY, APPLY_ENTRY, other]}
    removal = op.create_entry_removal(meta)
    assert removal == {"metadata": {"resourceVersion": "9", "managedFields": [APPLY_ENTRY, other]}}
    assert op.create_entry_removal({"resourceVersion": "9", "managedFields": [APPLY_ENTRY]}) is None
    # Nothing left to keep: an empty list would clear nothing.
    assert op.create_entry_removal({"resourceVersion": "9", "managedFields": [CREATE_ENTRY]}) is None


def test_reconcile_reports_nothing_when_nothing_changed() -> None:
    # Only status differs between the read and the apply (the Deployment
    # controller's doing): not a change of ours.
    deployment_, service = desired()
    apps = StubApi(read_namespaced_deployment=live(deployment_, readyReplicas=1),
                patch_namespaced_deployment=live(deployment_, readyReplicas=2))
    core = StubApi(read_namespaced_service=live(service), patch_namespaced_service=live(service))
    reports = Reports()
    reconcile(apps, core, reports=reports)
    assert reports == []


def test_reconcile_reports_what_a_change_rolled() -> None:
    old_deployment, old_service = desired()
    new_site = {**SITE, "image": "nginx:1.26", "port": 8080}
    new_deployment, new_service = desired(new_site)
    apps = StubApi(read_namespaced_deployment=live(old_deployment), patch_namespaced_deployment=live(new_deployment))
    core = StubApi(read_namespaced_service=live(old_service), patch_namespaced_service=live(new_service))
    reports = Reports()
    reconcile(apps, core, new_site, reports)
    assert reports == [
        ("DeploymentUpdated", "updated Deployment web/shop: image nginx:1.25 -> nginx:1.26, port 80 -> 8080"),
        ("ServiceUpdated", "updated Service web/shop: port 80 -> 8080"),
    ]


def test_reconcile_reports_restored_labels() -> None:
    deployment_, service = desired()
    relabelled = live(deployment_)
    relabelled["metadata"]["labels"] = {"app.kubernetes.io/name": "shop"}
    apps = StubApi(read_namespaced_deployment=relabelled, patch_namespaced_deployment=live(deployment_))
    core = StubApi(read_namespaced_service=live(service), patch_namespaced_service=live(service))
    reports = Reports()
    reconcile(apps, core, reports=reports)
    assert reports == [
        ("DeploymentUpdated", "updated Deployment web/shop: labels, owner reference or other fields restored")
    ]


# --- ownership: claim before touching ----------------------------------------


def foreign(manifest: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """The same object as made by someone else: our labels even, but no owner reference of ours."""
    obj = live(manifest)
    del obj["metadata"]["ownerReferences"]
    obj["metadata"].update(meta)
    return obj


@pytest.mark.parametrize("taken", ["Deployment", "Service"])
def test_a_child_that_is_not_ours_stops_both_writes(taken: str) -> None:
    deployment_, service = desired()
    apps = StubApi(read_namespaced_deployment=foreign(deployment_) if taken == "Deployment" else live(deployment_))
    core = StubApi(read_namespaced_service=foreign(service) if taken == "Service" else api_error(404))
    with pytest.raises(op.NameTaken) as raised:
        reconcile(apps, core)
    assert apps.called() == ["read_namespaced_deployment"] and core.called() == ["read_namespaced_service"]
    assert f"{taken} web/shop exists and was not created for this Website" in str(raised.value)
    assert f"kubectl annotate {taken.lower()} shop -n web example.com/adopt=shop" in str(raised.value)
    assert raised.value.delay == 30


def test_adoption_patches_the_owner_reference_in_then_applies() -> None:
    deployment_, service = desired()
    marked = foreign(service, annotations={"example.com/adopt": "shop"})
    apps = StubApi(read_namespaced_deployment=live(deployment_), patch_namespaced_deployment=live(deployment_))
    core = StubApi(read_namespaced_service=marked, patch_namespaced_service=[live(service), live(service)])
    reports = Reports()
    reconcile(apps, core, reports=reports)
    (_, adopt), (_, apply) = core.calls_to("patch_namespaced_service")
    assert adopt["body"] == {"metadata": {"resourceVersion": "7", "annotations": {"example.com/adopt": None},
                                          "ownerReferences": [OWNER_REFERENCE]}}
    assert "_content_type" not in adopt  # a strategic merge: merged into the others by uid
    assert apply["body"] == service and apply["force"] is True
    assert reports == [("ServiceAdopted", "adopted Service web/shop (example.com/adopt=shop)")]


@pytest.mark.parametrize(("name", "spec"), [("shop.example", SITE), ("shop", {**SITE, "port": 70000}),
                                            ("shop", {**SITE, "image": "nginx 1.25"})])
def test_reconcile_bad_input_is_permanent_and_touches_nothing(name: str, spec: dict[str, Any]) -> None:
    apps, core = StubApi(), StubApi()
    with pytest.raises(kopf.PermanentError) as raised:
        op.reconcile_website(name, "web", spec, uid=OWNER_UID, apps=apps, core=core)
    assert isinstance(raised.value.__cause__, ValueError)
    assert apps.calls == [] and core.calls == []


def test_reconcile_422_is_permanent_with_the_servers_reason() -> None:
    apps = StubApi(read_namespaced_deployment=api_error(404),
                   create_namespaced_deployment=api_error(422, 'Deployment.apps "shop" is invalid'))
    with pytest.raises(kopf.PermanentError, match=r'Deployment\.apps "shop" is invalid.*fix the Website'):
        reconcile(apps, StubApi(read_namespaced_service=api_error(404)))


def test_reconcile_429_retries_after_retry_after() -> None:
    apps = StubApi(read_namespaced_deployment=api_error(429, "too many requests", {"Retry-After": "7"}))
    with pytest.raises(kopf.TemporaryError) as raised:
        reconcile(apps, StubApi())
    assert raised.value.delay == 7 and "429" in str(raised.value)


@pytest.mark.parametrize("status", [500, 503])
def test_reconcile_5xx_retries_after_the_default_delay(status: int) -> None:
    deployment_, _ = desired()
    apps = StubApi(read_namespaced_deployment=live(deployment_), patch_namespaced_deployment=live(deployment_))
    core = StubApi(read_namespaced_service=api_error(status, "etcdserver: request timed out"))
    with pytest.raises(kopf.TemporaryError) as raised:
        reconcile(apps, core)
    assert raised.value.delay == op.DEFAULT_RETRY_DELAY == 10
    assert "etcdserver: request timed out" in str(raised.value)


def test_reconcile_403_from_rbac_points_at_the_clusterrole() -> None:
    apps = StubApi(read_namespaced_deployment=api_error(403, 'deployments.apps "shop" is forbidden'))
    with pytest.raises(kopf.TemporaryError) as raised:
        reconcile(apps, StubApi())
    assert "ClusterRole 'website-operator'" in str(raised.value) and raised.value.delay == 10


def test_reconcile_403_from_a_terminating_namespace_is_not_blamed_on_rbac() -> None:
    message = ('deployments.apps "shop" is forbidden: '
               "unable to create new content in namespace web because it is being terminated")
    apps = StubApi(read_namespaced_deployment=api_error(404), create_namespaced_deployment=api_error(403, message))
    with pytest.raises(kopf.TemporaryError) as raised:
        reconcile(apps, StubApi(read_namespaced_service=api_error(404)))
    assert "being deleted" in str(raised.value) and "ClusterRole" not in str(raised.value)


def test_reconcile_other_errors_are_left_to_kopfs_backoff() -> None:
    apps = StubApi(read_namespaced_deployment=api_error(400, "bad request"))
    with pytest.raises(ApiException):
        reconcile(apps, StubApi())


# --- the Deployment watcher's status write ------------------------------------


def test_write_rollout_status_merges_into_status() -> None:
    custom = StubApi(patch_namespaced_custom_object_status={})
    status = {"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "rollout": "Progressing"}
    assert op.write_rollout_status("web", "shop", status, custom=custom) is True
    assert custom.calls == [("patch_namespaced_custom_object_status", {
        "group": "example.com", "version": "v1", "namespace": "web", "plural": "websites", "name": "shop",
        "body": {"status": status}})]


def test_write_rollout_status_retries_overload_then_succeeds() -> None:
    custom = StubApi(patch_namespaced_custom_object_status=[
        api_error(429, "slow down", {"Retry-After": "30"}), api_error(503, "unavailable"), {}])
    slept: list[float] = []
    assert op.write_rollout_status("web", "shop", {}, custom=custom, sleep=slept.append) is True
    assert slept == [op.STATUS_RETRY_MAX_DELAY, 1.0]  # Retry-After capped; no header: 1 s


def test_write_rollout_status_gives_up_after_its_attempts() -> None:
    custom = StubApi(patch_namespaced_custom_object_status=api_error(500, "down"))
    with pytest.raises(ApiException):
        op.write_rollout_status("web", "shop", {}, custom=custom, sleep=lambda _: None)
    assert len(custom.calls) == op.STATUS_WRITE_ATTEMPTS


def test_write_rollout_status_of_a_deleted_website_is_no_error() -> None:
    custom = StubApi(patch_namespaced_custom_object_status=api_error(404, "not found"))
    assert op.write_rollout_status("web", "shop", {}, custom=custom) is False
    assert len(custom.calls) == 1


# --- drift of an owned Deployment --------------------------------------------


def _applied(site: dict[str, Any]) -> dict[str, Any]:
    return op.deployment_manifest("shop", "ns", site, op.owner_body("shop", "uid-1"))


def test_a_deployment_as_declared_has_no_drift() -> None:
    site = op.website_spec("shop", {"replicas": 2, "resources": {"limits": {"cpu": "0.5", "memory": "64Mi"}}})
    stored = _applied(site)
    # The API server stores quantities normalised: 0.5 CPU as 500m.
    stored["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "500m"
    assert op.deployment_drift(stored, site) is None


@pytest.mark.parametrize(("path", "value", "said"), [
    (("spec", "replicas"), 5, "replicas 5 (the Website asks for 2)"),
    (("spec", "template", "spec", "containers", 0, "image"), "nginx:evil", "image 'nginx:evil'"),
])
def test_drift_says_what_was_changed_by_hand(path: tuple[Any, ...], value: Any, said: str) -> None:
    site = op.website_spec("shop", {"replicas": 2})
    stored = _applied(site)
    target = stored
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    drift = op.deployment_drift(stored, site)
    assert drift is not None and said in drift
