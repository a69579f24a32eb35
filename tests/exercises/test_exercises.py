"""Every exercise on the real cluster: its starter (as the notebook stores it) fails with words a
learner can act on, its reference solution passes, and the mistakes a learner makes each fail.

The mistakes are named per exercise in ``MISTAKES``: each is the reference solution with one
edit (a textual replacement), so what fails is exactly that edit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from operatorlab import paths
from operatorlab.exercises import discover, grade

EXERCISES = discover()

# exercise id -> {mistake: (text in the solution, replacement)}
MISTAKES: dict[str, dict[str, tuple[str, str]]] = {
    "03-process-next-work-item": {
        "never done": ("        queue.done(key)", "        pass"),
        "retried at once, not rate limited": ("queue.add_rate_limited(key)", "queue.add(key)"),
        "backoff never forgotten": ("        queue.forget(key)", "        pass"),
        "a failure dropped, not retried": ("queue.add_rate_limited(key)", "pass"),
        "keeps going after shutdown": ("return False  #", "return True  #"),
    },
}


def starter_of(exercise_id: str) -> str:
    """The starter cell of the exercise, from its lesson's notebook (tagged ``exercise``)."""
    lesson = EXERCISES[exercise_id].lesson
    notebook = next((paths.repo_root() / "notebooks").glob(f"{lesson}-*.ipynb"))
    for cell in json.loads(notebook.read_text())["cells"]:
        source = "".join(cell["source"])
        if "exercise" in cell.get("metadata", {}).get("tags", []) and source.startswith(f"%%exercise {exercise_id}\n"):
            return source.split("\n", 1)[1]  # without the magic's line
    raise AssertionError(f"{notebook.name} has no cell tagged 'exercise' starting %%exercise {exercise_id}")


def _param(exercise_id: str, *rest: str) -> pytest.param:
    group = EXERCISES[exercise_id].xdist_group
    return pytest.param(exercise_id, *rest, id="-".join((exercise_id, *rest)),
                        marks=[pytest.mark.xdist_group(group)] if group else [])


@pytest.mark.parametrize("exercise_id", [_param(i) for i in EXERCISES])
def test_the_starter_fails_and_says_why(exercise_id: str, tmp_path: Path) -> None:
    learner = tmp_path / f"{exercise_id}.py"
    learner.write_text(starter_of(exercise_id))
    verdict = grade(exercise_id, path=learner, record=False)
    assert not verdict.passed, verdict.text()
    failing = [c for c in verdict.checks if not c.passed]
    assert failing and all(c.message for c in failing), verdict.text()
    assert verdict.hint == EXERCISES[exercise_id].hints[0], "the first failure shows the vaguest hint"
    assert verdict.seconds < 15, f"a starter fails fast, not after a budget: {verdict.seconds:.1f} s"


@pytest.mark.parametrize("exercise_id", [_param(i) for i in EXERCISES])
def test_the_reference_solution_passes(exercise_id: str) -> None:
    verdict = grade(exercise_id, path=paths.repo_root() / "exercises" / exercise_id / "solution.py", record=False)
    assert verdict.passed, verdict.text()
    assert len(verdict.checks) >= 3, "an exercise grades several properties"


@pytest.mark.parametrize(("exercise_id", "mistake"), [_param(i, m) for i, ms in MISTAKES.items() for m in ms])
def test_each_mistake_fails(exercise_id: str, mistake: str, tmp_path: Path) -> None:
    old, new = MISTAKES[exercise_id][mistake]
    solution = (paths.repo_root() / "exercises" / exercise_id / "solution.py").read_text()
    assert solution.count(old) == 1, f"{old!r} must occur once in the solution"
    learner = tmp_path / f"{exercise_id}.py"
    learner.write_text(solution.replace(old, new))
    verdict = grade(exercise_id, path=learner, record=False)
    assert not verdict.passed, f"{mistake}: passed\n{verdict.text()}"


def test_every_exercise_has_mistakes_and_a_starter() -> None:
    assert set(MISTAKES) == set(EXERCISES)
    assert all(len(m) >= 2 for m in MISTAKES.values())
    for exercise_id in EXERCISES:
        assert re.search(r"raise NotImplementedError|\.\.\.", starter_of(exercise_id))
