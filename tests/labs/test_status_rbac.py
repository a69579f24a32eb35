"""The status-rbac lab grades behaviour and least privilege: broader permissions and a status by hand are not a fix.

tests/labs/test_labs.py proves the lab's protocol (pass after setup, fail after inject, pass
after the reference fix, reset leaves nothing); here, the bypasses, each caught by a check that
names it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab import tenants
from operatorlab.cluster import manifests
from operatorlab.labs import Lab, runner
from operatorlab.labs.tenantlab import SYSTEM_NAMESPACE, operator_role
from operatorlab.operators import operator_path
from tests.labs import bypasses

LAB = "status-rbac"
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB))

ROLE, NEW = "lab-status-rbac", "lab-sr-new"
LEAST = f"ServiceAccount {SYSTEM_NAMESPACE}/{ROLE} may do no more than the operator needs"
FOLLOWS = "a new Tenant's status follows its spec (Ready condition, observedGeneration), one handler run per change"


@pytest.fixture(scope="module")
def status_rbac_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, status_rbac_cluster, nothing_left) -> Iterator[Lab]:
    yield from bypasses.started(LAB, status_rbac_cluster, tmp_path, nothing_left)


def test_binding_cluster_admin_is_not_a_fix(lab):
    lab.track("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", f"{ROLE}-admin")
    manifests.apply(lab.api, [{
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{ROLE}-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": ROLE, "namespace": SYSTEM_NAMESPACE}]}])
    assert bypasses.first_failure(lab) == [LEAST]


def test_every_verb_on_tenants_subresources_is_not_a_fix(lab):
    """``tenants/*`` is no pattern RBAC matches (only ``*``, ``tenants/status``, ``*/status``): it grants nothing
    the operator can use, and the check names it as more than the operator needs."""
    role = operator_role(ROLE)
    role["rules"] = [r for r in role["rules"] if "tenants/status" not in r["resources"]]
    role["rules"].append({"apiGroups": [tenants.GROUP], "resources": ["tenants/*"], "verbs": ["*"]})
    manifests.apply(lab.api, [role])
    assert bypasses.first_failure(lab) == [LEAST]


def test_writing_the_status_by_hand_is_not_a_fix(lab):
    tenant = lab.tenants.get(NEW)
    generation = tenant["metadata"]["generation"]
    lab.custom.patch_cluster_custom_object_status(tenants.GROUP, tenants.VERSION, tenants.PLURAL, NEW, {"status": {
        "phase": "Ready", "namespace": tenants.namespace_of(NEW), "cpuQuota": str(tenant["spec"]["cpuQuota"]),
        "observedGeneration": generation,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "by hand",
                        "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    assert lab.tenants.phase(NEW) == "Ready"  # the symptom is gone...
    assert bypasses.first_failure(lab) == [FOLLOWS]  # ...the fault is not: the next Tenant stays without status


def test_an_operator_with_more_rights_beside_it_is_not_a_fix(lab):
    """Another copy run as admin writes the status the lab's operator cannot. Whichever handles a change first
    records it as handled for both (kopf's last-handled configuration is an annotation on the object): if it is
    the copy beside, the lab's operator never runs its handler; if it is the lab's, its status patch is refused,
    and its log says so, or (on a busy machine, before kopf has logged its refused attempt) the Tenant simply
    has no status. The probe fails each way."""
    lab.run_operator(operator_path("tenant"), role="beside")
    failed = [c for c in runner.check(lab, first_failure=True) if not c.passed]
    assert [c.name for c in failed] == [FOLLOWS]
    assert "not through the lab's operator" in failed[0].message or "no status at all" in failed[0].message or (
        "own writes about it failed" in failed[0].message and "tenants/status" in failed[0].message)
