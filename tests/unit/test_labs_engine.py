"""The lab engine without a cluster: the registry, the proxy's rules, the variant edits, state and drills."""

from __future__ import annotations

import ast
import difflib
import json
import re

import pytest

from operatorlab import operators
from operatorlab.cluster import ExistingCluster
from operatorlab.cluster.process import Identity
from operatorlab.faults import components, variants
from operatorlab.faults.proxy import Rule, RuleSet, gone_event, status_body, write_proxy_kubeconfig
from operatorlab.labs import Check, Lab, LabContext, registry, runner
from operatorlab.labs.errors import BadState, LabNotStarted
from operatorlab.labs.state import LabState, ProcessRecord, StateFile, TrackedObject
from operatorlab.labs.tenantlab import VariantLab

KNOWN_LABS = {"kill-mid-reconcile", "drop-on-resume", "non-idempotent-create", "stuck-finalizer", "missing-rbac",
              "crd-group-mismatch", "drift-healing", "api-pressure", "watch-expiry", "controller-manager-down"}


def test_registry_finds_every_lab_with_a_summary_readme_and_hints():
    labs = registry.discover()
    assert set(labs) >= KNOWN_LABS
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
    # A rule's answer is recorded at once; a forwarded request's waits for the apiserver's.
    assert [r["status"] for r in rules.stats()["requests"]] == [None, 429, 429, None]


def test_a_list_of_retry_afters_is_taken_in_turn():
    rule = Rule("status", status=429, retry_after=[1, 5])
    assert [rule.retry_after_of(n) for n in range(4)] == [1.0, 5.0, 1.0, 5.0]
    assert Rule("status", status=429, retry_after=2).retry_after_of(7) == 2
    assert Rule("status", status=429).retry_after_of(0) is None


def test_gone_applies_to_watches_only_and_cut_to_any_request():
    rules = RuleSet([Rule("gone", path="/tenants$")])
    assert rules.decide("GET", "/apis/hedronite.io/v1/tenants", {}) is None
    assert rules.decide("GET", "/apis/hedronite.io/v1/tenants", {"watch": "true"}).action == "gone"
    assert rules.decide("GET", "/apis/hedronite.io/v1/tenants", {"watch": "1"}) is not None
    assert Rule("cut", after=1, watch=True).matches("GET", "/api/v1/pods", {"watch": "true"})
    assert not Rule("cut", after=1, watch=True).matches("GET", "/api/v1/pods", {})
    assert Rule("cut", watch=False).matches("GET", "/api/v1/pods", {})  # a LIST's answer, cut off
    assert not Rule("status", watch=False).matches("GET", "/api/v1/pods", {"watch": "true"})


def test_stall_holds_plain_requests_and_watches_alike():
    rules = RuleSet([Rule("stall", method="GET", path="/networkpolicies/", after=30, times=1)])
    assert rules.decide("GET", "/apis/networking.k8s.io/v1/namespaces/x/networkpolicies", {}) is None
    stalled = rules.decide("GET", "/apis/networking.k8s.io/v1/namespaces/x/networkpolicies/deny", {})
    assert stalled.action == "stall" and stalled.after == 30
    assert rules.hits == {"stall-30s GET /networkpolicies/": [rules.hits["stall-30s GET /networkpolicies/"][0]]}
    assert rules.decide("GET", "/apis/networking.k8s.io/v1/namespaces/x/networkpolicies/deny", {}) is None  # once
    assert Rule("stall", after=1).matches("GET", "/api/v1/pods", {"watch": "true"})


def test_first_matching_rule_wins():
    rules = RuleSet([Rule("status", status=500, path="/a"), Rule("status", status=503)])
    assert rules.decide("GET", "/a/b", {}).status == 500
    assert rules.decide("GET", "/c", {}).status == 503


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="unknown action"):
        Rule("explode")
    with pytest.raises(ValueError, match="error status"):
        Rule("status", status=200)
    with pytest.raises(re.error):
        Rule("status", path="(")


def test_error_bodies_are_kubernetes_status_objects():
    body = status_body(429)
    assert body["kind"] == "Status" and body["code"] == 429 and body["reason"] == "TooManyRequests"
    event = json.loads(gone_event())
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"


def test_proxy_kubeconfig_points_at_loopback_without_credentials(tmp_path):
    import yaml

    config = yaml.safe_load(write_proxy_kubeconfig(tmp_path / "proxy.kubeconfig", 12345).read_text())
    assert config["clusters"][0]["cluster"]["server"] == "http://127.0.0.1:12345"
    assert config["users"][0]["user"] == {}


