"""Grade the learner's file, and say so in words: for notebooks (``check``) and the CLI alike.

:func:`grade` never raises: a starter left in place, a syntax error, a missing name
or an exception from the learner's code each become a failing property with its
evidence, so a notebook stored with its starters still runs top to bottom (nbval).
"""

from __future__ import annotations
import __future__

import html
import sys
import time
import traceback
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from operatorlab import progress
from operatorlab.exercises import registry
from operatorlab.exercises.base import Exercise
from operatorlab.grading import Check, word_html


@dataclass
class Verdict:
    """One grading: the properties, the next hint, and how many attempts it took.

    ``exercise`` is None for a grading that is no exercise (``operatorlab verify`` of any
    operator): ``name`` then says what was graded, and there are no hints.
    """

    exercise: type[Exercise] | None
    checks: list[Check]
    seconds: float
    hint: str | None = None
    hint_number: int = 0
    attempts: int = 0
    notes: list[str] = field(default_factory=list)
    name: str = ""

    @property
    def label(self) -> str:
        return self.exercise.id if self.exercise else self.name

    @property
    def hint_count(self) -> int:
        return len(self.exercise.hints) if self.exercise else 0

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def summary(self) -> str:
        passing = sum(c.passed for c in self.checks)
        return f"{passing} of {len(self.checks)} properties hold, graded in {self.seconds:.1f} s"

    def headline(self) -> str:
        return f"{self.label}: {'PASS' if self.passed else 'FAIL'} ({self.summary()})"

    def text(self) -> str:
        """Plain text: every verdict is a word, so no colour or emoji font is needed."""
        lines = [self.headline()]
        for c in self.checks:
            lines.append(f"  {'PASS' if c.passed else 'FAIL'}  {c.name}")
            if c.message:
                lines.extend(f"        {line}" for line in c.message.splitlines())
        if self.hint:
            lines.append(f"  next hint ({self.hint_number}/{self.hint_count}): {self.hint}")
        lines.extend(f"  {note}" for note in self.notes)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The same words in a notebook, with colour as a courtesy."""
        rows = "".join(
            f"<tr><td style='vertical-align:top;padding-right:1em'>{word_html(c.passed)}</td>"
            f"<td style='text-align:left'>{html.escape(c.name)}"
            + (f"<br><span style='opacity:.75'>{html.escape(c.message)}</span>" if c.message else "")
            + "</td></tr>" for c in self.checks)
        hint = (f"<p><b>Next hint ({self.hint_number}/{self.hint_count}):</b> {html.escape(self.hint)}</p>"
                if self.hint else "")
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return (f"<div class='operatorlab-verdict'><p>{word_html(self.passed)} <b>{html.escape(self.label)}</b> "
                f"({html.escape(self.summary())})</p><table>{rows}</table>{hint}{notes}</div>")

    def __repr__(self) -> str:
        return self.text()


def load_learner(path: Path) -> ModuleType:
    """The learner's file as a fresh module (edited files are read again on every check).

    Annotations are not evaluated (PEP 563, as ``from __future__ import annotations``):
    a function meant to live in a worked example's module may name that module's types.
    """
    name = f"operatorlab_work_{path.stem.replace('-', '_')}"
    module = ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    code = compile(path.read_text(), str(path), "exec", flags=__future__.annotations.compiler_flag,
                   dont_inherit=True)
    exec(code, module.__dict__)  # running the learner's own code is the point
    return module


def _where_in(path: Path, error: BaseException) -> str:
    """The learner's own lines in a traceback (the grader's are noise to them)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    where = f" at line {frames[-1].lineno}: {frames[-1].line}" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def grade(exercise_id: str, *, path: Path | None = None, kubeconfig: Path | None = None,
          record: bool = True, first_failure: bool = False) -> Verdict:
    """Check the learner's file for ``exercise_id`` (default ``notebooks/work/<id>.py``).

    With ``first_failure`` the grading ends at the first property that fails (the
    properties after it are not run): enough to know the code is not right yet.
    """
    cls = registry.get(exercise_id)
    exercise = cls(kubeconfig)
    path = path or exercise.work_path()
    started = time.monotonic()
    checks = _run(exercise, path, first_failure=first_failure)
    verdict = Verdict(cls, checks, time.monotonic() - started)
    if record:
        item = progress.attempted("exercise", cls.id, verdict.passed)
        verdict.attempts = item.attempts
    if not verdict.passed:
        failures = verdict.attempts if record else 1
        verdict.hint_number = max(1, min(failures, len(cls.hints)))
        verdict.hint = cls.hints[verdict.hint_number - 1]
        if verdict.hint_number == len(cls.hints):
            verdict.notes.append(f"the reference solution: operatorlab exercise solution {cls.id}")
    return verdict


def _run(exercise: Exercise, path: Path, *, first_failure: bool) -> list[Check]:
    loads = f"your code loads ({path.name} defines {exercise.subject})"
    if not path.is_file():
        return [Check(loads, False, f"no {path}: {exercise.missing()}")]
    try:
        learner = load_learner(path)
    except Exception as e:  # noqa: BLE001 - any error in the learner's file is the learner's to see
        return [Check(loads, False, _where_in(path, e))]
    if not hasattr(learner, exercise.subject):
        return [Check(loads, False, f"{path.name} defines no {exercise.subject}")]
    checks: list[Check] = []
    properties = exercise.check(learner)
    try:
        for check in properties:
            checks.append(check)
            if first_failure and not check.passed:
                break
    except NotImplementedError as e:
        return [Check(loads, True), *checks,
                Check("your code runs", False, f"still the starter: {e or 'NotImplementedError'}")]
    except Exception as e:  # noqa: BLE001 - the learner's code raised, or the world did: both are evidence
        return [Check(loads, True), *checks, Check("your code runs without raising", False, _where_in(path, e))]
    finally:
        if isinstance(properties, Generator):
            properties.close()  # a check stopped early undoes what it made (its own finally)
        exercise.reset()
    return checks


def hint(exercise_id: str, number: int | None = None) -> str:
    """Hint ``number`` (1-based; default the next after the attempts so far)."""
    cls = registry.get(exercise_id)
    if number is None:
        number = progress.load().item("exercise", cls.id).attempts or 1
    number = max(1, min(number, len(cls.hints)))
    if number == len(cls.hints):
        progress.solution_shown("exercise", cls.id)
    return f"hint {number}/{len(cls.hints)}: {cls.hints[number - 1]}"


def solution(exercise_id: str) -> str:
    """The reference solution's source (recorded: a pass after it says so)."""
    cls = registry.get(exercise_id)
    progress.solution_shown("exercise", cls.id)
    return cls(None).solution_source()


def scaffold(exercise_id: str) -> str:
    """Copy an exercise's starter files (the capstone's) into the work folder, never over the learner's own."""
    folder = registry.get(exercise_id)(None).scaffold()
    if folder is None:
        return f"{exercise_id} has no scaffold: its starter is a cell of its lesson"
    files = ", ".join(sorted(p.name for p in folder.iterdir() if p.is_file()))
    return f"your files are in {folder}: {files}"
