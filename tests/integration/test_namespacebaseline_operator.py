"""The kopf NamespaceBaseline operator against the real cluster: what its README promises, proven.

NamespaceBaselines and Namespaces are cluster-scoped, and the operator watches
every namespace: the whole module is one xdist group, so that two of these
operators never run at once. Each test labels its namespaces with a label value
of its own (``nsb-test=<unique>``), so a leftover baseline of another test never
matches them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from operatorlab.operators import OperatorProcess, operator_path
from operatorlab.wait import eventually

pytestmark = pytest.mark.xdist_group("nsb-operator")

NSB = ("hedronite.io", "v1alpha1", "namespacebaselines")
DENY, DNS = "baseline-default-deny", "baseline-allow-dns"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
LABEL_KEY = "nsb-test"
# Long enough that nothing in a test is the timer's doing, unless the test says so.
NO_RESYNC = "3600"
# "Within seconds": how long a reaction to a namespace event may take (typically well
# under a second; generous for a loaded CI machine, and still far below any resync).
REACTION = 15


def baseline(name: str, label: str, **spec: object) -> dict:
    return {"apiVersion": "hedronite.io/v1alpha1", "kind": "NamespaceBaseline", "metadata": {"name": name},
            "spec": {"namespaceLabel": label, **spec}}


@pytest.fixture(scope="module")
def networking(api_client) -> client.NetworkingV1Api:
    return client.NetworkingV1Api(api_client)


@pytest.fixture
def start_operator(tmp_path) -> Iterator[Callable[..., OperatorProcess]]:
    """Start the operator (cluster-wide) with a resync interval; stopped after the test."""
    started: list[OperatorProcess] = []

    def start(resync: str = NO_RESYNC) -> OperatorProcess:
        op = OperatorProcess(operator_path("namespacebaseline"), env={"NSB_RESYNC_SECONDS": resync},
                             log_path=tmp_path / f"operator-{len(started)}.log")
        started.append(op)
        return op.start()

    yield start
    for op in started:
        op.stop()


@pytest.fixture
def baselines(custom) -> Iterator[list[str]]:
    """Names of baselines a test made; deleted afterwards (kopf's finalizer stripped: the operator may be gone)."""
    names: list[str] = []
    yield names
    for name in names:
        try:
            custom.patch_cluster_custom_object(*NSB, name, {"metadata": {"finalizers": None}})
            custom.delete_cluster_custom_object(*NSB, name)
        except client.ApiException as e:
            if e.status != 404:
                raise


@pytest.fixture
def namespaces(core, unique) -> Iterator[Callable[..., str]]:
    """Make namespaces (with labels) for one test; deleted afterwards, their policies with them."""
    made: list[str] = []

    def make(labels: dict[str, str] | None = None) -> str:
        name = f"nsb-{unique}-{len(made)}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            core.delete_namespace(name)
        except client.ApiException as e:
            if e.status != 404:
                raise


def _label(core, namespace: str, value: str | None) -> None:
    core.patch_namespace(namespace, {"metadata": {"labels": {LABEL_KEY: value}}})


def _policies(networking, namespace: str) -> list[str]:
    return sorted(p.metadata.name for p in networking.list_namespaced_network_policy(namespace).items)


def _status(custom, name: str) -> dict:
    return custom.get_cluster_custom_object(*NSB, name).get("status", {})


def _events(core, name: str) -> list[client.CoreV1Event]:
    # A NamespaceBaseline is cluster-scoped: kopf posts its Events in "default"
    # when it runs from a kubeconfig.
    selector = f"involvedObject.kind=NamespaceBaseline,involvedObject.name={name}"
    return core.list_namespaced_event("default", field_selector=selector).items


def _exists(custom, name: str) -> bool:
    try:
        custom.get_cluster_custom_object(*NSB, name)
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def _baseline_in_force(custom, networking, namespaces, baselines, unique: str) -> tuple[str, str]:
    """A baseline and one labelled namespace holding both its policies; returns their names."""
    name = f"nsb-{unique}"
    baselines.append(name)
    target = namespaces({LABEL_KEY: unique})
    custom.create_cluster_custom_object(*NSB, baseline(name, f"{LABEL_KEY}={unique}"))
    eventually(lambda: _policies(networking, target) == [DNS, DENY], timeout=30, message="policies")
    return name, target


def test_labelled_namespaces_get_the_policies_within_seconds(
        start_operator, custom, core, networking, namespaces, baselines, unique):
    op = start_operator()
    name = f"nsb-{unique}"
    baselines.append(name)
    custom.create_cluster_custom_object(*NSB, baseline(name, f"{LABEL_KEY}={unique}"))
    eventually(lambda: _status(custom, name).get("phase") == "Ready", timeout=30, message="Ready")
    born_labelled = namespaces({LABEL_KEY: unique})
    later = namespaces()
    unrelated = namespaces({LABEL_KEY: f"{unique}-other"})

    eventually(lambda: _policies(networking, born_labelled) == [DNS, DENY], timeout=REACTION,
               message="a namespace created with the label gets the policies")
    started = time.monotonic()
    _label(core, later, unique)
    eventually(lambda: _policies(networking, later) == [DNS, DENY], timeout=REACTION,
               message="a namespace that gains the label gets the policies")
    print(f"label -> policies: {time.monotonic() - started:.2f}s")
    assert time.monotonic() - started < REACTION, "the namespace watch, not the (hour-long) resync"
    assert _policies(networking, unrelated) == []

    deny = networking.read_namespaced_network_policy(DENY, later)
    assert deny.metadata.labels == {"app.kubernetes.io/managed-by": "namespacebaseline-operator",
                                    "hedronite.io/namespacebaseline": name}
    selector = deny.spec.pod_selector  # {}: every Pod of the namespace
    assert not selector.match_labels and not selector.match_expressions
    assert deny.spec.policy_types == ["Ingress", "Egress"] and not deny.spec.ingress and not deny.spec.egress
    dns = networking.read_namespaced_network_policy(DNS, later)
    (rule,) = dns.spec.egress
    (peer,) = rule.to
    assert peer.namespace_selector.match_labels == {"kubernetes.io/metadata.name": "kube-system"}
    assert peer.pod_selector.match_labels == {"k8s-app": "kube-dns"}
    assert sorted((p.protocol, p.port) for p in rule.ports) == [("TCP", 53), ("UDP", 53)]
    status = eventually(lambda: _status(custom, name).get("policies") == 4 and _status(custom, name), timeout=REACTION,
                        message="status counts both namespaces")
    assert status["namespaces"] == 2 and status["phase"] == "Ready"
    eventually(lambda: [e.reason for e in _events(core, name)].count("PolicyCreated") == 4, timeout=15,
               message="one PolicyCreated Event per policy")
    assert op.running and "Traceback" not in op.log()


def test_a_namespace_that_loses_the_label_loses_the_policies(
        start_operator, custom, core, networking, namespaces, baselines, unique):
    start_operator()
    name = f"nsb-{unique}"
    baselines.append(name)
    leaving, staying = namespaces({LABEL_KEY: unique}), namespaces({LABEL_KEY: unique})
    custom.create_cluster_custom_object(*NSB, baseline(name, f"{LABEL_KEY}={unique}"))
    eventually(lambda: _policies(networking, leaving) == _policies(networking, staying) == [DNS, DENY],
               timeout=30, message="both labelled namespaces have the policies")
    started = time.monotonic()
    _label(core, leaving, None)
    eventually(lambda: _policies(networking, leaving) == [], timeout=REACTION, message="policies removed")
    print(f"unlabel -> policies removed: {time.monotonic() - started:.2f}s")
    assert _policies(networking, staying) == [DNS, DENY]
    status = eventually(lambda: _status(custom, name).get("policies") == 2 and _status(custom, name), timeout=REACTION,
                        message="status counts follow")
    assert status["namespaces"] == 1
    eventually(lambda: "PolicyRemoved" in {e.reason for e in _events(core, name)}, timeout=15,
               message="a PolicyRemoved Event")


def test_the_resync_timer_heals_a_deleted_or_edited_policy(
        start_operator, custom, core, networking, namespaces, baselines, unique):
    op = start_operator(resync="2")
    name, target = _baseline_in_force(custom, networking, namespaces, baselines, unique)

    networking.delete_namespaced_network_policy(DENY, target)
    assert _policies(networking, target) == [DNS]
    eventually(lambda: _policies(networking, target) == [DNS, DENY], timeout=15, message="deleted policy re-created")

    networking.patch_namespaced_network_policy(DENY, target, {"spec": {"ingress": [{}]}})  # allow all ingress
    assert networking.read_namespaced_network_policy(DENY, target).spec.ingress
    eventually(lambda: not networking.read_namespaced_network_policy(DENY, target).spec.ingress, timeout=15,
               message="the added rule is gone again")
    reasons = [e.reason for e in _events(core, name)]
    eventually(lambda: {"PolicyCreated", "PolicyUpdated"} <= {e.reason for e in _events(core, name)}, timeout=15,
               message=f"Events of the healing (so far {reasons})")
    eventually(lambda: "Timer 'resync' succeeded" in op.log(), timeout=30, message="the resync timer ran")


def test_changing_the_baseline_moves_and_trims_the_policies(
        start_operator, custom, core, networking, namespaces, baselines, unique):
    start_operator()
    name = f"nsb-{unique}"
    baselines.append(name)
    first, second = namespaces({LABEL_KEY: f"{unique}-a"}), namespaces({LABEL_KEY: f"{unique}-b"})
    custom.create_cluster_custom_object(*NSB, baseline(name, f"{LABEL_KEY}={unique}-a", allowDNS=False))
    eventually(lambda: _policies(networking, first) == [DENY], timeout=30, message="deny only, no DNS")
    custom.patch_cluster_custom_object(*NSB, name, {"spec": {"allowDNS": True}})
    eventually(lambda: _policies(networking, first) == [DNS, DENY], timeout=15, message="DNS policy added")
    custom.patch_cluster_custom_object(*NSB, name, {"spec": {"namespaceLabel": f"{LABEL_KEY}={unique}-b"}})
    eventually(lambda: _policies(networking, second) == [DNS, DENY] and _policies(networking, first) == [],
               timeout=15, message="policies moved to the newly selected namespace")
    custom.patch_cluster_custom_object(*NSB, name, {"spec": {"allowDNS": False}})
    eventually(lambda: _policies(networking, second) == [DENY], timeout=15, message="DNS policy removed")
    eventually(lambda: _status(custom, name).get("policies") == 1, timeout=REACTION, message="status counts 1")


def test_two_baselines_on_one_namespace_hand_over_without_a_gap(
        start_operator, custom, core, networking, namespaces, baselines, unique):
    start_operator()
    first, second = f"nsb-{unique}-a", f"nsb-{unique}-b"
    baselines.extend([first, second])
    target = namespaces({LABEL_KEY: unique, f"{LABEL_KEY}-zone": unique})
    custom.create_cluster_custom_object(*NSB, baseline(first, f"{LABEL_KEY}={unique}"))
    eventually(lambda: _policies(networking, target) == [DNS, DENY], timeout=30, message="the first baseline's")
    custom.create_cluster_custom_object(*NSB, baseline(second, f"{LABEL_KEY}-zone={unique}"))
    eventually(lambda: _status(custom, second).get("phase") == "Ready", timeout=30, message="second Ready")

    def owner() -> set[str]:
        return {p.metadata.labels["hedronite.io/namespacebaseline"]
                for p in networking.list_namespaced_network_policy(target).items}

    assert owner() == {first}, "the first to claim the namespace keeps its policies"
    assert _status(custom, second)["policies"] == 0
    uids = {p.metadata.name: p.metadata.uid for p in networking.list_namespaced_network_policy(target).items}
    _label(core, target, None)  # the first baseline lets go; the second still matches
    eventually(lambda: owner() == {second}, timeout=REACTION, message="the second baseline took the namespace over")
    # Relabelled in place: the very same objects, never deleted (no moment without a default-deny).
    assert {p.metadata.name: p.metadata.uid for p in networking.list_namespaced_network_policy(target).items} == uids
    eventually(lambda: _status(custom, second).get("policies") == 2 and _status(custom, first).get("policies") == 0,
               timeout=REACTION, message="both baselines count what they hold")


def test_deleting_the_baseline_leaves_the_policies_in_place(
        start_operator, custom, core, networking, namespaces, baselines, unique):
    op = start_operator(resync="2")
    name, target = _baseline_in_force(custom, networking, namespaces, baselines, unique)
    # kopf's finalizer, there because of the resync timer, not for a delete handler.
    assert FINALIZER in custom.get_cluster_custom_object(*NSB, name)["metadata"]["finalizers"]
    custom.delete_cluster_custom_object(*NSB, name)
    eventually(lambda: not _exists(custom, name), timeout=30,
               message="the running operator stops the timer and releases its finalizer")
    time.sleep(3)  # over a resync interval: nothing comes to remove them
    assert _policies(networking, target) == [DNS, DENY], "fail-closed: the policies stay"
    _label(core, target, None)  # no baseline governs them any more: nothing removes them
    time.sleep(3)
    assert _policies(networking, target) == [DNS, DENY]
    assert op.running


@pytest.mark.parametrize("label", ["no-equals-sign", "=value", "key==value", "a b=c", "key=va lue"])
def test_malformed_labels_are_refused_by_the_schema(custom, label, unique):
    with pytest.raises(client.ApiException) as refused:
        custom.create_cluster_custom_object(*NSB, baseline(f"bad-{unique}", label))
    assert refused.value.status == 422
    assert "spec.namespaceLabel" in json.loads(refused.value.body)["message"]


@pytest.fixture
def loose_baseline_schema(api_client) -> Iterator[Callable[[], None]]:
    """Loosen the NamespaceBaseline CRD: no namespaceLabel pattern, as an older CRD version might have had.

    Yields the loosening itself (idempotent), to repeat until the create goes through:
    anything that re-applies crds/ meanwhile tightens it again. crds/namespacebaseline.yaml
    is re-applied afterwards.
    """
    from operatorlab import paths
    from operatorlab.cluster import manifests

    ext = client.ApiextensionsV1Api(api_client)

    def loosen() -> None:
        crd = ext.read_custom_resource_definition("namespacebaselines.hedronite.io")
        label = crd.spec.versions[0].var_schema.open_apiv3_schema.properties["spec"].properties["namespaceLabel"]
        if label.pattern:
            ext.patch_custom_resource_definition("namespacebaselines.hedronite.io", [{"op": "remove", "path": (
                "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/namespaceLabel/pattern")}])

    loosen()
    yield loosen
    manifests.apply(api_client, manifests.load(paths.crds_dir() / "namespacebaseline.yaml"))


def test_a_malformed_label_that_slipped_past_the_schema_is_reported_once(
        start_operator, custom, core, networking, namespaces, baselines, unique, loose_baseline_schema):
    op = start_operator(resync="1")
    name = f"nsb-{unique}"
    baselines.append(name)
    target = namespaces({LABEL_KEY: unique})
    eventually(lambda: loose_baseline_schema() or custom.create_cluster_custom_object(
        *NSB, baseline(name, f"{LABEL_KEY}:{unique}")), timeout=30, message="the looser schema takes effect")
    status = eventually(lambda: _status(custom, name).get("phase") == "Failed" and _status(custom, name),
                        timeout=30, message="status Failed")
    assert "spec.namespaceLabel must be a label as key=value" in status["message"]
    assert f"got '{LABEL_KEY}:{unique}'" in status["message"]
    eventually(lambda: _events(core, name), timeout=15, message="an Event")
    version = custom.get_cluster_custom_object(*NSB, name)["metadata"]["resourceVersion"]
    time.sleep(3.5)  # three resync intervals: a retry storm would show by now
    assert custom.get_cluster_custom_object(*NSB, name)["metadata"]["resourceVersion"] == version, "no re-writes"
    # One Warning per trigger at most: the create handler, and the first resync if it ran
    # before the handler's status reached the API server (a 1 s resync makes that race
    # possible; at the default 60 s it is not). A retry storm would show many more.
    events = [(e.type, e.reason) for e in _events(core, name)]
    assert events and set(events) == {("Warning", "ReconcileFailed")} and len(events) <= 2, events
    assert op.log().count(f"[{name}] Handler 'reconcile' failed permanently") == 1
    assert op.running
    assert _policies(networking, target) == [], "nothing half-applied"
    # Fixing the spec heals it without a restart.
    custom.patch_cluster_custom_object(*NSB, name, {"spec": {"namespaceLabel": f"{LABEL_KEY}={unique}"}})
    eventually(lambda: _policies(networking, target) == [DNS, DENY], timeout=15, message="policies after the fix")
    status = eventually(lambda: _status(custom, name).get("phase") == "Ready" and _status(custom, name), timeout=15,
                        message="Ready after the fix")
    assert "message" not in status


# --- ownership: someone else's policy of our name is never touched; adoption by annotation ---


def _condition(custom, name: str) -> dict:
    conditions = _status(custom, name).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def _policy_snapshot(networking, namespace: str, name: str) -> dict:
    policy = networking.read_namespaced_network_policy(name, namespace)
    return {"spec": policy.spec.to_dict(), "labels": policy.metadata.labels,
            "annotations": policy.metadata.annotations, "ownerReferences": policy.metadata.owner_references,
            "resourceVersion": policy.metadata.resource_version}


def _baseline_facing_a_foreign_policy(custom, networking, namespaces, baselines, unique: str) -> tuple[str, str, dict]:
    """A labelled namespace holding the team's own policy named like the baseline's (it allows all
    ingress, and even carries the operator's managed-by label), then the baseline.

    Returns the baseline's name, the namespace and the policy as it was before the baseline came.
    """
    name = f"nsb-{unique}"
    baselines.append(name)
    target = namespaces({LABEL_KEY: unique})
    networking.create_namespaced_network_policy(target, {
        "metadata": {"name": DENY, "labels": {"app.kubernetes.io/managed-by": "namespacebaseline-operator"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}})
    before = _policy_snapshot(networking, target, DENY)
    custom.create_cluster_custom_object(*NSB, baseline(name, f"{LABEL_KEY}={unique}"))
    return name, target, before


def test_a_foreign_policy_survives_create_update_and_delete_of_the_baseline(
        start_operator, custom, core, networking, namespaces, baselines, unique):
    start_operator(resync="2")
    name, target, before = _baseline_facing_a_foreign_policy(custom, networking, namespaces, baselines, unique)
    ready = eventually(lambda: _condition(custom, name).get("reason") == "NameTaken" and _condition(custom, name),
                       timeout=30, message="Ready=False, NameTaken")
    assert ready["status"] == "False" and ready["observedGeneration"] == 1
    assert f"NetworkPolicy {target}/{DENY} exists and was not created for this NamespaceBaseline" in ready["message"]
    assert f"kubectl annotate networkpolicy {DENY} -n {target} hedronite.io/adopt={name}" in ready["message"]
    assert "fail-closed" in ready["message"]
    eventually(lambda: _policies(networking, target) == [DNS, DENY], timeout=30, message="the DNS policy is ours")
    time.sleep(5)  # two resyncs: each looks again, none touches it, none posts another Event
    assert _policy_snapshot(networking, target, DENY) == before
    assert [(e.type, e.reason) for e in _events(core, name) if e.type == "Warning"] == [("Warning", "NameTaken")]

    custom.patch_cluster_custom_object(*NSB, name, {"spec": {"allowDNS": False}})
    eventually(lambda: _policies(networking, target) == [DENY], timeout=30, message="our DNS policy removed")
    # The condition is written after the delete: wait for it to speak of generation 2.
    eventually(lambda: (_condition(custom, name).get("observedGeneration"), _condition(custom, name).get("reason"))
               == (2, "NameTaken"), timeout=30, message="NameTaken, observed at generation 2")
    assert _policy_snapshot(networking, target, DENY) == before

    custom.delete_cluster_custom_object(*NSB, name)
    eventually(lambda: not _exists(custom, name), timeout=60, message="baseline deleted")
    time.sleep(3)
    assert _policy_snapshot(networking, target, DENY) == before


def test_a_policy_marked_for_adoption_becomes_the_baselines(
        start_operator, custom, core, networking, namespaces, baselines, unique):
    start_operator(resync="2")
    name, target, _ = _baseline_facing_a_foreign_policy(custom, networking, namespaces, baselines, unique)
    eventually(lambda: _condition(custom, name).get("reason") == "NameTaken", timeout=30, message="NameTaken")
    networking.patch_namespaced_network_policy(
        DENY, target, {"metadata": {"annotations": {"hedronite.io/adopt": name}}}
    )
    eventually(lambda: _condition(custom, name).get("status") == "True", timeout=30,
               message="adopted at the next resync")
    policy = networking.read_namespaced_network_policy(DENY, target)
    assert policy.metadata.labels["hedronite.io/namespacebaseline"] == name
    assert "hedronite.io/adopt" not in (policy.metadata.annotations or {})
    assert policy.spec.ingress is None and policy.spec.policy_types == ["Ingress", "Egress"], "the baseline's spec"
    assert "PolicyAdopted" in {e.reason for e in _events(core, name)}
    assert _status(custom, name)["policies"] == 2