def test_kill_rule_fires_on_the_acknowledged_write_only_and_is_used_up_by_kills():
    kill = Rule("kill", method="POST", path="/namespaces$", response=201, pid=42, started="7", times=1)
    rules = RuleSet([kill])
    assert rules.decide("POST", "/api/v1/namespaces", {}) is None  # not a request rule: forwarded
    assert rules.on_response("POST", "/api/v1/namespaces", {}, 409) is None  # refused: nothing was written
    assert rules.on_response("GET", "/api/v1/namespaces", {}, 201) is None
    assert rules.on_response("POST", "/api/v1/namespaces", {}, 201) is kill
    assert kill.target == Identity(42, "7")
    assert rules.on_response("POST", "/api/v1/namespaces", {}, 201) is None  # once
    assert len(rules.hits[kill.name]) == 1


def test_kill_rule_without_response_fires_on_any_2xx_and_needs_an_identity():
    rule = Rule("kill", method="PATCH", pid=42, started="7")
    assert rule.acknowledged(200) and rule.acknowledged(201) and not rule.acknowledged(500)
    with pytest.raises(ValueError, match="pid and started"):
        Rule("kill", method="POST", pid=42)


SOURCE = '''"""A module."""

import kopf

GROUP, VERSION = "a.io", "v1"


@kopf.on.resume(GROUP, VERSION, "things")
@kopf.on.create(
    GROUP, VERSION, "things",
)
def handle(spec, **_):
    """Docstring."""
    return spec


def helper(x):
    return x + 1
'''


def test_variants_edit_named_definitions_and_restore_them():
    edits = (variants.DropDecorator("handle", "kopf.on.resume"),
             variants.ReplaceFunction("helper", "def helper(x):\n    return x - 1\n"),
             variants.ReplaceAssignment("VERSION", 'GROUP, VERSION = "a.io", "v2"'))
    broken = variants.apply(SOURCE, edits)
    assert "kopf.on.resume" not in broken and "@kopf.on.create(" in broken
    assert "return x - 1" in broken and '"v2"' in broken
    assert variants.restore(broken, SOURCE, edits) == SOURCE
    # The learner's other changes survive the reference fix.
    edited = broken.replace('"""Docstring."""', '"""My notes."""')
    assert variants.restore(edited, SOURCE, edits) == SOURCE.replace('"""Docstring."""', '"""My notes."""')


def test_variant_edits_fail_loudly_when_the_named_part_is_gone_or_unchanged():
    with pytest.raises(variants.VariantError, match="one module-level function nothing"):
        variants.apply(SOURCE, [variants.ReplaceFunction("nothing", "def nothing(): pass\n")])
    with pytest.raises(variants.VariantError, match=r"one @kopf\.on\.update"):
        variants.apply(SOURCE, [variants.DropDecorator("handle", "kopf.on.update")])
    with pytest.raises(variants.VariantError, match="changes nothing"):
        variants.apply(SOURCE, [variants.ReplaceFunction("helper", "def helper(x):\n    return x + 1\n")])
    with pytest.raises(variants.VariantError, match="assignment to PLURAL"):
        variants.apply(SOURCE, [variants.ReplaceAssignment("PLURAL", "PLURAL = 1")])
    with pytest.raises(variants.VariantError, match="does not parse"):
        variants.restore("def (", SOURCE, [variants.DropDecorator("handle", "kopf.on.resume")])


VARIANT_LABS = [lab_id for lab_id, cls in registry.discover().items() if issubclass(cls, VariantLab)]


@pytest.mark.parametrize("lab_id", VARIANT_LABS)
def test_each_broken_variant_still_applies_to_its_operator_and_is_small(lab_id):
    cls = registry.get(lab_id)
    original = operators.operator_path(cls.variant_of).read_text()
    broken = variants.apply(original, cls.edits)
    assert broken != original
    assert variants.restore(broken, original, cls.edits) == original
    diff = difflib.SequenceMatcher(None, original.splitlines(), broken.splitlines())
    changed = sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in diff.get_opcodes() if op != "equal")
    assert changed <= 20, f"{lab_id}: the variant should be a small edit, it changes {changed} lines"
    compile(broken, lab_id, "exec")


def test_lab_state_round_trips_through_json(tmp_path):
    state = StateFile(tmp_path / "lab.json")
    state.begin(LabState(lab="x", kubeconfig="/k"))
    state.record.objects.append(TrackedObject("hedronite.io/v1", "Tenant", "a"))
    state.record.processes["operator"] = ProcessRecord("operator", 1, "2", "/log", path="/op.py", env={"A": "1"})
    state.save()
    again = StateFile(tmp_path / "lab.json").record
    assert again == state.record
    assert again.processes["operator"].identity == Identity(1, "2")


