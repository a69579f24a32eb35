"""The lab engine without a cluster: the registry, the proxy's rules, the variant edits."""

from __future__ import annotations

import json

import pytest

from operatorlab.labs import Check, Lab, faults, registry
from operatorlab.labs.proxy import Rule, RuleSet, gone_event, proxy_kubeconfig, status_body

ISSUE_LABS = {"kill-mid-reconcile", "drop-on-resume", "non-idempotent-create", "stuck-finalizer", "missing-rbac",
              "crd-group-mismatch", "drift-healing", "api-pressure", "watch-expiry", "controller-manager-down"}


def test_registry_finds_every_lab_of_the_issue_with_a_summary_readme_and_hints():
    labs = registry.discover()
    assert ISSUE_LABS <= set(labs)
    for lab_id, cls in labs.items():
        assert issubclass(cls, Lab) and cls.id == lab_id
        assert cls.summary and "\n" not in cls.summary
        assert len(cls.hints) >= 2, lab_id
        assert (registry.labs_dir() / lab_id / "README.md").is_file(), lab_id


def test_at_least_six_labs_are_drills():
    assert len(registry.drills()) >= 6


def test_unknown_lab_names_the_known_ones():
    with pytest.raises(registry.UnknownLab, match="kill-mid-reconcile"):
        registry.get("no-such-lab")


def test_a_lab_py_without_a_lab_class_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "lab.py").write_text("x = 1\n")
    with pytest.raises(TypeError, match="exactly one Lab subclass"):
        registry.discover(tmp_path)


def test_labs_that_stop_components_say_so():
    assert "local" in registry.get("controller-manager-down").requires
    assert not registry.get("kill-mid-reconcile").requires


def test_status_rule_matches_method_and_path_and_counts_down():
    rules = RuleSet([Rule("status", status=429, retry_after=2, method="POST", path="/resourcequotas$", times=2)])
    assert rules.decide("GET", "/api/v1/namespaces/x/resourcequotas", {}) is None
    assert rules.decide("POST", "/api/v1/namespaces/x/resourcequotas", {}).status == 429
    assert rules.decide("post", "/api/v1/namespaces/x/resourcequotas", {}) is not None
    assert rules.decide("POST", "/api/v1/namespaces/x/resourcequotas", {}) is None  # used up
    assert len(rules.hits["429 POST /resourcequotas$"]) == 2
    assert [r["rule"] is not None for r in rules.stats()["requests"]] == [False, True, True, False]


def test_gone_and_cut_apply_to_watches_only():
    rules = RuleSet([Rule("gone", path="/tenants$")])
    assert rules.decide("GET", "/apis/hedronite.io/v1/tenants", {}) is None
    assert rules.decide("GET", "/apis/hedronite.io/v1/tenants", {"watch": "true"}).action == "gone"
    assert rules.decide("GET", "/apis/hedronite.io/v1/tenants", {"watch": "1"}) is not None
    assert Rule("cut", after=1, watch=True).matches("GET", "/api/v1/pods", {"watch": "true"})
    assert not Rule("status", watch=False).matches("GET", "/api/v1/pods", {"watch": "true"})


def test_first_matching_rule_wins():
    rules = RuleSet([Rule("status", status=500, path="/a"), Rule("status", status=503)])
    assert rules.decide("GET", "/a/b", {}).status == 500
    assert rules.decide("GET", "/c", {}).status == 503


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="unknown action"):
        Rule("explode")
    with pytest.raises(ValueError, match="error status"):
        Rule("status", status=200)
    with pytest.raises(Exception):
        Rule("status", path="(")


def test_error_bodies_are_kubernetes_status_objects():
    body = status_body(429)
    assert body["kind"] == "Status" and body["code"] == 429 and body["reason"] == "TooManyRequests"
    event = json.loads(gone_event())
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"


def test_proxy_kubeconfig_points_at_loopback_without_credentials():
    import yaml

    config = yaml.safe_load(proxy_kubeconfig(12345))
    assert config["clusters"][0]["cluster"]["server"] == "http://127.0.0.1:12345"
    assert config["users"][0]["user"] == {}


def test_transform_needs_exactly_one_match_and_undoes():
    text = "a = 1\nb = 2\n"
    edits = [("b = 2\n", "b = 3\n")]
    broken = faults.transform(text, edits)
    assert broken == "a = 1\nb = 3\n"
    assert faults.transform(broken, faults.undo_edits(edits)) == text
    with pytest.raises(faults.VariantError, match="must replace some text"):
        faults.transform(text, [("", "x")])
    with pytest.raises(faults.VariantError, match="found 0"):
        faults.transform(text, [("c = 3", "")])
    with pytest.raises(faults.VariantError, match="found 2"):
        faults.transform(text + text, edits)


@pytest.mark.parametrize("lab_id", ["drop-on-resume", "non-idempotent-create", "crd-group-mismatch"])
def test_each_broken_variant_is_a_small_exact_edit_of_the_tenant_operator(lab_id):
    from operatorlab import operators

    cls = registry.get(lab_id)
    original = operators.operator_path("tenant").read_text()
    broken = faults.variant("tenant", cls.edits)
    assert broken != original
    assert faults.transform(broken, faults.undo_edits(cls.edits)) == original
    changed = sum(len(old.splitlines()) for old, _ in cls.edits)
    assert changed <= 20, f"{lab_id}: the variant should be a small edit, it changes {changed} lines"
    compile(broken, lab_id, "exec")


def test_kill_at_knows_the_operator_hook_points(tmp_path):
    env = faults.kill_at("after-namespace", tmp_path / "once")
    assert env == {"OPERATORLAB_KILL_AT": "after-namespace", "OPERATORLAB_KILL_ONCE_FILE": str(tmp_path / "once")}
    with pytest.raises(ValueError, match="after-quota"):
        faults.kill_at("before-lunch", tmp_path / "once")
    from operatorlab import operators

    source = operators.operator_path("tenant").read_text()
    for point in faults.KILL_POINTS:
        assert f'_fault_point("{point}")' in source
    assert f'KILL_AT_ENV = "{faults.KILL_AT_ENV}"' in source


def test_require_local_refuses_an_existing_cluster():
    from operatorlab.cluster import ExistingCluster
    from operatorlab.labs import LabUnavailable

    with pytest.raises(LabUnavailable, match="Unavailable here: stop/start kube-controller-manager"):
        faults.stop_component(ExistingCluster(), "kube-controller-manager")


def test_check_is_a_plain_record():
    assert Check("x", False, "see y") == Check("x", False, "see y")


def test_cli_lists_every_lab_with_its_summary(capsys, monkeypatch):
    from operatorlab import cli

    monkeypatch.setenv("NO_COLOR", "1")
    assert cli.main(["lab", "list"]) == 0
    out = capsys.readouterr().out
    for lab_id, cls in registry.discover().items():
        assert lab_id in out and cls.summary in out
    assert "\033[" not in out


def test_lab_panel_offers_the_buttons_and_a_stable_repr(tmp_path):
    from operatorlab.cluster import ExistingCluster
    from operatorlab.labs import LabContext
    from operatorlab.widgets import LabPanel

    panel = LabPanel("stuck-finalizer", ctx=LabContext(ExistingCluster(), state_dir=tmp_path), solve_button=True)
    assert list(panel.buttons) == ["inject", "check", "hint", "solve"]
    assert repr(panel) == "LabPanel('stuck-finalizer')"
    panel._run(panel.check)  # not started: the panel shows the error instead of raising
    assert "not started" in panel.output.value
