"""The Tenant labs grade behaviour: what is not the fix fails a named check.

tests/labs/test_labs.py proves each lab's protocol (its checks pass after setup, fail after
inject, pass after the reference fix; reset leaves nothing). Here, for kill-mid-reconcile,
drop-on-resume, crd-group-mismatch, non-idempotent-create and stuck-finalizer: the ways to
make the symptom go away without the fix (objects made by hand, a second operator started
outside the lab, kopf's bookkeeping removed, a finalizer stripped), each caught by the
check it names. And ``lab check``'s note on a retry kopf has put off, read from a real
backoff.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from operatorlab import tenants
from operatorlab.cluster import Cluster
from operatorlab.diagnose import kopfstate
from operatorlab.labs import Lab, checks, probes, registry, runner
from operatorlab.operators import OperatorProcess, operator_path
from operatorlab.wait import eventually
from tests.labs.clusters import ON_EXISTING_CLUSTER, own_or_current

# A cluster of its own beside the other Tenant labs' (see conftest.py): these bypasses take
# minutes, and a Tenant operator must not meet another on one cluster (the outside operators
# these tests start are the bypasses, and are stopped before the lab is reset).
pytestmark = pytest.mark.xdist_group("tenant-operator" if ON_EXISTING_CLUSTER else "labs-tenant-bypasses")

RUNS = "the lab's operator is running"
KILL = "a Tenant whose operator is killed mid-reconcile converges once it is back, nothing doubled"
GAP = "a namespace deleted while the operator is down comes back when it starts"
CGM_PROBE = "a new Tenant converges through the lab's operator (created, changed, deleted)"
NIC_PROBE = "a new Tenant converges, across a restart of the operator (created, operator restarted, changed, deleted)"
SF_PROBE = "a new Tenant deleted while the operator runs goes, and its namespace with it"
SF_CLEANUP = "Tenant lab-sf-amber went through the operator's cleanup"


@pytest.fixture(scope="module")
def bypass_cluster(tmp_path_factory) -> Iterator[Cluster]:
    yield from own_or_current("labs-tenant-bypasses", tmp_path_factory)


@pytest.fixture
def start(tmp_path, bypass_cluster, nothing_left) -> Iterator[Callable[[str], Lab]]:
    """``start(lab_id)``: the lab set up and injected in a work folder of the test's own; reset afterwards."""
    started: list[Lab] = []

    def start_lab(lab_id: str) -> Lab:
        cls = registry.get(lab_id)
        # Not the checkout's labs/<id>/: test_labs.py runs the same lab at the same time on another worker.
        (tmp_path / "labs" / cls.id).mkdir(parents=True)
        ctx = runner.context(bypass_cluster, state_dir=tmp_path / "state", workdir_root=tmp_path / "labs")
        lab = runner.create(cls, ctx)
        started.append(lab)
        runner.start(lab)
        return lab

    yield start_lab
    for lab in started:
        recorded = lab.record
        runner.reset(lab)
        nothing_left(lab, recorded)


@pytest.fixture
def outside(bypass_cluster) -> Iterator[Callable[[], OperatorProcess]]:
    """``outside()``: the real Tenant operator started outside the lab, as `operatorlab operator run tenant` in a
    terminal would; stopped before the lab is reset (ask for this fixture after ``start``)."""
    running: list[OperatorProcess] = []

    def run() -> OperatorProcess:
        running.append(OperatorProcess(operator_path("tenant"), kubeconfig=bypass_cluster.kubeconfig).start())
        return running[-1]

    yield run
    for operator in running:
        operator.stop()


def first_failure(lab: Lab) -> str:
    failing = [c for c in runner.check(lab, first_failure=True) if not c.passed]
    assert failing, "every check passes"
    return failing[0].name


def failures(lab: Lab) -> list[str]:
    return [c.name for c in runner.check(lab) if not c.passed]


def make_by_hand(lab: Lab, name: str, cpu: str) -> None:
    """The namespace and quota a Tenant asks for, made by a person (no owner reference: they cannot know the uid)."""
    namespace = tenants.namespace_of(name)
    if checks.get_or_none(lambda: lab.core.read_namespace(namespace)) is None:
        lab.core.create_namespace({"metadata": {"name": namespace, "labels": {tenants.TENANT_LABEL: name}}})
    quota = {"metadata": {"name": tenants.QUOTA_NAME}, "spec": {"hard": {"requests.cpu": cpu, "limits.cpu": cpu}}}
    if checks.get_or_none(lambda: lab.core.read_namespaced_resource_quota(tenants.QUOTA_NAME, namespace)) is None:
        lab.core.create_namespaced_resource_quota(namespace, quota)
    else:
        lab.core.patch_namespaced_resource_quota(tenants.QUOTA_NAME, namespace, quota)
    assert checks.tenant_reconciled(lab.api, name).passed  # the cluster now looks right


def reconciled(lab: Lab, name: str) -> None:
    eventually(lambda: checks.tenant_reconciled(lab.api, name).passed, timeout=30, message=f"{name} reconciled")


# -- kill-mid-reconcile ------------------------------------------------------------------


def test_kill_mid_reconcile_quota_made_by_hand_is_not_a_fix(start):
    lab = start("kill-mid-reconcile")
    make_by_hand(lab, "lab-kmr-beta", "2")
    assert first_failure(lab) == RUNS


def test_kill_mid_reconcile_a_second_operator_beside_the_lab_s_is_not_a_fix(start, outside):
    lab = start("kill-mid-reconcile")
    outside()
    reconciled(lab, "lab-kmr-beta")  # the outside operator finished the job...
    runner.restart(lab)  # ...and the lab's runs again too: two operators reconcile every Tenant
    assert first_failure(lab) == KILL  # while the lab's is killed, the other finishes the probe