def test_kopf_argv_leaves_the_peering_mode_to_the_environment_only_when_asked():
    """--standalone by default; a peering name; or neither, so that KOPF_RUN_* variables decide (two-replicas)."""
    def peering_flags(**kwargs) -> list[str]:
        return [a for a in operators.kopf_argv("op.py", **kwargs) if a in ("--standalone", "--peering=p")]

    assert peering_flags() == ["--standalone"]
    assert peering_flags(peering="p") == ["--peering=p"]
    assert peering_flags(standalone=False) == []
    old = ProcessRecord("operator", 1, "2", "/log")  # a state file written before the field existed
    assert old.standalone and LabState.from_json({"lab": "x", "kubeconfig": "/k", "processes": {
        "operator": {"kind": "operator", "pid": 1, "started": "2", "log": "/log"}}}).processes["operator"].standalone


def test_a_state_file_of_another_shape_is_a_clear_error_and_kept(tmp_path):
    path = tmp_path / "lab.json"
    path.write_text(json.dumps({"lab": "x", "kubeconfig": "/k", "objects": [["tenant", "a", None]]}))
    with pytest.raises(BadState, match=re.escape(f"rm {path}")):
        _ = StateFile(path).record  # reading the record is what raises
    assert path.exists()


class Trivial(Lab):
    """A lab with nothing on the cluster: its check passes once ``fixed`` is set."""

    id = "trivial"
    summary = "nothing"
    drill = True
    fixed = False

    def setup(self) -> None:
        pass

    def inject(self) -> None:
        pass

    def check(self) -> list[Check]:
        return [Check("fixed", Trivial.fixed, "not yet")]


def test_a_drill_ends_when_its_check_passes(tmp_path):
    lab = Trivial(LabContext(ExistingCluster(), state_dir=tmp_path))
    Trivial.fixed = False
    runner.drill_start(lab)
    results, drill = runner.drill_check(lab)
    assert not results[0].passed and drill.finished is None
    assert runner.drill_current(lab.ctx) == drill
    Trivial.fixed = True
    results, drill = runner.drill_check(lab)
    assert results[0].passed and drill.finished is not None and drill.elapsed() >= 0
    assert runner.drill_current(lab.ctx) is None


def test_a_drill_ends_with_the_reset_of_its_lab_and_so_does_its_state(tmp_path):
    lab = Trivial(LabContext(ExistingCluster(), state_dir=tmp_path))
    Trivial.fixed = False
    runner.drill_start(lab)
    runner.hint(lab)
    runner.reset(lab)
    assert runner.drill_current(lab.ctx) is None
    assert not lab.state.exists
    with pytest.raises(LabNotStarted, match="operatorlab lab start trivial"):
        runner.check(lab)


def test_stopping_a_component_of_an_existing_cluster_is_refused_with_the_fix():
    with pytest.raises(components.ComponentUnavailable, match="Unavailable here: stop/start kube-controller-manager"):
        components.stop_component(ExistingCluster(), "kube-controller-manager")


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
    from operatorlab.widgets import LabPanel

    panel = LabPanel("stuck-finalizer", ctx=LabContext(ExistingCluster(), state_dir=tmp_path), solve_button=True)
    assert list(panel.buttons) == ["inject", "check", "hint", "solve", "reset"]
    assert repr(panel) == "LabPanel('stuck-finalizer')"
    panel._run(panel.check)  # not started: the panel shows the error instead of raising
    assert "Not started yet" in panel.output.value and "inject" in panel.output.value
    assert not any(b.disabled for b in panel.buttons.values()), "the buttons come back after an error"


def _function_without_docstring(source: str, name: str) -> str:
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    if ast.get_docstring(node):
        node.body = node.body[1:]
    return ast.dump(node)


def test_the_take_over_solution_shows_the_operators_own_ownership_check():
    solution = (registry.labs_dir() / "take-over" / "SOLUTION.md").read_text()
    code = re.search(r"```python\n(.*?)```", solution, re.S)
    assert code, "SOLUTION.md shows the fixed ownership() in a python block"
    assert _function_without_docstring(code.group(1), "ownership") == \
        _function_without_docstring(operators.operator_path("tenant").read_text(), "ownership")


def test_the_operator_launcher_takes_a_path_and_says_so():
    with pytest.raises(FileNotFoundError, match=r"OperatorProcess\(operator_path\('tenant'\)\)"):
        operators.OperatorProcess("tenant").start()


def test_a_lab_panel_on_a_cluster_that_cannot_run_the_lab_says_why_instead_of_raising(tmp_path):
    from operatorlab.widgets import LabPanel

    panel = LabPanel("controller-manager-down", ctx=LabContext(ExistingCluster(), state_dir=tmp_path))
    assert not panel.buttons
    assert "Not on this cluster" in panel.output.value and "only the built-in local cluster" in panel.output.value
    assert repr(panel) == "LabPanel('controller-manager-down')"
