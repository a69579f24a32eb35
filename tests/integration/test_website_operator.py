"""The kopf Website operator against the real cluster: what its README promises, proven.

Each test runs its own operator confined to the test's namespace
(``--namespace``), so tests in parallel never share one. Pods become Running and
ready because kwok plays the kubelet on the local cluster; the Deployment,
ReplicaSet and garbage collector controllers are the real kube-controller-manager.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from operatorlab.operators import OperatorProcess, load_module, operator_path
from operatorlab.wait import eventually

WEBSITES = ("example.com", "v1")
PLURAL = "websites"
MANAGED = "app.kubernetes.io/managed-by=website-operator"


def website(name: str, **spec: object) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module")
def apps(api_client) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture
def operator(namespace, tmp_path) -> Iterator[OperatorProcess]:
    op = OperatorProcess(operator_path("website"), namespaces=[namespace], log_path=tmp_path / "operator.log").start()
    yield op
    op.stop()


def _get(custom, namespace: str, name: str) -> dict:
    return custom.get_namespaced_custom_object(*WEBSITES, namespace, PLURAL, name)


def _status(custom, namespace: str, name: str) -> dict:
    return _get(custom, namespace, name).get("status", {})


def _ready(custom, namespace: str, name: str, replicas: int) -> dict | None:
    """The status once the reconcile applied both children and the rollout is complete with ``replicas`` ready.

    Both: the Deployment watcher can report the rollout complete before the
    reconcile has created the Service (else None).
    """
    status = _status(custom, namespace, name)
    done = (
        status.get("phase") == "Applied"
        and status.get("rollout") == "Complete"
        and status.get("readyReplicas") == status.get("replicas") == replicas
    )
    return status if done else None


def _events(core, namespace: str, name: str) -> list[client.CoreV1Event]:
    selector = f"involvedObject.kind=Website,involvedObject.name={name}"
    return core.list_namespaced_event(namespace, field_selector=selector).items


def _not_found(read) -> bool:
    try:
        read()
    except client.ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def _written_by_us(obj) -> tuple:
    """When the operator last changed an object: its generation and its field manager's entry.

    Not the resourceVersion: the Deployment controller keeps rewriting status (conditions)
    for a while after the Pods are ready. A no-op server-side apply changes neither of these.
    """
    ours = [(f.operation, f.time) for f in obj.metadata.managed_fields or [] if f.manager == "website-operator"]
    assert ours, "the operator's field manager owns fields of it"
    return obj.metadata.generation, ours


def _replica_sets(apps, namespace: str, name: str) -> list[client.V1ReplicaSet]:
    selector = f"app.kubernetes.io/name={name},{MANAGED}"
    return apps.list_namespaced_replica_set(namespace, label_selector=selector).items


def test_create_makes_deployment_service_and_ready_status(operator, custom, core, apps, namespace, record_property):
    started = time.monotonic()
    created = custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("shop", replicas=2))
    status = eventually(lambda: _ready(custom, namespace, "shop", 2), timeout=60, message="2 of 2 ready")
    latency = time.monotonic() - started
    record_property("create_to_ready_seconds", round(latency, 3))
    print(f"create -> status readyReplicas == replicas: {latency:.2f}s")

    assert status["phase"] == "Applied" and status["observedGeneration"] == 1
    assert (status["deployment"], status["service"]) == ("shop", "shop")
    deployment = apps.read_namespaced_deployment("shop", namespace)
    labels = {"app.kubernetes.io/name": "shop", "app.kubernetes.io/managed-by": "website-operator"}
    assert deployment.metadata.labels == labels
    (owner,) = deployment.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "Website", "shop", created["metadata"]["uid"], True)
    # The watcher reacts to events; it writes nothing on the Deployment (no kopf state).
    assert not [a for a in (deployment.metadata.annotations or {}) if a.startswith("kopf")]
    (container,) = deployment.spec.template.spec.containers
    assert container.image == "nginx:1.25" and container.ports[0].container_port == 80
    service = core.read_namespaced_service("shop", namespace)
    assert service.metadata.owner_references[0].uid == created["metadata"]["uid"]
    assert [(p.port, p.target_port) for p in service.spec.ports] == [(80, "http")]
    assert service.spec.selector == labels
    pods = core.list_namespaced_pod(namespace, label_selector=MANAGED).items
    assert len(pods) == 2 and {p.status.phase for p in pods} == {"Running"}
    assert {p.spec.node_name for p in pods} == {"kwok-node-0"}
    eventually(lambda: {"DeploymentCreated", "ServiceCreated"} <= {e.reason for e in _events(core, namespace, "shop")},
               timeout=15, message="Events of the creation")
    # No finalizer: the garbage collector does the deleting.
    assert not _get(custom, namespace, "shop")["metadata"].get("finalizers")


def test_restart_reapplies_without_writing(custom, core, apps, namespace, tmp_path):
    """on.resume re-applies every Website; server-side apply of an unchanged spec writes nothing."""
    first = OperatorProcess(operator_path("website"), namespaces=[namespace], log_path=tmp_path / "first.log").start()
    try:
        custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("blog"))
        eventually(lambda: _ready(custom, namespace, "blog", 1), timeout=60, message="ready")
    finally:
        first.stop()
    versions = (_written_by_us(apps.read_namespaced_deployment("blog", namespace)),
                _written_by_us(core.read_namespaced_service("blog", namespace)))
    second = OperatorProcess(operator_path("website"), namespaces=[namespace], log_path=tmp_path / "second.log").start()
    try:
        eventually(lambda: f"[{namespace}/blog] Handler 'reconcile' succeeded" in second.log(),
                   timeout=30, message="resumed and reconciled")
        assert "resum" in second.log().lower()
        assert (_written_by_us(apps.read_namespaced_deployment("blog", namespace)),
                _written_by_us(core.read_namespaced_service("blog", namespace))) == versions
        reasons = [e.reason for e in _events(core, namespace, "blog")]
        assert sorted(reasons) == ["DeploymentCreated", "ServiceCreated"]  # nothing new from the restart
    finally:
        second.stop()


def test_resume_recreates_a_child_deleted_while_the_operator_was_down(custom, core, namespace, tmp_path):
    op = OperatorProcess(operator_path("website"), namespaces=[namespace], log_path=tmp_path / "op.log").start()
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("docs"))
    eventually(lambda: _ready(custom, namespace, "docs", 1), timeout=60, message="ready")
    op.stop()
    core.delete_namespaced_service("docs", namespace)
    assert _not_found(lambda: core.read_namespaced_service("docs", namespace))
    op.start()
    try:
        service = eventually(lambda: core.read_namespaced_service("docs", namespace), timeout=30,
                             message="Service re-created by on.resume")
        assert service.spec.ports[0].port == 80
        eventually(lambda: [e.reason for e in _events(core, namespace, "docs")].count("ServiceCreated") == 2,
                   timeout=15, message="a second ServiceCreated Event")
    finally:
        op.stop()


def test_a_deployment_scaled_or_deleted_by_hand_is_put_back_while_the_operator_runs(
        operator, custom, core, apps, namespace):
    """Drift healed at once by watching the children, not at the operator's next restart."""
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("drift", replicas=2))
    eventually(lambda: _ready(custom, namespace, "drift", 2), timeout=60, message="ready")
    apps.patch_namespaced_deployment_scale("drift", namespace, {"spec": {"replicas": 5}})
    eventually(lambda: apps.read_namespaced_deployment("drift", namespace).spec.replicas == 2, timeout=20,
               message="scaled back to the Website's 2")
    first = apps.read_namespaced_deployment("drift", namespace).metadata.uid
    apps.delete_namespaced_deployment("drift", namespace)
    eventually(lambda: apps.read_namespaced_deployment("drift", namespace).metadata.uid != first, timeout=20,
               message="the Deployment re-created")
    eventually(lambda: _ready(custom, namespace, "drift", 2), timeout=60, message="ready again, in status too")
    # kopf posts Events from a queue of its own: they may trail the repair a little.
    eventually(lambda: [e.reason for e in _events(core, namespace, "drift")].count("DeploymentCreated") == 2,
               timeout=15, message="DeploymentCreated for the re-created Deployment")
    reasons = [e.reason for e in _events(core, namespace, "drift")]
    assert 2 <= reasons.count("DriftDetected") <= 3, reasons  # one per change by hand (at most one more, racing)
    assert "Traceback" not in operator.log()