# -- drop-on-resume ----------------------------------------------------------------------


def test_drop_on_resume_namespace_made_by_hand_is_not_a_fix(start):
    lab = start("drop-on-resume")
    make_by_hand(lab, "lab-dor-blue", "1")
    assert first_failure(lab) == GAP


def test_drop_on_resume_removing_kopf_s_last_handled_state_is_not_a_fix(start):
    lab = start("drop-on-resume")
    # Without it the Tenant looks new to kopf: on.create runs, and re-creates the namespace.
    lab.custom.patch_cluster_custom_object(*checks.TENANTS, "lab-dor-blue",
                                           {"metadata": {"annotations": {kopfstate.LAST_HANDLED: None}}})
    reconciled(lab, "lab-dor-blue")
    assert first_failure(lab) == GAP


# -- crd-group-mismatch ------------------------------------------------------------------


def test_crd_group_mismatch_namespace_made_by_hand_is_not_a_fix(start):
    lab = start("crd-group-mismatch")
    make_by_hand(lab, "lab-cgm-new", "1")
    assert first_failure(lab) == CGM_PROBE


def test_crd_group_mismatch_an_operator_started_elsewhere_is_not_a_fix(start, outside):
    lab = start("crd-group-mismatch")
    outside()
    reconciled(lab, "lab-cgm-new")  # the outside operator handles every Tenant; the lab's still watches nothing
    results = runner.check(lab, first_failure=True)
    failing = [c for c in results if not c.passed]
    assert [c.name for c in failing] == [CGM_PROBE]
    assert "not by the lab's operator" in failing[0].message


# -- non-idempotent-create ---------------------------------------------------------------


def test_non_idempotent_create_quota_set_by_hand_is_not_a_fix(start):
    lab = start("non-idempotent-create")
    make_by_hand(lab, "lab-nic-green", "2")
    assert first_failure(lab) == NIC_PROBE


def test_non_idempotent_create_recreating_the_tenant_is_not_a_fix(start):
    lab = start("non-idempotent-create")
    assert probes.delete_tenant(lab, "lab-nic-green")
    eventually(lambda: tenants.namespace_of("lab-nic-green") not in lab.tenants.namespaces(), timeout=60,
               message="the old namespace gone")
    lab.tenants.create("lab-nic-green", "2")
    reconciled(lab, "lab-nic-green")  # a first creation works even in the broken copy
    assert first_failure(lab) == NIC_PROBE


# -- stuck-finalizer ---------------------------------------------------------------------


def test_stuck_finalizer_stripping_the_finalizer_is_not_a_fix(start):
    lab = start("stuck-finalizer")
    lab.custom.patch_cluster_custom_object(*checks.TENANTS, "lab-sf-amber", {"metadata": {"finalizers": None}})
    runner.restart(lab)  # even with the lab's operator back afterwards
    eventually(lambda: "lab-sf-amber" not in lab.tenants.names(), timeout=30, message="the Tenant gone")
    assert first_failure(lab) == SF_CLEANUP


def test_stuck_finalizer_an_operator_started_elsewhere_is_not_a_fix(start, outside):
    lab = start("stuck-finalizer")
    outside()
    eventually(lambda: "lab-sf-amber" not in lab.tenants.names(), timeout=30, message="cleaned up by the other")
    assert failures(lab) == [RUNS, SF_PROBE, SF_CLEANUP]


# -- lab check's note on kopf's backoff ----------------------------------------------------


def test_a_retry_kopf_put_off_is_named_with_its_time_and_how_to_retry_now(start):
    """A Tenant whose namespace someone else made: the operator says NameTaken and kopf retries in 30 s.

    ``runner.kopf_retries`` (what ``lab check`` prints after a failure) names the handler, the
    time and the annotation to remove; removing it makes kopf retry at once, not at that time.
    """
    lab = start("drop-on-resume")
    lab.solve()
    name = probes.probe_name("lab-kopf-backoff")
    namespace = tenants.namespace_of(name)
    lab.track("v1", "Namespace", namespace)
    lab.track("hedronite.io/v1", "Tenant", name)
    lab.core.create_namespace({"metadata": {"name": namespace}})
    lab.tenants.create(name, "1")

    def record() -> kopfstate.HandlerProgress:
        annotations = lab.tenants.get(name)["metadata"].get("annotations") or {}
        waiting = kopfstate.backing_off(annotations, datetime.now(UTC))
        assert len(waiting) == 1, annotations
        return waiting[0]

    first = eventually(record, timeout=30, message="kopf backing off on the NameTaken Tenant")
    assert first.handler == "reconcile" and first.delayed is not None
    notes = [n for n in runner.kopf_retries(lab) if f"of Tenant {name}" in n]
    assert len(notes) == 1, runner.kopf_retries(lab)
    assert f"at {first.delayed:%H:%M:%S} UTC" in notes[0]
    assert notes[0].endswith(f"kubectl annotate tenant {name} {first.annotation}-")

    removed = datetime.now(UTC)
    lab.custom.patch_cluster_custom_object(*checks.TENANTS, name,
                                           {"metadata": {"annotations": {first.annotation: None}}})
    # kopf found no record, so it ran the handler at once: a fresh record, started after the removal.
    again = eventually(lambda: (r := record()).started and r.started > removed and r, timeout=10,
                       message="kopf retried at once")
    assert again.started < first.delayed, (again, first)
    assert json.loads(lab.tenants.get(name)["metadata"]["annotations"][first.annotation])["retries"] >= 1
