"""The hot-loop lab grades behaviour: what stops the symptom without fixing the operator fails a check.

tests/labs/test_labs.py proves the protocol (pass after setup, fail after inject, pass after
the reference fix, reset leaves nothing); here, the bypasses.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab.faults.variants import DropDecorator, PrependToFunction, apply
from operatorlab.labs import Lab
from tests.labs import bypasses

LAB = "hot-loop"
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB))

RUNS = "the lab's operator is running"
QUIET = "a converged Tenant is left alone (at most 1 write in 6 s)"
LIFE = "a new Tenant still converges (created, changed, deleted)"


@pytest.fixture(scope="module")
def hot_loop_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, hot_loop_cluster, nothing_left) -> Iterator[Lab]:
    yield from bypasses.started(LAB, hot_loop_cluster, tmp_path, nothing_left)


def test_stopping_the_operator_is_not_a_fix(lab):
    lab.operator().stop()
    assert bypasses.first_failure(lab) == [RUNS]


def test_dropping_on_update_stops_the_loop_but_not_the_fault(lab):
    """Without on.update the stamp no longer re-triggers anything, and neither does a spec change."""
    lab.learner_copy.write_text(apply(lab.learner_copy.read_text(), [DropDecorator("reconcile", "kopf.on.update")]))
    assert bypasses.first_failure(lab) == [LIFE]


def test_a_label_instead_of_an_annotation_still_loops(lab):
    """kopf compares labels as it compares annotations: the stamp moved there loops the same."""
    stamp_label = ('patch.metadata.labels["hedronite.io/last-reconciled"] = '
                   'datetime.now(UTC).strftime("%H%M%S%f")\n')
    lab.learner_copy.write_text(lab.header() + apply(lab.original(), [PrependToFunction("reconcile", stamp_label)]))
    assert bypasses.first_failure(lab) == [QUIET]
