"""How the runner reads an exercise's properties: in order, stopping at the first failure when asked,
always letting the check undo what it made, and keeping what was graded before the learner's code raised.

The check here grades a plain function and touches no cluster: what is under test is the runner.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from operatorlab.exercises.base import Exercise
from operatorlab.exercises.runner import _run
from operatorlab.grading import Check


class Doubling(Exercise):
    id = "00-doubling"
    subject = "double"

    def __init__(self) -> None:
        super().__init__(None)
        self.graded: list[int] = []
        self.cleaned_up = False

    def check(self, learner: ModuleType) -> Iterator[Check]:
        try:
            for n in (1, 2, 3):
                self.graded.append(n)
                yield Check(f"double({n})", learner.double(n) == 2 * n)
        finally:
            self.cleaned_up = True


def _learner(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "00-doubling.py"
    path.write_text(f"def double(n):\n    {body}\n")
    return path


def test_every_property_is_graded_by_default(tmp_path: Path) -> None:
    exercise = Doubling()
    checks = _run(exercise, _learner(tmp_path, "return 2 if n == 1 else n"), first_failure=False)
    assert [c.passed for c in checks] == [True, False, False]
    assert exercise.graded == [1, 2, 3] and exercise.cleaned_up


def test_first_failure_ends_the_grading_and_the_check_still_cleans_up(tmp_path: Path) -> None:
    exercise = Doubling()
    checks = _run(exercise, _learner(tmp_path, "return 2 if n == 1 else n"), first_failure=True)
    assert [(c.name, c.passed) for c in checks] == [("double(1)", True), ("double(2)", False)]
    assert exercise.graded == [1, 2], "the third property was not run"
    assert exercise.cleaned_up, "closing the check ran its finally"


def test_a_raising_learner_keeps_what_was_graded_before_it(tmp_path: Path) -> None:
    exercise = Doubling()
    checks = _run(exercise, _learner(tmp_path, "return 2 if n == 1 else 1 // 0"), first_failure=False)
    assert [c.name for c in checks] == [
        "your code loads (00-doubling.py defines double)", "double(1)", "your code runs without raising"]
    assert "ZeroDivisionError" in checks[-1].message and "line 2" in checks[-1].message
    assert exercise.cleaned_up


def test_the_starter_is_named_as_such(tmp_path: Path) -> None:
    checks = _run(Doubling(), _learner(tmp_path, "raise NotImplementedError('double n')"), first_failure=True)
    assert (checks[-1].name, checks[-1].passed) == ("your code runs", False)
    assert checks[-1].message == "still the starter: double n"