def test_changing_the_image_rolls_a_new_replica_set(operator, custom, core, apps, namespace):
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("shop", replicas=2))
    eventually(lambda: _ready(custom, namespace, "shop", 2), timeout=60, message="ready")
    (first,) = _replica_sets(apps, namespace, "shop")
    uid = apps.read_namespaced_deployment("shop", namespace).metadata.uid

    custom.patch_namespaced_custom_object(*WEBSITES, namespace, PLURAL, "shop", {"spec": {"image": "nginx:1.26"}})
    eventually(lambda: _status(custom, namespace, "shop").get("observedGeneration") == 2, timeout=30,
               message="the operator saw generation 2")
    eventually(lambda: _ready(custom, namespace, "shop", 2), timeout=60, message="rolled and ready")
    sets = {rs.metadata.name: rs for rs in _replica_sets(apps, namespace, "shop")}
    assert len(sets) == 2 and first.metadata.name in sets
    new = next(rs for name, rs in sets.items() if name != first.metadata.name)
    assert new.spec.template.spec.containers[0].image == "nginx:1.26" and new.spec.replicas == 2
    eventually(lambda: apps.read_namespaced_replica_set(first.metadata.name, namespace).spec.replicas == 0,
               timeout=30, message="the old ReplicaSet scaled to 0")
    # Patched in place (server-side apply), not deleted and re-created.
    assert apps.read_namespaced_deployment("shop", namespace).metadata.uid == uid
    eventually(lambda: {p.spec.containers[0].image for p in core.list_namespaced_pod(
        namespace, label_selector=MANAGED).items if not p.metadata.deletion_timestamp} == {"nginx:1.26"},
        timeout=60, message="only Pods of the new image left")
    eventually(lambda: [e.message for e in _events(core, namespace, "shop") if e.reason == "DeploymentUpdated"],
               timeout=15, message="a DeploymentUpdated Event")
    updates = [e.message for e in _events(core, namespace, "shop") if e.reason == "DeploymentUpdated"]
    assert updates == [f"updated Deployment {namespace}/shop: image nginx:1.25 -> nginx:1.26"]


