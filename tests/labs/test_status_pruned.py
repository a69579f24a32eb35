"""The status-pruned lab grades what the operator reports: a status by hand, or kopf told to keep its
progress elsewhere, or a schema that only names the fields, is not a fix.

tests/labs/test_labs.py proves the protocol (pass after setup, fail after inject, pass after the
reference fix, reset leaves nothing); here, the bypasses, and what the lab's SOLUTION.md says of
pruning on read.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator

import pytest
from kubernetes import client

from operatorlab import tenants
from operatorlab.faults.variants import PrependToFunction, apply
from operatorlab.labs import Lab, registry, runner
from operatorlab.labs.checks import TENANTS
from operatorlab.operators import operator_path
from operatorlab.wait import eventually
from tests.labs import bypasses

LAB = "status-pruned"
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB))
lab_module = sys.modules[registry.get(LAB).__module__]  # its CRD helpers, as the registry loaded them

OLD, NEW = "lab-sp-old", "lab-sp-new"
FOLLOWS = "a new Tenant's status follows its spec (Ready condition, observedGeneration), one handler run per change"


def reports(name: str) -> str:
    return f"Tenant {name} reports Ready about its current spec (Ready condition, observedGeneration)"


def ready_condition(generation: int) -> dict:
    return {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "by hand",
            "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}


@pytest.fixture(scope="module")
def status_pruned_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, status_pruned_cluster, nothing_left) -> Iterator[Lab]:
    started = bypasses.started(LAB, status_pruned_cluster, tmp_path, nothing_left)
    lab = next(started)
    yield lab
    next(started, None)  # reset
    live = client.ApiextensionsV1Api(lab.api).read_custom_resource_definition(lab_module.CRD)
    assert live.spec.versions[0].schema.open_apiv3_schema.properties["status"].x_kubernetes_preserve_unknown_fields, \
        "reset puts the Tenant CRD back as crds/tenant.yaml has it"


def in_effect(lab: Lab) -> None:
    """Until the API server writes with the CRD's schema as now replaced (it reloads it in a moment)."""
    eventually(lambda: lab_module.keeps_status(lab.api, OLD), timeout=30, message="the new schema in effect")


def test_writing_the_status_by_hand_is_not_a_fix(lab):
    generation = lab.tenants.get(NEW)["metadata"]["generation"]
    lab.custom.patch_cluster_custom_object_status(*TENANTS, NEW, {"status": {
        "observedGeneration": generation, "conditions": [ready_condition(generation)]}})
    assert "conditions" not in lab.tenants.status(NEW)  # pruned like the operator's own write
    assert bypasses.first_failure(lab) == [FOLLOWS]


def test_keeping_kopfs_progress_elsewhere_is_not_a_fix(lab):
    """kopf 1.45.2 keeps its progress in annotations already: telling it so changes nothing that is pruned."""
    copy_path = lab.workdir / "tenant_operator.py"
    lab.remember_file(copy_path)
    copy_path.write_text(apply(operator_path("tenant").read_text(), [PrependToFunction(
        "configure", "settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()\n")]))
    lab.run_operator(copy_path)
    assert bypasses.first_failure(lab) == [FOLLOWS]


def test_naming_the_fields_without_their_contents_is_not_a_fix(lab):
    """``conditions`` declared as an array of objects with no properties: each condition is pruned to ``{}``."""
    crd = copy.deepcopy(lab_module.tidied_crd())
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    status["properties"]["observedGeneration"] = {"type": "integer", "format": "int64"}
    status["properties"]["conditions"] = {"type": "array", "items": {"type": "object"}}
    lab_module.replace_crd(lab.api, crd)
    in_effect(lab)
    written = lab.custom.patch_cluster_custom_object_status(*TENANTS, OLD, {"status": {
        "conditions": [ready_condition(1)]}}, dry_run="All")
    assert written["status"]["conditions"] == [{}]
    assert bypasses.first_failure(lab) == [FOLLOWS]


def test_the_schema_fixed_without_a_restart_leaves_the_lost_report_lost(lab):
    """Pruned on read: lab-sp-old's stored condition comes back with the schema; lab-sp-new's was never stored."""
    lab_module.replace_crd(lab.api, lab_module.shipped_crd())
    in_effect(lab)
    assert [c.name for c in runner.check(lab) if not c.passed] == [reports(NEW)]
    assert tenants.namespace_of(NEW) in lab.tenants.namespaces()


def test_a_handler_that_runs_again_for_nothing_fails_the_probe(lab):
    """The probe's count can fail: the schema fixed, and an operator that stamps its Tenant on every run (the
    hot-loop lab's stamp, a change kopf handles again) reports Ready, yet runs its handler more than once a change."""
    lab_module.replace_crd(lab.api, lab_module.shipped_crd())
    in_effect(lab)
    stamping = sys.modules[registry.get("hot-loop").__module__].STAMPING
    copy_path = lab.workdir / "tenant_operator.py"
    lab.remember_file(copy_path)
    copy_path.write_text(apply(operator_path("tenant").read_text(), [PrependToFunction("reconcile", stamping)]))
    lab.run_operator(copy_path)
    failed = [c for c in runner.check(lab, first_failure=True) if not c.passed]
    assert [c.name for c in failed] == [FOLLOWS]
    assert "runs again for changes already handled" in failed[0].message
