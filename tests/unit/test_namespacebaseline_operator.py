"""Unit tests of the NamespaceBaseline operator's pure parts: label parsing, the
policies, the CRD's rules, the resync interval, and how reconcile_baseline
compares, prunes and routes API errors.

No cluster here. Where reconcile_baseline needs a CoreV1Api or NetworkingV1Api,
a Stub answers each call with a canned object or error set up by the test. It
has no state and no API semantics: it only lets us check our own requests,
comparisons and error routing. What the API server really does is for
tests/integration/.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from tests.unit.stubs import StubApi, api_error, crd_schema

ROOT = Path(__file__).resolve().parents[2]
OPERATOR_PATH = ROOT / "operators" / "namespacebaseline" / "namespacebaseline_operator.py"
CRD_PATH = ROOT / "crds" / "namespacebaseline.yaml"


def _load_operator(name: str = "namespacebaseline_operator") -> Any:
    # Loaded by path under another name: "operator" would shadow the stdlib
    # module, and the operator is a script, not a package.
    spec = importlib.util.spec_from_file_location(name, OPERATOR_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


op = _load_operator()
LABELS = op.policy_labels("payments")


# --- namespaceLabel and the baseline -------------------------------------------


@pytest.mark.parametrize(("text", "key", "value"), [
    ("team=payments", "team", "payments"),
    ("example.com/team=payments", "example.com/team", "payments"),
    ("a.b-c.d/Team_1.x=V-1_2.3", "a.b-c.d/Team_1.x", "V-1_2.3"),
    ("team=", "team", ""),  # an empty value is a label value
    ("k" * 63 + "=" + "v" * 63, "k" * 63, "v" * 63),
])
def test_parse_namespace_label(text: str, key: str, value: str) -> None:
    assert op.parse_namespace_label(text) == (key, value)


@pytest.mark.parametrize("text", [
    "team", "=payments", "team==payments", "team=pay=ments", "team=-x", "team =x", "Example.com/team=x",
    "/team=x", "k" * 64 + "=v", "team=" + "v" * 64, "team=x\n", "", None, 7,
])
def test_parse_namespace_label_refuses_what_is_no_label(text: Any) -> None:
    with pytest.raises(ValueError, match=re.escape("spec.namespaceLabel must be a label as key=value")) as raised:
        op.parse_namespace_label(text)
    assert repr(text) in str(raised.value) and "fix spec.namespaceLabel" in str(raised.value)


def test_parse_namespace_label_refuses_an_overlong_key_prefix() -> None:
    prefix = ".".join(["a" * 63] * 4) + ".ab"  # 256 characters, each part a fine DNS label
    with pytest.raises(ValueError, match="longer than 253"):
        op.parse_namespace_label(f"{prefix}/team=x")


def test_parse_baseline() -> None:
    assert op.parse_baseline("payments", {"namespaceLabel": "team=payments"}) == op.Baseline(
        name="payments", key="team", value="payments", allow_dns=True)
    baseline = op.parse_baseline("payments", {"namespaceLabel": "team=payments", "allowDNS": False})
    assert baseline.allow_dns is False
    assert baseline.selector == "team=payments"
    assert baseline.matches({"team": "payments", "other": "x"})
    assert not baseline.matches({"team": "billing"}) and not baseline.matches({}) and not baseline.matches(None)


@pytest.mark.parametrize(("name", "spec", "field"), [
    ("a" * 64, {"namespaceLabel": "team=x"}, "rename the NamespaceBaseline"),
    ("payments", {}, "spec.namespaceLabel"),
    ("payments", {"namespaceLabel": "team=x", "allowDNS": "yes"}, "spec.allowDNS"),
])
def test_parse_baseline_refuses(name: str, spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(field)):
        op.parse_baseline(name, spec)


# --- the resync interval --------------------------------------------------------


@pytest.mark.parametrize(("environ", "seconds"), [({}, 60.0), ({"NSB_RESYNC_SECONDS": ""}, 60.0),
                                                  ({"NSB_RESYNC_SECONDS": "2"}, 2.0),
                                                  ({"NSB_RESYNC_SECONDS": " 0.5 "}, 0.5)])
def test_resync_seconds(environ: dict[str, str], seconds: float) -> None:
    assert op.resync_seconds(environ) == seconds


@pytest.mark.parametrize("text", ["0", "-1", "soon", "nan", "inf", "1m"])
def test_resync_seconds_refuses_what_is_no_interval(text: str) -> None:
    with pytest.raises(ValueError, match="NSB_RESYNC_SECONDS must be a positive number of seconds"):
        op.resync_seconds({"NSB_RESYNC_SECONDS": text})


def test_a_bad_resync_interval_stops_the_operator_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSB_RESYNC_SECONDS", "soon")
    with pytest.raises(ValueError, match="NSB_RESYNC_SECONDS"):
        _load_operator("namespacebaseline_operator_bad_env")
    sys.modules.pop("namespacebaseline_operator_bad_env", None)


def test_the_timer_uses_the_interval_read_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSB_RESYNC_SECONDS", "2")
    assert _load_operator("namespacebaseline_operator_fast").RESYNC_SECONDS == 2.0


# --- the policies -----------------------------------------------------------------


def test_deny_policy_manifest_selects_every_pod_and_allows_nothing() -> None:
    assert op.deny_policy_manifest("payments", "shop") == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "baseline-default-deny", "namespace": "shop", "labels": {
            "app.kubernetes.io/managed-by": "namespacebaseline-operator",
            "hedronite.io/namespacebaseline": "payments"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


def test_dns_policy_manifest_allows_port_53_to_the_dns_pods_only() -> None:
    manifest = op.dns_policy_manifest("payments", "shop")
    assert manifest["metadata"]["name"] == "baseline-allow-dns"
    assert manifest["metadata"]["labels"] == LABELS
    spec = manifest["spec"]
    assert spec["podSelector"] == {} and spec["policyTypes"] == ["Egress"]
    (rule,) = spec["egress"]
    # One peer, both selectors (AND): the DNS Pods of kube-system, not all of kube-system.
    assert rule["to"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                           "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]
    assert rule["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]


def test_desired_policies_follow_allow_dns() -> None:
    with_dns = op.parse_baseline("payments", {"namespaceLabel": "team=payments"})
    without = op.parse_baseline("payments", {"namespaceLabel": "team=payments", "allowDNS": False})
    assert [p["metadata"]["name"] for p in op.desired_policies(with_dns, "shop")] == [
        "baseline-default-deny", "baseline-allow-dns"]
    assert [p["metadata"]["name"] for p in op.desired_policies(without, "shop")] == ["baseline-default-deny"]


# --- the CRD --------------------------------------------------------------------


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text())


def test_crd_identity(crd: dict[str, Any]) -> None:
    assert crd["metadata"]["name"] == "namespacebaselines.hedronite.io"
    assert (crd["spec"]["group"], crd["spec"]["scope"]) == ("hedronite.io", "Cluster")
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == ("NamespaceBaseline", "namespacebaselines", ["nsb"])
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


def test_crd_spec_contract(crd: dict[str, Any]) -> None:
    spec = crd_schema(crd)["properties"]["spec"]
    assert spec["required"] == ["namespaceLabel"]
    assert spec["properties"]["allowDNS"] == {**spec["properties"]["allowDNS"], "type": "boolean", "default": True}
    assert spec["properties"]["namespaceLabel"]["pattern"] == op.NAMESPACE_LABEL_PATTERN
    assert crd_schema(crd)["properties"]["metadata"]["properties"]["name"]["maxLength"] == op.NAME_MAX_LENGTH


def test_crd_label_length_fits_the_longest_label(crd: dict[str, Any]) -> None:
    longest = ".".join(["a" * 63] * 3) + "." + "a" * 61 + "/" + "k" * 63 + "=" + "v" * 63
    assert len(longest.split("/")[0]) == 253
    op.parse_namespace_label(longest)  # valid
    assert len(longest) == crd_schema(crd)["properties"]["spec"]["properties"]["namespaceLabel"]["maxLength"]


@pytest.mark.parametrize("text", ["team=payments", "example.com/team=x", "team=", "team", "=x", "a=b=c", "T=x"])
def test_crd_label_pattern_agrees_with_the_operator(crd: dict[str, Any], text: str) -> None:
    pattern = crd_schema(crd)["properties"]["spec"]["properties"]["namespaceLabel"]["pattern"]
    try:
        op.parse_namespace_label(text)
        operator_accepts = True
    except ValueError:
        operator_accepts = False
    assert bool(re.search(pattern, text)) == operator_accepts


def test_crd_printer_columns(crd: dict[str, Any]) -> None:
    (version,) = crd["spec"]["versions"]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Label": ".spec.namespaceLabel", "DNS": ".spec.allowDNS", "Namespaces": ".status.namespaces",
        "Policies": ".status.policies", "Phase": ".status.phase", "Age": ".metadata.creationTimestamp",
    }


# --- reconcile_baseline: comparisons, pruning, error routing ------------------------


def namespaces(*names: str, terminating: tuple[str, ...] = ()) -> dict[str, Any]:
    deleted = {"deletionTimestamp": "2026-01-01T00:00:00Z"}
    return {"items": [{"metadata": {"name": n, **(deleted if n in terminating else {})}} for n in names]}


def live(policy: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(policy)
    obj["metadata"].update(resourceVersion="42", uid="policy-uid", managedFields=[{"manager": "x"}])
    return obj


def policy_list(*policies: dict[str, Any]) -> dict[str, Any]:
    return {"items": [live(p) for p in policies]}


def existing(namespace: str, baseline: str = "payments") -> dict[str, dict[str, Any]]:
    return {op.DENY_POLICY: live(op.deny_policy_manifest(baseline, namespace)),
            op.DNS_POLICY: live(op.dns_policy_manifest(baseline, namespace))}


class Reports(list):
    def __call__(self, reason: str, message: str) -> None:
        self.append((reason, message))


SPEC = {"namespaceLabel": "team=payments", "allowDNS": True}


def test_reconcile_creates_the_policies_in_every_matching_namespace() -> None:
    core = StubApi(list_namespace=namespaces("a", "b"))
    created = [op.deny_policy_manifest("payments", n) for n in "ab"]
    created += [op.dns_policy_manifest("payments", n) for n in "ab"]
    networking = StubApi(
        read_namespaced_network_policy=api_error(404),
        create_namespaced_network_policy=lambda namespace, body: body,
        list_network_policy_for_all_namespaces=[policy_list(), policy_list(*created)],
    )
    reports = Reports()
    status = op.reconcile_baseline("payments", SPEC, core=core, networking=networking, report=reports)
    assert status == {"namespaces": 2, "policies": 4, "phase": "Ready"}
    assert core.calls == [("list_namespace", {"label_selector": "team=payments"})]
    assert [op._as_dict(kw["body"]) for _, kw in networking.calls_to("create")] == [
        op.deny_policy_manifest("payments", "a"), op.dns_policy_manifest("payments", "a"),
        op.deny_policy_manifest("payments", "b"), op.dns_policy_manifest("payments", "b")]
    selectors = [kw["label_selector"] for _, kw in networking.calls_to("list")]
    assert selectors == ["hedronite.io/namespacebaseline=payments"] * 2
    assert [r for r, _ in reports] == ["PolicyCreated"] * 4
    assert reports[0][1] == "created NetworkPolicy a/baseline-default-deny"


def test_reconcile_writes_nothing_when_nothing_differs() -> None:
    have = existing("a")
    networking = StubApi(
        read_namespaced_network_policy=lambda name, namespace: have[name],
        list_network_policy_for_all_namespaces=policy_list(*have.values()),
    )
    reports = Reports()
    status = op.reconcile_baseline("payments", SPEC, core=StubApi(list_namespace=namespaces("a")),
                                   networking=networking, report=reports)
    assert status == {"namespaces": 1, "policies": 2, "phase": "Ready"}
    assert [m for m, _ in networking.calls if not m.startswith(("read", "list"))] == []
    assert reports == []


def test_reconcile_replaces_a_drifted_policy_whole_keeping_others_metadata() -> None:
    have = existing("a")
    drifted = have[op.DENY_POLICY]
    drifted["spec"]["ingress"] = [{}]  # someone allowed all ingress
    drifted["metadata"]["labels"]["owner"] = "ops"
    drifted["metadata"]["annotations"] = {"note": "keep me"}
    networking = StubApi(
        read_namespaced_network_policy=lambda name, namespace: have[name],
        replace_namespaced_network_policy=lambda name, namespace, body: body,
        list_network_policy_for_all_namespaces=policy_list(*have.values()),
    )
    reports = Reports()
    op.reconcile_baseline("payments", SPEC, core=StubApi(list_namespace=namespaces("a")), networking=networking,
                          report=reports)
    ((_, replaced),) = networking.calls_to("replace")
    body = op._as_dict(replaced["body"])
    assert body["spec"] == op.deny_policy_manifest("payments", "a")["spec"]
    assert body["metadata"]["resourceVersion"] == "42"  # conditional: a 409 if it changed since our GET
    assert body["metadata"]["labels"] == {**LABELS, "owner": "ops"}
    assert body["metadata"]["annotations"] == {"note": "keep me"}
    assert "managedFields" not in body["metadata"]
    assert reports == [("PolicyUpdated", "restored NetworkPolicy a/baseline-default-deny to the baseline")]


def test_reconcile_leaves_an_unlabelled_policy_of_the_same_name_and_says_so() -> None:
    # Someone's own policy named like ours, in namespace a; namespace b is served all the same.
    have = existing("a")
    del have[op.DNS_POLICY]["metadata"]["labels"]
    networking = StubApi(
        read_namespaced_network_policy=lambda name, namespace: have[name] if namespace == "a" else api_error(404),
        create_namespaced_network_policy=lambda namespace, body: body,
        list_network_policy_for_all_namespaces=policy_list(),
    )
    status = op.reconcile_baseline("payments", SPEC, core=StubApi(list_namespace=namespaces("a", "b")),
                                   networking=networking)
    assert not networking.calls_to("replace") and not networking.calls_to("delete")
    assert [kw["namespace"] for _, kw in networking.calls_to("create")] == ["b", "b"]
    assert status["phase"] == "NameTaken"
    assert status["nameTaken"].startswith(
        "NetworkPolicy a/baseline-allow-dns exists and was not created for this NamespaceBaseline")
    assert "kubectl annotate networkpolicy baseline-allow-dns -n a hedronite.io/adopt=payments" in status["nameTaken"]


def test_reconcile_adopts_a_policy_marked_for_it() -> None:
    have = existing("a")
    marked = have[op.DENY_POLICY]
    del marked["metadata"]["labels"]
    marked["metadata"]["annotations"] = {"hedronite.io/adopt": "payments", "note": "keep me"}
    networking = StubApi(
        read_namespaced_network_policy=lambda name, namespace: have[name],
        replace_namespaced_network_policy=lambda name, namespace, body: body,
        list_network_policy_for_all_namespaces=policy_list(*have.values()),
    )
    reports = Reports()
    status = op.reconcile_baseline("payments", SPEC, core=StubApi(list_namespace=namespaces("a")),
                                   networking=networking, report=reports)
    ((_, replaced),) = networking.calls_to("replace")
    metadata = op._as_dict(replaced["body"])["metadata"]
    assert metadata["labels"] == LABELS
    assert metadata["annotations"] == {"note": "keep me"}
    assert metadata["resourceVersion"] == "42"
    assert reports == [("PolicyAdopted", "adopted NetworkPolicy a/baseline-default-deny (hedronite.io/adopt=payments)")]
    assert status["phase"] == "Ready"


def test_reconcile_leaves_another_baselines_policies_alone() -> None:
    theirs = existing("a", baseline="security")
    networking = StubApi(
        read_namespaced_network_policy=lambda name, namespace: theirs[name],
        list_network_policy_for_all_namespaces=policy_list(),
    )
    status = op.reconcile_baseline("payments", SPEC, core=StubApi(list_namespace=namespaces("a")),
                                   networking=networking)
    assert status["policies"] == 0
    assert [m for m, _ in networking.calls if not m.startswith(("read", "list"))] == []


def test_reconcile_removes_policies_where_the_label_went_and_dns_when_disallowed() -> None:
    stale = [op.deny_policy_manifest("payments", "gone"), op.dns_policy_manifest("payments", "gone")]
    kept = existing("a")
    networking = StubApi(
        read_namespaced_network_policy=lambda name, namespace: kept[name],
        delete_namespaced_network_policy={},
        list_network_policy_for_all_namespaces=[policy_list(*stale, *kept.values()),
                                                policy_list(kept[op.DENY_POLICY])],
    )
    reports = Reports()
    status = op.reconcile_baseline("payments", {**SPEC, "allowDNS": False},
                                   core=StubApi(list_namespace=namespaces("a")), networking=networking, report=reports)
    deleted = sorted((kw["namespace"], kw["name"]) for _, kw in networking.calls_to("delete"))
    assert deleted == [("a", op.DNS_POLICY), ("gone", op.DNS_POLICY), ("gone", op.DENY_POLICY)]
    assert [r for r, _ in reports] == ["PolicyRemoved"] * 3
    assert status == {"namespaces": 1, "policies": 1, "phase": "Ready"}


def test_reconcile_skips_terminating_namespaces() -> None:
    networking = StubApi(list_network_policy_for_all_namespaces=policy_list())
    status = op.reconcile_baseline("payments", SPEC, core=StubApi(list_namespace=namespaces("a", terminating=("a",))),
                                   networking=networking)
    assert status["namespaces"] == 0
    assert [m for m, _ in networking.calls] == ["list_network_policy_for_all_namespaces"] * 2


def test_reconcile_409_on_create_compares_theirs() -> None:
    have = existing("a")
    reads = {op.DENY_POLICY: [api_error(404), have[op.DENY_POLICY]], op.DNS_POLICY: [have[op.DNS_POLICY]]}
    networking = StubApi(
        read_namespaced_network_policy=lambda name, namespace: reads[name].pop(0),
        create_namespaced_network_policy=api_error(409, "already exists"),
        list_network_policy_for_all_namespaces=policy_list(*have.values()),
    )
    status = op.reconcile_baseline("payments", SPEC, core=StubApi(list_namespace=namespaces("a")),
                                   networking=networking)
    assert status["policies"] == 2
    assert not networking.calls_to("replace")


@pytest.mark.parametrize("spec", [{"namespaceLabel": "team"}, {"namespaceLabel": "a=b=c"}, {}])
def test_reconcile_bad_label_is_permanent_and_touches_nothing(spec: dict[str, Any]) -> None:
    core, networking = StubApi(), StubApi()
    with pytest.raises(kopf.PermanentError, match=re.escape("spec.namespaceLabel")) as raised:
        op.reconcile_baseline("payments", spec, core=core, networking=networking)
    assert isinstance(raised.value.__cause__, ValueError)
    assert core.calls == [] and networking.calls == []


@pytest.mark.parametrize(("status", "headers", "delay"), [
    (429, {"Retry-After": "7"}, 7.0), (429, None, 10.0), (500, None, 10.0), (503, {"Retry-After": "2"}, 2.0),
])
def test_reconcile_overload_is_temporary_with_a_delay(
    status: int, headers: dict[str, str] | None, delay: float
) -> None:
    core = StubApi(list_namespace=api_error(status, "the server is busy", headers))
    with pytest.raises(kopf.TemporaryError) as raised:
        op.reconcile_baseline("payments", SPEC, core=core, networking=StubApi())
    assert raised.value.delay == delay
    assert f"({status})" in str(raised.value) and "the server is busy" in str(raised.value)


def test_reconcile_409_on_replace_retries_soon() -> None:
    have = existing("a")
    have[op.DENY_POLICY]["spec"]["policyTypes"] = ["Ingress"]
    networking = StubApi(read_namespaced_network_policy=lambda name, namespace: have[name],
                      replace_namespaced_network_policy=api_error(409, "the object has been modified"))
    with pytest.raises(kopf.TemporaryError) as raised:
        op.reconcile_baseline("payments", SPEC, core=StubApi(list_namespace=namespaces("a")), networking=networking)
    assert raised.value.delay == op.CONFLICT_RETRY_DELAY == 1.0


def test_reconcile_422_is_permanent() -> None:
    networking = StubApi(read_namespaced_network_policy=api_error(404),
                      create_namespaced_network_policy=api_error(422, 'NetworkPolicy "x" is invalid'))
    with pytest.raises(kopf.PermanentError, match='NetworkPolicy "x" is invalid'):
        op.reconcile_baseline("payments", SPEC, core=StubApi(list_namespace=namespaces("a")), networking=networking)


def test_reconcile_403_points_at_the_clusterrole() -> None:
    core = StubApi(list_namespace=api_error(403, "namespaces is forbidden"))
    with pytest.raises(kopf.TemporaryError, match="ClusterRole 'namespacebaseline-operator'"):
        op.reconcile_baseline("payments", SPEC, core=core, networking=StubApi())


# --- the namespace watcher's building blocks ---------------------------------------


def test_remove_from_namespace_deletes_only_this_baselines_policies() -> None:
    have = existing("a")
    networking = StubApi(list_namespaced_network_policy=policy_list(*have.values()),
                      delete_namespaced_network_policy=[{}, api_error(404)])
    reports = Reports()
    assert op.remove_from_namespace("payments", "a", networking=networking, report=reports) == 2
    ((_, listed),) = networking.calls_to("list")
    assert listed == {"namespace": "a", "label_selector": "hedronite.io/namespacebaseline=payments"}
    assert reports == [("PolicyRemoved", "removed NetworkPolicy a/baseline-default-deny")]  # the 404 was gone already


def test_a_policy_of_another_name_that_copied_our_label_is_not_ours() -> None:
    # Someone's own policy, labelled as the baseline's (copied from ours, say): never deleted, never counted.
    theirs = copy.deepcopy(op.deny_policy_manifest("payments", "a"))
    theirs["metadata"]["name"] = "my-allow-web"
    networking = StubApi(list_namespaced_network_policy=policy_list(theirs),
                         list_network_policy_for_all_namespaces=policy_list(theirs))
    assert op.remove_from_namespace("payments", "a", networking=networking, report=Reports()) == 0
    assert op.count_applied("payments", networking=networking)["policies"] == 0
    assert not networking.calls_to("delete")
    labels = {op.BASELINE_LABEL: "payments"}
    assert op.baseline_policies(name="my-allow-web", namespace="a", labels=labels) == {}
    assert op.baseline_policies(name=op.DENY_POLICY, namespace="a", labels=labels) == {("a", "payments"): True}


def test_count_applied_counts_namespaces_and_policies() -> None:
    listed = policy_list(*existing("a").values(), op.deny_policy_manifest("payments", "b"))
    networking = StubApi(list_network_policy_for_all_namespaces=listed)
    assert op.count_applied("payments", networking=networking) == {"namespaces": 2, "policies": 3}


def test_is_unwanted() -> None:
    baseline = op.parse_baseline("payments", {"namespaceLabel": "team=payments", "allowDNS": False})
    assert op.is_unwanted(baseline, op.deny_policy_manifest("payments", "gone"), {"a"})
    assert op.is_unwanted(baseline, op.dns_policy_manifest("payments", "a"), {"a"})
    assert not op.is_unwanted(baseline, op.deny_policy_manifest("payments", "a"), {"a"})


def test_write_counts_of_a_deleted_baseline_is_no_error() -> None:
    custom = StubApi(patch_cluster_custom_object_status=[{}, api_error(404)])
    assert op.write_counts("payments", {"namespaces": 1, "policies": 2}, custom=custom) is True
    assert op.write_counts("payments", {"namespaces": 0, "policies": 0}, custom=custom) is False
    assert custom.calls[0] == ("patch_cluster_custom_object_status", {
        "group": "hedronite.io", "version": "v1alpha1", "plural": "namespacebaselines", "name": "payments",
        "body": {"status": {"namespaces": 1, "policies": 2}}})


def test_plan_namespace_releases_what_no_longer_matches_and_claims_what_does() -> None:
    specs = {
        "payments": {"namespaceLabel": "team=payments"},
        "billing": {"namespaceLabel": "team=billing"},
        "everyone": {"namespaceLabel": "zone=eu"},
        "broken": {"namespaceLabel": "zone"},  # slipped past the schema: skipped, its status says why
    }
    release, claim = op.plan_namespace({"team": "billing", "zone": "eu"}, specs, holding={"payments", "everyone"})
    assert release == ["payments"]
    assert [b.name for b in claim] == ["billing", "everyone"]
    assert op.plan_namespace({}, specs, holding=set()) == ([], [])
    assert op.plan_namespace(None, specs, holding={"billing"}) == (["billing"], [])


def test_apply_to_namespace_takes_over_a_releasing_baselines_policies_in_place() -> None:
    theirs = existing("a", baseline="security")
    networking = StubApi(read_namespaced_network_policy=lambda name, namespace: theirs[name],
                      replace_namespaced_network_policy=lambda name, namespace, body: body)
    payments = op.parse_baseline("payments", SPEC)
    assert op.apply_to_namespace(payments, "a", networking=networking, report=Reports()) == 0  # not released: theirs
    assert op.apply_to_namespace(payments, "a", networking=networking, report=Reports(),
                                 takeover=frozenset({"security"})) == 2
    relabelled = [op._as_dict(kw["body"])["metadata"] for _, kw in networking.calls_to("replace")]
    assert [m["labels"]["hedronite.io/namespacebaseline"] for m in relabelled] == ["payments", "payments"]
    assert [m["uid"] for m in relabelled] == ["policy-uid", "policy-uid"]  # replaced, not re-created
