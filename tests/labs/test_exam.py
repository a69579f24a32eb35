"""``operatorlab drill exam`` on the real cluster: a drill repaired in time is scored solved, the
exam ends when no drill is left or the time is spent, and each result joins the history."""

from __future__ import annotations

import pytest

from operatorlab.cluster import current
from operatorlab.labs import exam, runner

# One drill of the cluster's own, run as its tests run it (never two at once on one cluster).
DRILL = "service-no-endpoints"
pytestmark = pytest.mark.xdist_group(f"drill-{DRILL}")


@pytest.fixture
def ctx(tmp_path):
    return runner.context(current(), state_dir=tmp_path / "state", workdir_root=tmp_path / "labs")


def test_a_drill_repaired_in_time_is_solved_and_the_exam_ends_with_it(ctx, tmp_path):
    history = tmp_path / "history.json"
    _, lab = exam.start(ctx, minutes=10, count=1, drills=[DRILL])
    assert runner.drill_current(ctx).lab == DRILL  # the drill is on: drill hint and drill check work
    assert not exam.grade(ctx, history=history).task.solved  # graded before any repair: not yet
    # Repaired by hand, as a learner would (the reference repair, `lab solve`, would not be scored).
    lab.core.patch_namespaced_service("web", "lab-svc", {"spec": {"selector": {"app": "web"}}})
    grading = exam.grade(ctx, history=history)
    assert grading.task.solved and grading.result is not None
    assert exam.current(ctx) is None and not lab.state.exists  # the exam is over, the drill reset
    assert [(r.solved, r.count) for r in exam.load_history(history)] == [(1, 1)]


def test_when_the_time_is_spent_the_next_grading_ends_the_exam(ctx, tmp_path):
    history = tmp_path / "history.json"
    _, lab = exam.start(ctx, minutes=0.001, count=1, drills=[DRILL])
    grading = exam.grade(ctx, history=history)
    assert grading.result is not None and (grading.result.solved, grading.result.count) == (0, 1)
    assert not lab.state.exists and runner.drill_current(ctx) is None
    assert "service-no-endpoints -" in exam.load_history(history)[0].line()
