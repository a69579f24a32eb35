"""The orphans lab grades behaviour: cleaning up the leftover by hand is not a fix.

tests/labs/test_labs.py proves the protocol (pass after setup, fail after inject, pass after
the reference fix, reset leaves nothing); here, the bypasses.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab import tenants
from operatorlab.labs import Lab
from tests.labs import bypasses

LAB = "orphans"
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB))

RUNS = "the lab's operator is running"
COLLECTED = "a Tenant deleted while its operator is down takes its namespace with it (garbage collection)"


@pytest.fixture(scope="module")
def orphans_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, orphans_cluster, nothing_left) -> Iterator[Lab]:
    yield from bypasses.started(LAB, orphans_cluster, tmp_path, nothing_left)


def test_deleting_the_leftover_by_hand_is_not_a_fix(lab):
    lab.core.delete_namespace(tenants.namespace_of("lab-or-teal"))
    assert bypasses.first_failure(lab) == [COLLECTED]  # the next orphan is one stripped finalizer away


def test_stopping_the_operator_is_not_a_fix(lab):
    lab.core.delete_namespace(tenants.namespace_of("lab-or-teal"))
    lab.operator().stop()
    assert bypasses.first_failure(lab) == [RUNS]