def test_changing_the_port_moves_the_service_and_rolls(operator, custom, core, apps, namespace):
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("api"))
    eventually(lambda: _ready(custom, namespace, "api", 1), timeout=60, message="ready")
    custom.patch_namespaced_custom_object(*WEBSITES, namespace, PLURAL, "api", {"spec": {"port": 8080}})
    eventually(lambda: [p.port for p in core.read_namespaced_service("api", namespace).spec.ports] == [8080],
               timeout=30, message="the Service exposes 8080, and only 8080")
    eventually(lambda: len(_replica_sets(apps, namespace, "api")) == 2, timeout=30, message="a second ReplicaSet")
    eventually(lambda: _ready(custom, namespace, "api", 1), timeout=60, message="rolled and ready")
    (container,) = apps.read_namespaced_deployment("api", namespace).spec.template.spec.containers
    assert [p.container_port for p in container.ports] == [8080]
    assert core.read_namespaced_service("api", namespace).spec.ports[0].target_port == "http"
    eventually(lambda: "ServiceUpdated" in {e.reason for e in _events(core, namespace, "api")}, timeout=15,
               message="a ServiceUpdated Event")


def test_scaling_follows_spec_replicas_in_status(operator, custom, core, namespace):
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("scale", replicas=1))
    eventually(lambda: _ready(custom, namespace, "scale", 1), timeout=60, message="1 ready")
    custom.patch_namespaced_custom_object(*WEBSITES, namespace, PLURAL, "scale", {"spec": {"replicas": 3}})
    eventually(lambda: _ready(custom, namespace, "scale", 3), timeout=60, message="3 ready")
    custom.patch_namespaced_custom_object(*WEBSITES, namespace, PLURAL, "scale", {"spec": {"replicas": 0}})
    status = eventually(lambda: _ready(custom, namespace, "scale", 0), timeout=60, message="scaled to zero")
    assert status["readyReplicas"] == 0
    eventually(lambda: not core.list_namespaced_pod(namespace, label_selector=MANAGED).items, timeout=60,
               message="no Pods left")


