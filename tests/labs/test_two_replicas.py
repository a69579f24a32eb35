"""The two-replicas lab grades behaviour: running one replica, or two that cannot agree, is not a fix.

tests/labs/test_labs.py proves the protocol (pass after setup, fail after inject, pass after
the reference fix, reset leaves nothing); here, the bypasses, each written as a learner would
(edit the replicas' launch files; create the peering object; stop a process).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab.labs import Lab
from tests.labs import bypasses

LAB = "two-replicas"
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB))

RUNNING = "both replicas of the lab's operator are running"
ONE = "a new Tenant is handled by exactly one replica, and the other leaves it alone"
TAKEOVER = "when the working replica is SIGKILLed, the other takes over and handles a new Tenant"
PEERING = "tenant-operator"


@pytest.fixture(scope="module")
def two_replicas_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, two_replicas_cluster, nothing_left) -> Iterator[Lab]:
    yield from bypasses.started(LAB, two_replicas_cluster, tmp_path, nothing_left)


def _launch(lab: Lab, role: str, how: str) -> None:
    """Replace the replica's launch settings (its env file's KOPF_RUN_* lines), keeping the comments."""
    path = lab.env_file(role)
    comments = [line for line in path.read_text().splitlines(keepends=True) if line.startswith("#")]
    path.write_text("".join(comments) + how)


def test_stopping_one_replica_is_not_a_fix(lab):
    """Each Tenant handled once, because only one process runs: the check wants two."""
    lab.operator("replica-b").stop()
    assert bypasses.first_failure(lab) == [RUNNING]


def test_peering_with_equal_priorities_is_not_a_fix(lab):
    """kopf pauses every replica that meets one of its own priority: nothing converges.

    Which check sees it first depends on timing: on a busy machine the first replica may handle the
    probe Tenant before the second one's announcement reaches it, and both pause only afterwards,
    so the take-over fails instead.
    """
    lab.create_peering(PEERING)
    for role in ("replica-a", "replica-b"):
        _launch(lab, role, f"KOPF_RUN_PEERING={PEERING}\n")
    assert bypasses.first_failure(lab) in ([ONE], [TAKEOVER])


def test_peering_only_one_replica_is_not_a_fix(lab):
    """The peered replica works alone in its peering; the standalone one works anyway: both handle every Tenant."""
    lab.create_peering(PEERING)
    _launch(lab, "replica-a", f"KOPF_RUN_PEERING={PEERING}\nKOPF_RUN_PRIORITY=100\n")
    assert bypasses.first_failure(lab) == [ONE]
