"""The controller-manager-down lab grades behaviour: doing the stopped loops' work by hand is not a fix.

tests/labs/test_labs.py proves the lab's protocol. Here: the Deployment's status patched by
hand with Pods made by hand, the namespace finalized by hand, and the wrong components
restarted, each caught by the check's fresh work. On a private cluster (it stops a component).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from operatorlab.faults.components import start_component, stop_component
from operatorlab.labs import registry, runner
from tests.labs.clusters import ON_EXISTING_CLUSTER, cluster_for, xdist_group_of

LAB = registry.get("controller-manager-down")
pytestmark = [pytest.mark.xdist_group(xdist_group_of(LAB)),
              pytest.mark.skipif(ON_EXISTING_CLUSTER, reason="stops a control-plane component: local cluster only")]

ROLLS_OUT = "a new Deployment rolls out and follows a scale"
APP, DOOMED = "lab-kcm-app", "lab-kcm-doomed"


@pytest.fixture
def lab(tmp_path, request, nothing_left) -> Iterator:
    ctx = runner.context(cluster_for(LAB, request), state_dir=tmp_path / "state", workdir_root=tmp_path / "labs")
    lab = runner.create(LAB, ctx)
    try:
        runner.start(lab)
        yield lab
    finally:
        recorded = lab.record
        runner.reset(lab)
        nothing_left(lab, recorded)


def first_failing(lab) -> str | None:
    failed = [c for c in runner.check(lab, first_failure=True) if not c.passed]
    return failed[0].name if failed else None


def test_doing_its_work_by_hand_is_not_a_fix(lab):
    """Pods made by hand, the Deployment's status patched to match, the namespace finalized: the old
    objects look done, and all checks on them pass; the fresh Deployment gets nothing."""
    core, apps = lab.core, client.AppsV1Api(lab.api)
    core.create_namespaced_pod(APP, {"metadata": {"name": "web-by-hand", "labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}})
    d = apps.read_namespaced_deployment("web", APP)
    apps.patch_namespaced_deployment_status("web", APP, {"status": {
        "replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2,
        "observedGeneration": d.metadata.generation}})
    ns = core.read_namespace(DOOMED)
    ns.spec.finalizers = []
    core.replace_namespace_finalize(DOOMED, ns)
    results = runner.check(lab)
    assert [c.name for c in results if not c.passed] == [ROLLS_OUT, "a namespace with content is deleted to the end"]


def test_restarting_the_other_components_is_not_a_fix(lab):
    for component in ("kube-scheduler", "kwok"):
        stop_component(lab.ctx.cluster, component)
        start_component(lab.ctx.cluster, component)
    assert first_failing(lab) == ROLLS_OUT
