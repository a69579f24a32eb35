"""What a mock exam decides, without a cluster: which drills, time left, the score, the history."""

from __future__ import annotations

import random

import pytest

from operatorlab.labs import exam
from operatorlab.labs.errors import BadState


def test_choose_picks_different_drills_and_refuses_more_than_there_are():
    picked = exam.choose(["a", "b", "c", "d"], 3, random.Random(7))
    assert len(set(picked)) == 3 and set(picked) <= {"a", "b", "c", "d"}
    with pytest.raises(ValueError, match="offers 2: a, b"):
        exam.choose(["a", "b"], 3)
    with pytest.raises(ValueError):
        exam.choose(["a"], 0)


def test_the_clock_and_the_drill_in_front_of_the_learner():
    e = exam.Exam(tasks=[exam.Task("a"), exam.Task("b")], minutes=10, started=1000.0)
    assert e.remaining(now=1000.0 + 60) == 540 and e.remaining(now=1000.0 + 601) == 0
    assert e.current().lab == "a"
    e.tasks[0].solved, e.tasks[0].seconds = True, 30.0
    assert e.current().lab == "b"
    e.tasks[1].skipped, e.tasks[1].seconds = True, 5.0
    assert e.current() is None and e.score() == (1, 2)


def test_a_result_counts_time_up_to_the_deadline_and_says_each_drill_in_words():
    e = exam.Exam(tasks=[exam.Task("a", solved=True, seconds=192.0, hints=1), exam.Task("b", skipped=True, seconds=9),
                         exam.Task("c", seconds=60.0), exam.Task("d", solution_shown=True, seconds=8.0)],
                  minutes=5, started=0.0)
    r = exam.result(e, now=10_000.0)  # graded long after the deadline: the exam used its 5 minutes, no more
    assert (r.solved, r.count, r.used_seconds) == (1, 4, 300.0)
    assert r.line().endswith("1/4 solved (25%) in 5:00 of 5 min: a (3:12, 1 hint), b - (skipped), c -, "
                             "d - (solution shown)")


def test_time_spent_breaking_and_resetting_drills_is_not_the_learners():
    e = exam.Exam(tasks=[exam.Task("a")], minutes=1, started=0.0, setup_seconds=20.0)
    assert e.remaining(now=70.0) == 10.0  # 60 s of budget + 20 s of setup, 70 s after the start
    assert exam.result(e, now=50.0).used_seconds == 30.0


def test_the_history_keeps_every_exam_and_refuses_another_format(tmp_path):
    path = tmp_path / "history.json"
    assert exam.load_history(path) == []
    first = exam.result(exam.Exam(tasks=[exam.Task("a", solved=True, seconds=1.0)], minutes=1, started=0.0), now=30.0)
    exam.save_result(first, path)
    exam.save_result(first, path)
    assert [r.solved for r in exam.load_history(path)] == [1, 1]
    path.write_text('{"version": 99, "exams": []}')
    with pytest.raises(BadState, match="format 99"):
        exam.load_history(path)


def test_the_history_command_prints_one_line_per_exam(tmp_path):
    import os
    import subprocess
    import sys

    path = tmp_path / "history.json"
    env = {**os.environ, "OPERATORLAB_EXAM_HISTORY": str(path)}
    command = [sys.executable, "-m", "operatorlab.cli", "drill", "exam", "--history"]
    exam.save_result(exam.result(exam.Exam(tasks=[exam.Task("a", solved=True, seconds=75.0)], minutes=2,
                                           started=0.0), now=100.0), path)
    listed = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=True)
    assert listed.stdout.strip().endswith("1/1 solved (100%) in 1:40 of 2 min: a (1:15)")
