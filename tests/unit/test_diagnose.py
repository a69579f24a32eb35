"""Unit tests of the pure parts of ``operatorlab doctor`` and ``operatorlab why``: version rules,
kopf's bookkeeping read back, peering pauses, target parsing, schema pruning, and each
diagnosis decided from facts. The checks that read a real machine or cluster are proven in
tests/integration/test_doctor.py and test_why.py.

Each diagnosis is shown both ways: present for the broken facts, absent for the healthy ones.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import kopf
import pytest

from operatorlab.diagnose import doctor, kopfstate, resolve, versions, why
from operatorlab.diagnose.evidence import AccessCheck, Facts
from operatorlab.diagnose.kopfstate import Peering
from operatorlab.diagnose.presence import SeenOperator, kopf_command
from operatorlab.diagnose.report import Finding, exit_code, ranked, render, summary

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
TENANTS = resolve.ApiResource(group="hedronite.io", version="v1", plural="tenants", singular="tenant", kind="Tenant",
                              namespaced=False, short_names=("tn",), subresources=("status",))
RUNNING = SeenOperator(where="process 42 on this machine", what="kopf run tenant_operator.py", running=True)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")  # as kopf's format_iso8601 writes it


def _tenant(**meta: object) -> dict:
    spec = {"cpuQuota": "1"}
    annotations = {kopfstate.LAST_HANDLED: json.dumps({"spec": spec}) + "\n"}
    metadata = {"name": "acme", "uid": "u-1", "generation": 1, "finalizers": [kopfstate.FINALIZER],
                "annotations": annotations, "creationTimestamp": "2026-05-01T11:00:00Z", **meta}
    return {"apiVersion": "hedronite.io/v1", "kind": "Tenant", "metadata": metadata, "spec": spec,
            "status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled",
                                                         "message": "ok", "observedGeneration": 1}]}}


def _facts(obj: dict | None, **kw: object) -> Facts:
    base: dict = {"target": resolve.parse_target("tenant/acme"), "resource": TENANTS, "crd": None, "namespace": None,
                  "obj": obj, "now": NOW, "operator": "tenant", "seen": (RUNNING,), "looked_for": ("processes",)}
    return Facts(**{**base, **kw})


def _titles(findings: list[Finding], severity: str) -> list[str]:
    return [f.title for f in findings if f.severity == severity]


# --- versions --------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "parsed"), [("3.11.7", (3, 11, 7)), ("v1.32.4-dispatcher", (1, 32, 4)),
                                              ("go1.26.8", (1, 26, 8)), ("32+", (32,))])
def test_versions_are_read_from_what_tools_print(text: str, parsed: tuple[int, ...]) -> None:
    assert versions.parse(text) == parsed


def test_version_pins_as_pyproject_writes_them() -> None:
    assert versions.satisfies((1, 45, 2), ">=1.44,<2")
    assert not versions.satisfies((2, 0), ">=1.44,<2")
    assert not versions.satisfies((3, 10, 4), ">=3.11")
    assert versions.satisfies((3, 11), ">=3.11") and versions.satisfies((3, 14), "")
    assert versions.requirement("kopf>=1.44,<2") == ("kopf", ">=1.44,<2")
    assert versions.requirement("types-PyYAML") == ("types-pyyaml", "")
    with pytest.raises(ValueError, match="cannot read"):
        versions.satisfies((1,), "~=1.2")


# --- report ----------------------------------------------------------------------------


def test_problems_print_first_in_words_with_their_fix_and_fail_the_exit_code() -> None:
    findings = [Finding("OK", "fine"), Finding("WARNING", "odd"), Finding("PROBLEM", "broken", ("why",), fix="do it")]
    assert [f.severity for f in ranked(findings)] == ["PROBLEM", "WARNING", "OK"]
    text = render(findings)
    assert text.splitlines()[0].split() == ["PROBLEM", "broken"]
    assert "fix: do it" in text and "\x1b[" not in text  # a pytest capture is no terminal: words only
    assert exit_code(findings) == 1 and exit_code(findings[:2]) == 0
    assert summary(findings) == "1 problem, 1 warning" and summary(findings[:1]) == "no problems"
    assert render(findings, rank=False).splitlines()[0].split() == ["OK", "fine"]


# --- doctor's decisions ------------------------------------------------------------------


def test_python_outside_requires_python_is_a_problem_and_an_untested_one_a_warning() -> None:
    project = {"requires-python": ">=3.11", "classifiers": ["Programming Language :: Python :: 3.11",
                                                            "Programming Language :: Python :: 3.13"]}
    assert doctor.check_python((3, 11, 7), project).severity == "OK"
    old = doctor.check_python((3, 10, 12), project)
    assert old.severity == "PROBLEM" and "requires >=3.11" in old.title
    assert old.fix == "rm -rf .venv && make venv PYTHON=python3.13"
    assert doctor.check_python((3, 14, 0), project).severity == "WARNING"


def test_the_real_pyproject_pins_the_packages_the_doctor_checks() -> None:
    pins = doctor.package_pins()
    assert {"kopf", "kubernetes", "jupyterlab"} <= set(pins)
    assert doctor.check_python().severity in ("OK", "WARNING")  # this interpreter runs the tests


def test_a_package_that_does_not_import_or_misses_its_pin_is_a_problem() -> None:
    assert doctor.check_package("kopf").severity == "OK"
    missing = doctor.check_package("operatorlab_no_such_package")
    assert missing.severity == "PROBLEM" and "ModuleNotFoundError" in missing.title
    assert missing.fix and "-m pip install -e" in missing.fix and "[lab,test]" in missing.fix
    pinned = doctor.check_package("kopf", {"kopf": ">=99"})
    assert pinned.severity == "PROBLEM" and "pins kopf>=99" in pinned.title


def test_binaries_or_a_recent_go_are_enough_and_existing_clusters_need_neither() -> None:
    bin_dir = Path("/cache/bin")
    assert doctor.check_toolchain("local", [], bin_dir, None).severity == "OK"
    assert doctor.check_toolchain("existing", ["etcd"], bin_dir, None).severity == "OK"
    can_build = doctor.check_toolchain("local", ["etcd"], bin_dir, ("/usr/bin/go", (1, 26, 1)))
    assert can_build.severity == "WARNING" and can_build.fix == "make setup"
    too_old = doctor.check_toolchain("local", ["etcd"], bin_dir, ("/usr/bin/go", (1, 25, 9)))
    assert too_old.severity == "PROBLEM" and too_old.fix == "make setup" and "Go >= 1.26" in too_old.title
    assert doctor.check_toolchain("local", ["etcd"], bin_dir, None).severity == "PROBLEM"


def test_disk_needs_are_summed_per_filesystem() -> None:
    cache, gomod, gobuild = Path("/c"), Path("/g/mod"), Path("/g/build")
    needs = doctor.disk_needs(cache, [gomod, gobuild], build=True)
    assert sum(needs.values()) == doctor.CLUSTER_NEED + doctor.BINARIES_NEED + doctor.GO_CACHES_NEED
    assert doctor.disk_needs(cache, [gomod], build=False) == {cache: doctor.CLUSTER_NEED}
    one_disk = {p: (1, 4 * doctor.GB) for p in needs}  # each 4 GB free, but all on one filesystem
    short = doctor.check_disk(needs, lambda p: one_disk[p])
    assert short.severity == "PROBLEM" and short.fix and "OPERATORLAB_CACHE" in short.fix
    two_disks = {cache: (1, 4 * doctor.GB), gomod: (2, 9 * doctor.GB), gobuild: (2, 9 * doctor.GB)}
    assert doctor.check_disk(needs, lambda p: two_disks[p]).severity == "OK"


def test_kubectl_beyond_one_minor_of_the_server_is_a_warning() -> None:
    assert doctor.skew_finding("kubectl", "k", "v1.35.0", "v1.36.3", fix="x").severity == "OK"
    assert doctor.skew_finding("kubectl", "k", "v1.37.1", "v1.36.3", fix="x").severity == "OK"
    old = doctor.skew_finding("kubectl", "/usr/bin/kubectl", "v1.32.4-dispatcher", "v1.36.3", fix="x")
    assert old.severity == "WARNING" and "more than one minor version apart" in old.title and old.fix == "x"
    assert "version skew policy" in old.details[0]  # operatorlab.kubectl.skew_warning's words
    assert "dl.k8s.io/release/v1.31.0/bin/linux/" in doctor.install_kubectl_command("v1.31.0+k3s1")


def test_a_crd_is_incomplete_when_absent_not_established_or_not_serving_a_version() -> None:
    wanted = {"spec": {"versions": [{"name": "v1", "served": True}, {"name": "v2", "served": True}]}}
    established = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
    assert doctor.crd_gaps(wanted, None) == "not applied"
    assert doctor.crd_gaps(wanted, {"spec": wanted["spec"], "status": {}}) == "not Established"
    assert doctor.crd_gaps(wanted, {"spec": {"versions": [{"name": "v1", "served": True}]}, **established}) \
        == "does not serve v2"
    assert doctor.crd_gaps(wanted, {**wanted, **established}) is None


# --- kopf's bookkeeping read back ------------------------------------------------------


def test_kopf_names_are_the_installed_kopfs() -> None:
    assert kopf.OperatorSettings().persistence.finalizer == kopfstate.FINALIZER
    assert kopfstate.FINALIZER == "kopf.zalando.org/KopfFinalizerMarker"
    assert kopfstate.LAST_HANDLED == "kopf.zalando.org/last-handled-configuration"


def test_a_backing_off_handler_is_read_from_its_annotation() -> None:
    record = {"started": _iso(NOW - timedelta(seconds=5)), "delayed": _iso(NOW + timedelta(seconds=25)),
              "purpose": "create", "retries": 1, "success": False, "failure": False, "message": "name taken"}
    annotations = {"kopf.zalando.org/reconcile": json.dumps(record), "kopf.zalando.org/touch-dummy": "x",
                   kopfstate.LAST_HANDLED: "{}"}
    (progress,) = kopfstate.progress(annotations)
    assert (progress.handler, progress.retries, progress.message) == ("reconcile", 1, "name taken")
    assert progress.state(NOW) == "backing off"
    assert progress.state(NOW + timedelta(seconds=30)) == "retry due"
    assert kopfstate.progress({"kopf.zalando.org/reconcile": json.dumps({"started": _iso(NOW)})})[0].state(NOW) \
        == "running"


def test_progress_under_a_custom_prefix_counts_once_marked_as_kopfs() -> None:
    record = json.dumps({"started": _iso(NOW), "retries": 0})
    assert kopfstate.progress({"example.com/fn": record}) == []
    assert [p.handler for p in kopfstate.progress({"example.com/fn": record, "example.com/kopf-managed": "yes"})] \
        == ["fn"]


def test_unhandled_changes_compare_the_essence_kopf_stored() -> None:
    obj = _tenant()
    assert kopfstate.unhandled_changes(obj) == []
    obj["spec"] = {"cpuQuota": "2"}
    assert kopfstate.unhandled_changes(obj) == ["spec"]
    obj["metadata"]["labels"] = {"team": "blue"}
    assert kopfstate.unhandled_changes(obj) == ["spec", "metadata.labels"]
    del obj["metadata"]["annotations"][kopfstate.LAST_HANDLED]
    assert kopfstate.unhandled_changes(obj) is None


def _peering(*peers: tuple[str, int, int]) -> Peering:
    status = {identity: {"priority": priority, "lifetime": 60, "lastseen": _iso(NOW - timedelta(seconds=age))}
              for identity, priority, age in peers}
    return Peering.from_object({"kind": "ClusterKopfPeering", "metadata": {"name": "p"}, "status": status})


def test_peering_pauses_lower_priorities_and_everyone_on_a_tie_as_kopf_does() -> None:
    assert _peering(("op", 0, 5)).pause(NOW) is None
    frozen = _peering(("op", 0, 5), ("freeze", 100, 5)).pause(NOW)
    assert frozen and [p.identity for p in frozen.paused] == ["op"] and not frozen.tie
    tie = _peering(("a", 0, 5), ("b", 0, 5)).pause(NOW)
    assert tie and tie.tie and {p.identity for p in tie.paused} == {"a", "b"}
    assert _peering(("op", 0, 5), ("freeze", 100, 120)).pause(NOW) is None  # the freeze expired


# --- resolving ---------------------------------------------------------------------------


def test_targets_are_read_as_kubectl_reads_them() -> None:
    assert resolve.parse_target("tenant/acme") == resolve.Target("tenant", None, None, "acme")
    assert resolve.parse_target("tenants.hedronite.io/acme") == resolve.Target("tenants", None, "hedronite.io", "acme")
    assert resolve.parse_target("tenants.v1.hedronite.io/a") == resolve.Target("tenants", "v1", "hedronite.io", "a")
    assert resolve.parse_target("deployments.apps/web").group == "apps"
    for name in ("tenant", "tenants", "Tenant", "tn"):
        assert resolve.matches(resolve.parse_target(f"{name}/x"), TENANTS)
    assert not resolve.matches(resolve.parse_target("tenants.v2.hedronite.io/x"), TENANTS)
    with pytest.raises(ValueError, match="KIND/NAME"):
        resolve.parse_target("acme")


def test_status_pruning_unless_preserved() -> None:
    assert resolve.status_pruning({"type": "object", "properties": {"status": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}) is None
    assert "declares only phase" in resolve.status_pruning({"type": "object", "properties": {
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}})
    assert "no status" in resolve.status_pruning({"type": "object", "properties": {"spec": {"type": "object"}}})


def test_a_kopf_process_is_recognised_however_it_was_started() -> None:
    assert kopf_command(["/v/bin/python", "-m", "kopf", "run", "op.py", "--standalone"]) == ["op.py", "--standalone"]
    assert kopf_command(["/v/bin/kopf", "run", "-A", "op.py"]) == ["-A", "op.py"]
    assert kopf_command(["python", "-m", "kopf", "freeze"]) is None


def test_only_an_operator_that_may_handle_the_kind_counts_as_running_for_it(tmp_path: Path) -> None:
    def seen(path: str | Path) -> SeenOperator:
        found = SeenOperator(where="process 7", what=f"kopf run {path}", running=True, files=(str(path),))
        return found.for_kind("tenants", "Tenant", "tenant")

    assert seen("/x/operators/tenant/tenant_operator.py").handles is True
    assert seen("/tmp/labs/crd-group-mismatch/tenant_operator.py").handles is True  # a learner's copy
    assert seen("/x/operators/website/website_operator.py").handles is False
    (tmp_path / "mine.py").write_text('@kopf.on.create("hedronite.io", "v1", "tenants")\ndef f(**_): ...\n')
    (tmp_path / "idle.py").write_text("import kopf\n")
    assert seen(tmp_path / "mine.py").handles is True and seen(tmp_path / "idle.py").handles is False
    assert seen(tmp_path / "gone.py").handles is None
    deleted = _tenant(deletionTimestamp="2026-05-01T11:59:58Z")
    others = (seen("/x/operators/website/website_operator.py"), seen(tmp_path / "idle.py"))
    (stuck,) = _titles(why.diagnose(_facts(deleted, seen=others)), "PROBLEM")
    assert stuck.startswith("stuck Terminating") and "no operator is seen running" in stuck


# --- why's diagnoses ------------------------------------------------------------------------


def test_a_healthy_tenant_says_handlers_completed_and_nothing_is_wrong() -> None:
    findings = why.diagnose(_facts(_tenant()))
    assert not _titles(findings, "PROBLEM") and not _titles(findings, "WARNING")
    assert "kopf's handlers completed for the object as it is now" in _titles(findings, "OK")
    assert why.settled(_facts(_tenant()))


def test_stuck_terminating_without_an_operator_gives_start_and_the_finalizer_patch_with_its_cost() -> None:
    deleted = _tenant(deletionTimestamp="2026-05-01T11:59:58Z")
    findings = why.diagnose(_facts(deleted, seen=()))
    first = findings[0]
    assert first.severity == "PROBLEM" and first.title.startswith("stuck Terminating")
    assert first.fix == "operatorlab operator run tenant"
    assert first.alternative == ("kubectl patch tenants.hedronite.io acme --type=merge "
                                 "-p '{\"metadata\":{\"finalizers\":null}}'")
    assert any("garbage collector" in d for d in first.details)
    # An operator is running and the deletion is a second old: kopf is about to act, nothing stuck.
    assert not _titles(why.diagnose(_facts(deleted)), "PROBLEM")
    # Running for long without acting: stuck, and no "start the operator" advice.
    late = why.diagnose(_facts(deleted, now=NOW + timedelta(minutes=5)))
    assert late[0].title.startswith("stuck Terminating for") and late[0].fix is None


def test_another_controllers_finalizer_is_named() -> None:
    deleted = _tenant(deletionTimestamp="2026-05-01T11:50:00Z", finalizers=["example.com/cleanup"])
    (stuck,) = _titles(why.diagnose(_facts(deleted)), "PROBLEM")
    assert "example.com/cleanup" in stuck and "kopf does not own" in stuck


def test_a_backing_off_handler_shows_its_retry_time_error_and_the_fix_the_message_names() -> None:
    message = ("Namespace tenant-acme exists and was not created for this Tenant: ... "
               "kubectl annotate namespace tenant-acme hedronite.io/adopt=acme")
    obj = _tenant()
    del obj["metadata"]["annotations"][kopfstate.LAST_HANDLED]
    obj["metadata"]["annotations"]["kopf.zalando.org/reconcile"] = json.dumps({
        "started": _iso(NOW - timedelta(seconds=3)), "delayed": _iso(NOW + timedelta(seconds=27)),
        "purpose": "create", "retries": 1, "success": False, "failure": False, "message": message})
    obj["status"] = {"phase": "NameTaken", "conditions": [{"type": "Ready", "status": "False", "reason": "NameTaken",
                                                           "message": message, "observedGeneration": 1}]}
    findings = why.diagnose(_facts(obj))
    backoff, condition = [f for f in findings if f.severity == "PROBLEM"]
    assert backoff.title == "handler 'reconcile' (create) failed and is backing off: kopf retries it at " \
                            "12:00:27 UTC (in 27 s)"
    assert f"last error: {message}" in backoff.details
    assert backoff.fix == condition.fix == "kubectl annotate namespace tenant-acme hedronite.io/adopt=acme"
    assert "Ready=False (NameTaken)" in condition.title


def test_never_handled_and_changed_since_handled() -> None:
    obj = _tenant(finalizers=[], annotations={})
    (never,) = _titles(why.diagnose(_facts(obj, seen=())), "PROBLEM")
    assert never.startswith("no kopf handler has ever handled this Tenant")
    changed = _tenant()
    changed["spec"] = {"cpuQuota": "3"}
    (pending,) = _titles(why.diagnose(_facts(changed, seen=())), "PROBLEM")
    assert "changed since kopf last handled it: spec" in pending
    assert _titles(why.diagnose(_facts(changed)), "WARNING")  # an operator runs: pending, not a problem


def test_an_unserved_version_is_the_likely_cause_with_the_crd_patch() -> None:
    crd = resolve.Crd(name="tenants.hedronite.io", group="hedronite.io", plural="tenants", singular="tenant",
                      kind="Tenant", short_names=(), namespaced=False, versions=(
                          resolve.CrdVersion("v1", True, True, 0, {}, True),
                          resolve.CrdVersion("v1beta1", False, False, 1, {}, True)))
    old_version = resolve.parse_target("tenants.v1beta1.hedronite.io/acme")
    findings = why.diagnose(_facts(_tenant(), crd=crd, target=old_version))
    assert findings[0].title == "version v1beta1 of tenants.hedronite.io is not served (served: false in the CRD)"
    assert '"path":"/spec/versions/1/served","value":true' in (findings[0].fix or "")
    assert not _titles(why.diagnose(_facts(_tenant(), crd=crd)), "PROBLEM")


def test_a_pause_by_peering_is_a_problem_while_the_object_waits() -> None:
    waiting = _tenant(finalizers=[], annotations={})
    pause = _peering(("root@host/1", 0, 5), ("freeze", 100, 5))
    findings = why.diagnose(_facts(waiting, peerings=(pause,)))
    (peering,) = [f for f in findings if "peering" in f.title]
    assert peering.severity == "PROBLEM" and "pauses root@host/1 in favour of freeze" in peering.title
    assert peering.fix == "kopf resume --id freeze --peering=p --all-namespaces"
    settled = why.diagnose(_facts(_tenant(), peerings=(pause,)))
    assert [f.severity for f in settled if "peering" in f.title] == ["WARNING"]


def test_missing_verbs_for_a_service_account_name_the_can_i_check_and_the_role_to_patch() -> None:
    user = "system:serviceaccount:ops:tenant-operator"
    access = tuple(AccessCheck(verb, "hedronite.io", "tenants", "", None, allowed=verb != "watch")
                   for verb in ("list", "watch", "patch"))
    findings = why.diagnose(_facts(_tenant(), user=user, access=access, roles=("tenant-operator",)))
    (denied,) = [f for f in findings if f.severity == "PROBLEM"]
    assert denied.title == f"{user} may not watch tenants.hedronite.io cluster-wide"
    assert f"check: kubectl auth can-i watch tenants.hedronite.io --all-namespaces --as {user}" in denied.details
    assert denied.fix == ("kubectl patch clusterrole tenant-operator --type=json -p '[{\"op\":\"add\",\"path\":"
                          "\"/rules/-\",\"value\":{\"apiGroups\":[\"hedronite.io\"],\"resources\":[\"tenants\"],"
                          "\"verbs\":[\"watch\"]}}]'")
    allowed = tuple(AccessCheck(a.verb, a.group, a.resource, "", None, allowed=True) for a in access)
    assert not _titles(why.diagnose(_facts(_tenant(), user=user, access=allowed)), "PROBLEM")


def test_an_unknown_kind_points_at_its_crd_file() -> None:
    findings = why.diagnose(_facts(None, resource=None, crd_file="crds/tenant.yaml"))
    assert findings[0].severity == "PROBLEM" and findings[0].fix == "kubectl apply -f crds/tenant.yaml"