def test_pods_a_quota_refuses_are_reported_and_resources_let_them_in(operator, custom, core, namespace):
    """In a namespace whose quota caps CPU (a Tenant's), a Website without resources never starts: it says why."""
    hard = {"requests.cpu": "1", "limits.cpu": "1"}
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "cpu"}, "spec": {"hard": hard}})
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("capped", replicas=1))
    status = eventually(lambda: (s := _status(custom, namespace, "capped")).get("rollout") == "ReplicaFailure" and s,
                        timeout=60, message="the Website reports the refused Pods")
    assert status["rolloutMessage"].startswith("FailedCreate: ") and "failed quota: cpu" in status["rolloutMessage"]
    resources = {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}
    custom.patch_namespaced_custom_object(*WEBSITES, namespace, PLURAL, "capped", {"spec": {"resources": resources}})
    status = eventually(lambda: _ready(custom, namespace, "capped", 1), timeout=90, message="the Pod is let in")
    assert "rolloutMessage" not in status


def test_deleting_the_website_lets_the_garbage_collector_remove_its_children(
        operator, custom, core, apps, namespace):
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("gone", replicas=2))
    eventually(lambda: _ready(custom, namespace, "gone", 2), timeout=60, message="ready")
    custom.delete_namespaced_custom_object(*WEBSITES, namespace, PLURAL, "gone")
    eventually(lambda: _not_found(lambda: _get(custom, namespace, "gone")), timeout=15,
               message="the Website is gone at once (no finalizer)")
    eventually(lambda: _not_found(lambda: apps.read_namespaced_deployment("gone", namespace)), timeout=60,
               message="the garbage collector deleted the Deployment")
    eventually(lambda: _not_found(lambda: core.read_namespaced_service("gone", namespace)), timeout=60,
               message="the garbage collector deleted the Service")
    eventually(lambda: not _replica_sets(apps, namespace, "gone"), timeout=60, message="ReplicaSets gone")
    eventually(lambda: not core.list_namespaced_pod(namespace, label_selector=MANAGED).items, timeout=90,
               message="Pods gone")
    assert operator.running
    assert "Traceback" not in operator.log()


@pytest.mark.parametrize(("spec", "field"), [
    ({"port": 70000}, "spec.port"),
    ({"port": 0}, "spec.port"),
    ({"replicas": 51}, "spec.replicas"),
    ({"replicas": -1}, "spec.replicas"),
    ({"image": "nginx 1.25"}, "spec.image"),
    ({"image": ""}, "spec.image"),
    ({"resources": {"limits": {"cpu": "lots"}}}, "spec.resources.limits.cpu"),
])
def test_bad_specs_are_refused_by_the_schema(custom, namespace, spec, field):
    with pytest.raises(client.ApiException) as refused:
        custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("bad", **spec))
    assert refused.value.status == 422
    assert field in json.loads(refused.value.body)["message"]


def test_schema_fills_in_the_defaults(custom, namespace):
    created = custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("plain"))
    assert created["spec"] == {"image": "nginx:1.25", "port": 80, "replicas": 1}


# The two tests below depend on the CRD's metadata.name rule; one of them
# removes it for a while, so they never run at the same time.


@pytest.mark.xdist_group("website-crd")
@pytest.mark.parametrize("name", ["my.site", "1site", "a" * 64])
def test_names_that_cannot_name_a_service_are_refused_by_the_schema(custom, namespace, name):
    with pytest.raises(client.ApiException) as refused:
        custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website(name))
    assert refused.value.status == 422
    assert "metadata.name" in json.loads(refused.value.body)["message"]


