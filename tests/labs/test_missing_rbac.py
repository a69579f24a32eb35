"""The missing-rbac lab grades behaviour and least privilege: broader permissions are not a fix.

tests/labs/test_labs.py proves the lab's protocol (pass after setup, fail after inject, pass
after the reference fix). Here: the ways to make the 403 go away without granting exactly the
missing verb, each caught by a check that names it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab import rbac, tenants
from operatorlab.cluster import manifests
from operatorlab.labs import registry, runner
from operatorlab.labs.least_privilege import beyond
from tests.labs import bypasses

LAB = registry.get("missing-rbac")
# A cluster of the module's own, in an xdist group of its own (see tests/labs/bypasses.py).
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB.id))

LEAST = "ServiceAccount operatorlab-system/lab-missing-rbac may do no more than the operator needs"
CONVERGES = "a new Tenant converges (created, changed, deleted)"
SHIPPED = [{"apiGroups": ["hedronite.io"], "resources": ["tenants"], "verbs": ["list", "watch", "patch"]},
           {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get", "create", "patch"]}]


def test_beyond_names_what_the_reference_does_not_grant():
    """The pure comparison: wildcards are covered only by wildcards; everyone's self-reviews are allowed."""
    assert beyond(SHIPPED, SHIPPED) == []
    assert beyond([{"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get"],
                    "resourceNames": ["tenant-quota"]}], SHIPPED) == []
    assert beyond([{"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"],
                    "verbs": ["create"]}], SHIPPED) == []
    assert [str(p) for p in beyond([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], SHIPPED)] \
        == ["* * (* group)"]
    assert [str(p) for p in beyond([{"apiGroups": [""], "resources": ["resourcequotas", "secrets"],
                                     "verbs": ["get", "delete"]}], SHIPPED)] \
        == ["delete resourcequotas (core group)", "delete secrets (core group)", "get secrets (core group)"]


@pytest.fixture(scope="module")
def lab_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB.id, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, lab_cluster, nothing_left) -> Iterator:
    yield from bypasses.started(LAB.id, lab_cluster, tmp_path, nothing_left)


def first_failing(lab) -> str | None:
    failed = [c for c in runner.check(lab, first_failure=True) if not c.passed]
    return failed[0].name if failed else None


def _binding(lab, name: str, role: str) -> None:
    lab.track("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", name)
    manifests.apply(lab.api, [{
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "lab-missing-rbac", "namespace": "operatorlab-system"}]}])


def _role_with(lab, rules: list[dict]) -> None:
    """The lab's ClusterRole (as rbac.operator_rbac names it for the lab) with these rules instead."""
    role = next(o for o in rbac.operator_rbac("tenant", name="lab-missing-rbac") if o["kind"] == "ClusterRole")
    manifests.apply(lab.api, [{**role, "rules": rules}])


def test_binding_cluster_admin_is_not_a_fix(lab):
    _binding(lab, "lab-missing-rbac-admin", "cluster-admin")
    assert first_failing(lab) == LEAST


def test_a_wildcard_role_is_not_a_fix(lab):
    _role_with(lab, [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}])
    assert first_failing(lab) == LEAST


def test_the_missing_verb_plus_a_dangerous_one_is_not_a_fix(lab):
    runner.solve(lab)  # the missing verb back...
    _binding(lab, "lab-missing-rbac-secrets", "lab-missing-rbac-secrets")  # ...and delete on secrets beside it
    lab.track("rbac.authorization.k8s.io/v1", "ClusterRole", "lab-missing-rbac-secrets")
    manifests.apply(lab.api, [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                               "metadata": {"name": "lab-missing-rbac-secrets"},
                               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["delete"]}]}])
    lab.wait_reconciled("lab-rbac-new")  # the operator's next retry, within 10 s
    checks = runner.check(lab)
    assert [c.name for c in checks if not c.passed] == [LEAST]
    assert "delete secrets" in next(c.message for c in checks if c.name == LEAST)


def test_making_the_quota_by_hand_is_not_a_fix(lab):
    namespace = tenants.namespace_of("lab-rbac-new")
    lab.core.create_namespaced_resource_quota(namespace, {
        "metadata": {"name": tenants.QUOTA_NAME, "labels": {tenants.TENANT_LABEL: "lab-rbac-new"}},
        "spec": {"hard": {"requests.cpu": "1", "limits.cpu": "1"}}})
    assert first_failing(lab) == CONVERGES  # the fresh probe Tenant gets no quota either
