"""The course's exercises as a learner meets them: enough per lesson, each starter graded right below it,
and no test plumbing in the cells a learner reads."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from operatorlab import paths
from operatorlab.exercises import discover

NOTEBOOKS = sorted((paths.repo_root() / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def _cells(notebook: Path) -> list[dict]:
    return json.loads(notebook.read_text())["cells"]


def test_every_lesson_from_01_to_07_has_two_exercises_or_more() -> None:
    per_lesson = Counter(cls.lesson for cls in discover().values())
    assert all(per_lesson[f"{n:02d}"] >= 2 for n in range(1, 8)), per_lesson
    assert sum(per_lesson[f"{n:02d}"] for n in range(1, 8)) >= 16, per_lesson


def test_each_starter_cell_is_graded_by_the_cell_after_it() -> None:
    for notebook in NOTEBOOKS:
        cells = _cells(notebook)
        for i, cell in enumerate(cells):
            tags = cell.get("metadata", {}).get("tags", [])
            if "exercise" not in tags:
                continue
            exercise_id = "".join(cell["source"]).split("\n", 1)[0].removeprefix("%%exercise ").strip()
            # The magic prints where it saved the learner's file: a path of this run.
            assert "nbval-ignore-output" in tags, f"{notebook.name}: {exercise_id}"
            after = cells[i + 1]
            assert "check" in after["metadata"].get("tags", []), f"{notebook.name}: no check cell after {exercise_id}"
            assert f'check("{exercise_id}")' in "".join(after["source"]), f"{notebook.name}: {exercise_id}"


def test_no_test_plumbing_in_the_code_a_learner_reads() -> None:
    for notebook in NOTEBOOKS:
        for cell in _cells(notebook):
            assert "NBVAL" not in "".join(cell["source"]), f"{notebook.name}: use the cell tag nbval-ignore-output"