@pytest.fixture
def loose_website_schema(api_client) -> Iterator[Callable[[], None]]:
    """Loosen the Website CRD: no metadata.name rule, as an older CRD version might have had.

    Objects stored under an older, looser schema stay stored when the schema tightens:
    the operator must cope with input the current schema would refuse. Yields the
    loosening itself (idempotent), to repeat until the create goes through: anything
    that re-applies crds/ meanwhile (a test session starting, a notebook) tightens it
    again. crds/website.yaml is re-applied afterwards.
    """
    from operatorlab import paths
    from operatorlab.cluster import manifests

    ext = client.ApiextensionsV1Api(api_client)

    def loosen() -> None:
        crd = ext.read_custom_resource_definition("websites.example.com")
        if "metadata" in (crd.spec.versions[0].var_schema.open_apiv3_schema.properties or {}):
            ext.patch_custom_resource_definition("websites.example.com", [
                {"op": "remove", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/metadata"}])

    loosen()
    yield loosen
    manifests.apply(api_client, manifests.load(paths.crds_dir() / "website.yaml"))


@pytest.mark.xdist_group("website-crd")
def test_input_that_slipped_past_the_schema_is_reported_not_retried(
        operator, custom, core, apps, namespace, loose_website_schema):
    name = "my.site"  # a fine object name, but no Service name
    eventually(lambda: loose_website_schema() or custom.create_namespaced_custom_object(
        *WEBSITES, namespace, PLURAL, website(name)), timeout=30, message="the looser schema takes effect")
    status = eventually(lambda: _status(custom, namespace, name).get("phase") == "Failed"
                        and _status(custom, namespace, name), timeout=30, message="status Failed")
    assert "DNS-1035 label" in status["message"] and "rename the Website" in status["message"]
    eventually(lambda: _events(core, namespace, name), timeout=15, message="an Event")
    time.sleep(3)  # a retry storm would show up as more attempts and Events by now
    events = _events(core, namespace, name)
    assert [(e.type, e.reason) for e in events] == [("Warning", "ReconcileFailed")]
    assert operator.running
    assert operator.log().count(f"[{namespace}/{name}] Handler 'reconcile' failed permanently") == 1
    assert _not_found(lambda: apps.read_namespaced_deployment(name, namespace)), "nothing half-applied"
    # A healthy Website next to it is served as usual.
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("fine"))
    eventually(lambda: _ready(custom, namespace, "fine", 1), timeout=60, message="the other Website is served")
    # Deleting it is not blocked by anything.
    custom.delete_namespaced_custom_object(*WEBSITES, namespace, PLURAL, name)
    eventually(lambda: _not_found(lambda: _get(custom, namespace, name)), timeout=15, message="deleted")


# --- ownership: claim before touching, delete only what is ours, nothing outlives its owner ---


def _condition(custom, namespace: str, name: str) -> dict:
    """The Website's Ready condition ({} if none yet)."""
    conditions = _status(custom, namespace, name).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def _user_service(core, namespace: str, name: str, **meta) -> None:
    """A Service made by hand: the user's selector and port, even the operator's managed-by label."""
    core.create_namespaced_service(namespace, {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "website-operator", "team": "x"},
                     **meta},
        "spec": {"selector": {"app": "theirs"}, "ports": [{"name": "web", "port": 8080, "targetPort": 8080}]}})


def _service_snapshot(core, namespace: str, name: str) -> dict:
    svc = core.read_namespaced_service(name, namespace)
    return {"spec": svc.spec.to_dict(), "labels": svc.metadata.labels, "annotations": svc.metadata.annotations,
            "ownerReferences": svc.metadata.owner_references, "resourceVersion": svc.metadata.resource_version}


@pytest.mark.long  # two garbage-collector waits
def test_a_foreign_service_survives_create_update_and_delete_of_the_website(operator, custom, core, apps, namespace):
    _user_service(core, namespace, "mine")
    before = _service_snapshot(core, namespace, "mine")
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("mine"))
    ready = eventually(lambda: _condition(custom, namespace, "mine").get("reason") == "NameTaken"
                       and _condition(custom, namespace, "mine"), timeout=30, message="Ready=False, NameTaken")
    assert ready["status"] == "False" and ready["observedGeneration"] == 1
    assert f"Service {namespace}/mine exists and was not created for this Website" in ready["message"]
    assert f"kubectl annotate service mine -n {namespace} example.com/adopt=mine" in ready["message"]
    assert _service_snapshot(core, namespace, "mine") == before
    assert _not_found(lambda: apps.read_namespaced_deployment("mine", namespace)), "no half of a Website"

    custom.patch_namespaced_custom_object(*WEBSITES, namespace, PLURAL, "mine", {"spec": {"port": 9090}})
    eventually(lambda: _condition(custom, namespace, "mine").get("observedGeneration") == 2, timeout=60,
               message="the update is seen, and refused the same way")
    assert _condition(custom, namespace, "mine")["reason"] == "NameTaken"
    assert _service_snapshot(core, namespace, "mine") == before

    custom.delete_namespaced_custom_object(*WEBSITES, namespace, PLURAL, "mine")
    eventually(lambda: _not_found(lambda: _get(custom, namespace, "mine")), timeout=15, message="Website deleted")
    time.sleep(5)  # time for the garbage collector, were there anything of the Website's to collect
    assert _service_snapshot(core, namespace, "mine") == before
    assert [(e.type, e.reason) for e in _events(core, namespace, "mine")] == [("Warning", "NameTaken")]


