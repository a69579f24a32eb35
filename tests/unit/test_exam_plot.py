"""The plot of a learner's mock exams, drawn from a history file as ``operatorlab drill exam`` writes it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from operatorlab.labs import exam
from operatorlab.labs.errors import BadState
from operatorlab.widgets import plot_exam_history

Task = exam.Task


def _history(path) -> None:
    """Three exams, oldest first, each written through ``save_result`` as a finished exam is."""
    exams = [
        ([Task("stuck-finalizer", solved=True, seconds=600.0, hints=1), Task("scheduler-down", seconds=780.0),
          Task("user-access")], 1380.0),  # the third never started: scored, not timed
        ([Task("wrong-context", solved=True, seconds=300.0), Task("rollout-stuck", skipped=True, seconds=120.0),
          Task("stuck-finalizer", solved=True, seconds=420.0)], 840.0),
        ([Task("user-access", solved=True, seconds=200.0), Task("scheduler-down", solved=True, seconds=250.0),
          Task("rollout-stuck", solved=True, seconds=330.0)], 780.0),
    ]
    for day, (tasks, used) in enumerate(exams):
        started = 1_790_000_000.0 + day * 86_400
        exam.save_result(exam.result(exam.Exam(tasks=tasks, minutes=30, started=started), now=started + used), path)


def test_each_exam_is_drawn_in_order_with_its_score_time_and_drills(tmp_path):
    path = tmp_path / "history.json"
    _history(path)
    fig = plot_exam_history(path=path)
    try:
        assert fig is not None
        score, time, drills = fig.axes
        assert [round(b.get_height()) for b in score.patches] == [33, 67, 100]  # share solved, oldest first
        assert [t.get_text() for t in score.texts] == ["1 of 3 solved", "2 of 3 solved", "3 of 3 solved"]
        budget, used = time.patches[:3], time.patches[3:]
        assert [b.get_height() for b in budget] == [30, 30, 30]
        assert [b.get_height() for b in used] == [23, 14, 13]  # minutes
        assert [t.get_text() for t in time.texts] == ["23:00", "14:00", "13:00"]
        points = [(line.get_xdata()[0], line.get_ydata()[0], line.get_marker()) for line in drills.lines]
        assert len(points) == 8  # every drill that was started; the one never started has no time
        assert [m for *_, m in points].count("X") == 2  # not solved: out of time, skipped
        assert sorted(round(y) for _, y, _ in points) == [2, 3, 4, 5, 6, 7, 10, 13]
        assert [round(x) for x, _, _ in points] == [1, 1, 2, 2, 2, 3, 3, 3]
        legend = [t.get_text() for t in drills.get_legend().get_texts()]
        assert legend[:2] == ["solved in time", "not solved"]
        assert legend[2:] == ["rollout-stuck", "scheduler-down", "stuck-finalizer", "user-access", "wrong-context"]
        ticks = [t.get_text() for t in drills.get_xticklabels()]
        assert ticks == [r.finished[:16].replace("T", "\n") for r in exam.load_history(path)]
        assert score.get_ylabel() and time.get_ylabel() == drills.get_ylabel() == "minutes"
        assert all(ax.get_title() for ax in fig.axes) and "3 taken" in fig.get_suptitle()
        fig.savefig(tmp_path / "exams.png")  # it renders
    finally:
        plt.close(fig)


def test_results_can_be_passed_instead_of_a_file(tmp_path):
    path = tmp_path / "history.json"
    _history(path)
    fig = plot_exam_history(exam.load_history(path)[-1:])
    try:
        assert fig is not None and len(fig.axes[2].lines) == 3
    finally:
        plt.close(fig)


def test_no_history_says_how_to_take_an_exam_instead_of_an_empty_plot(tmp_path, capsys):
    figures = plt.get_fignums()
    assert plot_exam_history(path=tmp_path / "none.json") is None
    assert capsys.readouterr().out.strip() == exam.NO_HISTORY
    assert "operatorlab drill exam --minutes 30 --count 3" in exam.NO_HISTORY
    assert plt.get_fignums() == figures  # no empty figure left behind


def test_a_history_of_another_format_is_refused_with_its_path(tmp_path):
    path = tmp_path / "history.json"
    path.write_text('{"version": 99, "exams": []}')
    with pytest.raises(BadState, match=str(path)):
        plot_exam_history(path=path)
