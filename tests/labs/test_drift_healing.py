"""The drift-healing lab grades behaviour: the check deletes a policy itself and counts requests.

tests/labs/test_labs.py proves the lab's protocol. Here: a policy put back by hand, and a
resync so fast that it heals at once while hammering the API server, each caught by a check.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from operatorlab.labs import registry, runner
from tests.labs.clusters import cluster_for, xdist_group_of

LAB = registry.get("drift-healing")
pytestmark = pytest.mark.xdist_group(xdist_group_of(LAB))

QUIET = "the operator reconciles at most every 4 s while nothing changes"
HEALS = "a baseline policy deleted by someone comes back within 30 s"


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


def _resync(lab, seconds: str) -> None:
    lines = [line for line in lab.env_file.read_text().splitlines() if not line.startswith("NSB_RESYNC_SECONDS")]
    lab.env_file.write_text("\n".join([*lines, f"NSB_RESYNC_SECONDS={seconds}"]) + "\n")


def test_putting_the_policy_back_by_hand_is_not_a_fix(lab):
    client.NetworkingV1Api(lab.api).create_namespaced_network_policy("lab-drift-app", {
        "metadata": {"name": "baseline-default-deny", "labels": {
            "app.kubernetes.io/managed-by": "namespacebaseline-operator",
            "hedronite.io/namespacebaseline": "lab-drift"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}})
    assert first_failing(lab) == HEALS  # the probe's own deletion stays


def test_an_absurdly_fast_resync_is_not_a_fix(lab):
    _resync(lab, "0.01")  # heals at once, and lists every namespace a hundred times a second
    failed = [c for c in runner.check(lab, first_failure=True) if not c.passed]
    assert [c.name for c in failed] == [QUIET]
    print(failed[0].message)