class _ServiceMadeDuringTheRead(client.CoreV1Api):
    """The real CoreV1Api; on the first read of a Service, someone creates that Service just after.

    The interleaving a real cluster shows only by chance: the operator reads
    (not found), a user's Service of the name appears, the operator writes.
    Every request, the user's included, goes to the real API server.
    """

    def __init__(self, api_client: client.ApiClient, make: Callable[[], None]) -> None:
        super().__init__(api_client)
        self._make: Callable[[], None] | None = make

    def read_namespaced_service(self, *args, **kwargs):
        try:
            return super().read_namespaced_service(*args, **kwargs)
        finally:
            make, self._make = self._make, None
            if make is not None:
                make()


def test_a_service_made_between_the_read_and_the_create_is_not_taken_over(api_client, custom, core, apps, namespace):
    """The create is a plain POST: the API refuses it (409), the Service found is checked, and left alone."""
    website_operator = load_module("website")
    owner = custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("race"))  # no operator runs
    racing = _ServiceMadeDuringTheRead(api_client, lambda: _user_service(core, namespace, "race"))
    with pytest.raises(website_operator.NameTaken, match=f"Service {namespace}/race exists and was not created"):
        website_operator.reconcile_website("race", namespace, owner["spec"], uid=owner["metadata"]["uid"],
                                           apps=apps, core=racing)
    svc = core.read_namespaced_service("race", namespace)
    assert svc.metadata.owner_references is None and svc.spec.selector == {"app": "theirs"}
    assert [(p.name, p.port) for p in svc.spec.ports] == [("web", 8080)]
    assert all(f.manager != "website-operator" for f in svc.metadata.managed_fields), "it wrote no field of it"
    # The Deployment, free when read, was created, and is the Website's (the garbage collector's to delete).
    deployment = apps.read_namespaced_deployment("race", namespace)
    assert [r.uid for r in deployment.metadata.owner_references] == [owner["metadata"]["uid"]]


@pytest.mark.long  # a garbage-collector wait
def test_adoption_by_annotation_then_the_garbage_collector_removes_it_with_the_website(
        operator, custom, core, apps, namespace):
    _user_service(core, namespace, "adopt")
    custom.create_namespaced_custom_object(*WEBSITES, namespace, PLURAL, website("adopt"))
    eventually(lambda: _condition(custom, namespace, "adopt").get("reason") == "NameTaken", timeout=30,
               message="NameTaken")
    core.patch_namespaced_service("adopt", namespace, {"metadata": {"annotations": {"example.com/adopt": "adopt"}}})
    eventually(lambda: _ready(custom, namespace, "adopt", 1), timeout=60, message="adopted, applied, rolled out")
    assert _condition(custom, namespace, "adopt")["status"] == "True"
    svc = core.read_namespaced_service("adopt", namespace)
    uid = _get(custom, namespace, "adopt")["metadata"]["uid"]
    assert [(r.kind, r.uid, r.controller) for r in svc.metadata.owner_references] == [("Website", uid, True)]
    assert "example.com/adopt" not in (svc.metadata.annotations or {})
    assert svc.spec.selector == {"app.kubernetes.io/name": "adopt", "app.kubernetes.io/managed-by": "website-operator"}
    assert svc.metadata.labels["team"] == "x"  # fields others own stay (server-side apply)
    assert "ServiceAdopted" in {e.reason for e in _events(core, namespace, "adopt")}
    # Adopted means the Website's: deleted with it, by the garbage collector, operator running or not.
    operator.stop()
    custom.delete_namespaced_custom_object(*WEBSITES, namespace, PLURAL, "adopt")
    eventually(lambda: _not_found(lambda: core.read_namespaced_service("adopt", namespace)), timeout=90,
               message="the garbage collector deleted the adopted Service")
    eventually(lambda: _not_found(lambda: apps.read_namespaced_deployment("adopt", namespace)), timeout=90,
               message="and the Deployment")
