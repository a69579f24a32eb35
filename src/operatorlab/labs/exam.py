"""A mock exam: drills back to back under one time budget, and a local history of the scores.

``operatorlab drill exam`` starts one (``--minutes``, ``--count``: drills picked at random among
those this cluster can run), and each later ``operatorlab drill exam`` grades the drill in front
of the learner: passed, it is scored and reset and the next one starts; not yet, the learner
keeps working. When the budget runs out, the next grading ends the exam (the drill in front
of the learner is graded one last time: work done in time counts). ``--skip`` leaves a drill
unsolved and moves on, ``--stop`` ends the exam early, ``--history`` shows the past scores.

As in the CKA, what counts is the share of tasks solved within the time; hints are allowed
and counted. The running exam is a record beside the running drill's (``<state dir>/exam.json``,
one per cluster); the history is the learner's own (``<cache>/exam-history.json``, or
``$OPERATORLAB_EXAM_HISTORY``), never sent anywhere, like :mod:`operatorlab.progress`.

What an exam decides (which drills, time left, the score, the history's lines) is pure and
unit-tested; what it does to the cluster goes through :mod:`~operatorlab.labs.runner`.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from operatorlab import paths
from operatorlab.labs import registry, runner
from operatorlab.labs.base import Check, Lab, LabContext
from operatorlab.labs.errors import BadState, LabNotStarted
from operatorlab.labs.state import read_json, write_json

#: The history's format; a reader refuses another.
VERSION = 1

#: What the history says before the first exam (``--history``, the notebook's plot): how to take one.
NO_HISTORY = "No exam taken yet. Take one in a terminal: operatorlab drill exam --minutes 30 --count 3"


@dataclass
class Task:
    """One drill of an exam: whether it was solved, when, with how many hints."""

    lab: str
    started: float | None = None
    solved: bool = False
    seconds: float | None = None  # from its start to the check that passed
    hints: int = 0
    skipped: bool = False
    solution_shown: bool = False  # the reference repair was applied (operatorlab lab solve): not scored


    @property
    def done(self) -> bool:
        return self.solved or self.skipped or self.seconds is not None


@dataclass
class Exam:
    """A running (or finished) exam: its drills in order, the clock, the outcome of each."""

    tasks: list[Task]
    minutes: float
    started: float = field(default_factory=time.time)
    finished: float | None = None
    #: Seconds spent breaking and resetting the cluster between drills: not the learner's time.
    setup_seconds: float = 0.0

    @property
    def deadline(self) -> float:
        return self.started + self.minutes * 60 + self.setup_seconds

    def remaining(self, now: float | None = None) -> float:
        """Seconds left (0 once the budget is spent)."""
        return max(0.0, self.deadline - (time.time() if now is None else now))

    def current(self) -> Task | None:
        """The first drill not done yet, or None: every drill is done."""
        return next((t for t in self.tasks if not t.done), None)

    def score(self) -> tuple[int, int]:
        """``(solved, count)``."""
        return sum(t.solved for t in self.tasks), len(self.tasks)


@dataclass
class Result:
    """One finished exam as the history keeps it."""

    finished: str  # RFC 3339
    minutes: float
    used_seconds: float
    solved: int
    count: int
    tasks: list[Task]

    def line(self) -> str:
        """In words: ``2026-12-02 14:05  2/3 solved (67%) in 24:10 of 30 min: a (3:12), b (12:40, 1 hint), c -``."""
        minutes, seconds = divmod(int(self.used_seconds), 60)
        percent = round(100 * self.solved / self.count) if self.count else 0
        return (f"{self.finished[:16].replace('T', ' ')}  {self.solved}/{self.count} solved ({percent}%) in "
                f"{minutes}:{seconds:02d} of {self.minutes:g} min: " + ", ".join(_task_words(t) for t in self.tasks))


def _task_words(task: Task) -> str:
    if not task.solved:
        return f"{task.lab} -" + (" (skipped)" if task.skipped else " (solution shown)" if task.solution_shown else "")
    minutes, seconds = divmod(int(task.seconds or 0), 60)
    hints = f", {task.hints} hint{'s' if task.hints != 1 else ''}" if task.hints else ""
    return f"{task.lab} ({minutes}:{seconds:02d}{hints})"


# -- pure decisions ---------------------------------------------------------------------------------


def choose(available: list[str], count: int, rng: random.Random | None = None) -> list[str]:
    """``count`` different drills among ``available``, in random order.

    Raises:
        ValueError: fewer drills than ``count`` (or none) are available.
    """
    if count < 1 or count > len(available):
        raise ValueError(f"an exam of {count} drill(s) needs as many different ones; this cluster offers "
                         f"{len(available)}: {', '.join(available) or 'none'}")
    return (rng or random.Random()).sample(sorted(available), count)


def result(exam: Exam, now: float | None = None) -> Result:
    """The exam as the history keeps it, finished at ``now``."""
    end = time.time() if now is None else now
    solved, count = exam.score()
    return Result(finished=datetime.fromtimestamp(end, UTC).isoformat(timespec="seconds"), minutes=exam.minutes,
                  used_seconds=round(min(end, exam.deadline) - exam.started - exam.setup_seconds, 1),
                  solved=solved, count=count,
                  tasks=exam.tasks)


# -- the running exam, beside the running drill ---------------------------------------------------


def exam_file(ctx: LabContext) -> Path:
    return ctx.state_dir / "exam.json"


def current(ctx: LabContext) -> Exam | None:
    """The exam running on ``ctx``'s cluster, if any.

    Raises:
        BadState: its file is not an exam record of this version.
    """
    path = exam_file(ctx)
    data = read_json(path, "exam record")
    if data is None:
        return None
    try:
        return Exam(**{**data, "tasks": [Task(**t) for t in data["tasks"]]})
    except (TypeError, KeyError) as e:
        raise BadState(f"exam record {path} is not one this version reads ({e}): rm {path}") from e


def _save(ctx: LabContext, exam: Exam) -> None:
    write_json(exam_file(ctx), asdict(exam))


def available(ctx: LabContext) -> list[str]:
    """The drills this cluster can run."""
    return [i for i, cls in registry.drills().items() if runner.unavailable(cls, ctx) is None]


def start(ctx: LabContext, *, minutes: float, count: int, drills: list[str] | None = None,
          rng: random.Random | None = None) -> tuple[Exam, Lab]:
    """Begin an exam (``drills`` as given, else ``count`` picked at random) and start its first drill.

    Raises:
        BadState: an exam is already running on this cluster.
        ValueError: not enough drills for ``count``.
    """
    if current(ctx) is not None:
        raise BadState("an exam is already running: operatorlab drill exam (to grade), --stop (to end it)")
    ids = drills or choose(available(ctx), count, rng)
    exam = Exam(tasks=[Task(i) for i in ids], minutes=minutes)
    _save(ctx, exam)
    return exam, _start_task(ctx, exam)


def _start_task(ctx: LabContext, exam: Exam) -> Lab:
    task = exam.current()
    assert task is not None
    lab = runner.create(registry.get(task.lab), ctx)
    with _setup_time(exam):
        runner.drill_start(lab)
    task.started = time.time()
    _save(ctx, exam)
    return lab


@contextlib.contextmanager
def _setup_time(exam: Exam) -> Iterator[None]:
    """Count the time of the block as the exam's own (breaking or resetting a drill), not the learner's."""
    started = time.monotonic()
    try:
        yield
    finally:
        exam.setup_seconds += time.monotonic() - started


def lab_of(ctx: LabContext, exam: Exam) -> Lab | None:
    """The lab of the drill in front of the learner, or None if every drill is done."""
    task = exam.current()
    return None if task is None else runner.create(registry.get(task.lab), ctx)


@dataclass
class Grading:
    """What one ``drill exam`` did: the checks of the drill in front of the learner, what came next."""

    exam: Exam
    task: Task | None  # the drill graded (None: nothing left to grade)
    checks: list[Check]
    next_lab: Lab | None = None  # the drill started after a pass or a skip
    result: Result | None = None  # set when the exam ended


def grade(ctx: LabContext, *, skip: bool = False, stop: bool = False, history: Path | None = None) -> Grading:
    """Grade the drill in front of the learner and move the exam on.

    Passed (or ``skip``): the drill is scored and reset, and the next one starts. Time spent
    (or ``stop``, or no drill left): the exam ends, its result joins the history.

    Raises:
        LabNotStarted: no exam is running.
    """
    exam = current(ctx)
    if exam is None:
        raise LabNotStarted("no exam running: operatorlab drill exam [--minutes N] [--count K]")
    task, lab = exam.current(), lab_of(ctx, exam)
    checks: list[Check] = []
    if task is not None and lab is not None:
        if not skip:
            checks = runner.check(lab, settle=5.0)
        if lab.state.exists:
            task.hints, task.solution_shown = lab.record.hints_shown, lab.record.solved
        passed = bool(checks) and all(c.passed for c in checks)
        if passed or skip or stop or exam.remaining() == 0:
            task.solved, task.skipped = passed and not task.solution_shown, skip and not passed
            task.seconds = round(time.time() - (task.started or exam.started), 1)
            with _setup_time(exam):
                runner.reset(lab)
        _save(ctx, exam)
    grading = Grading(exam, task, checks)
    if stop or exam.remaining() == 0 or exam.current() is None:
        grading.result = finish(ctx, exam, history=history)
    elif task is not None and task.done:
        grading.next_lab = _start_task(ctx, exam)
    return grading


def finish(ctx: LabContext, exam: Exam, *, history: Path | None = None) -> Result:
    """End the exam: reset the drill still open, add the result to the history, forget the exam."""
    for task in exam.tasks:
        if not task.done and task.started is not None:
            runner.reset(runner.create(registry.get(task.lab), ctx))
    exam.finished = time.time()
    done = result(exam, exam.finished)
    save_result(done, history)
    exam_file(ctx).unlink(missing_ok=True)
    return done


# -- the history ------------------------------------------------------------------------------------


def history_path() -> Path:
    """``$OPERATORLAB_EXAM_HISTORY``, else ``<cache>/exam-history.json``."""
    if env := os.environ.get("OPERATORLAB_EXAM_HISTORY"):
        return Path(env)
    return paths.cache_root() / "exam-history.json"


def load_history(path: Path | None = None) -> list[Result]:
    """Every finished exam, oldest first.

    Raises:
        BadState: the file is of another format.
    """
    path = history_path() if path is None else path
    data = read_json(path, "exam history")
    if data is None:
        return []
    if data.get("version") != VERSION:
        raise BadState(f"exam history {path}: format {data.get('version')!r}, expected {VERSION}")
    return [Result(**{**r, "tasks": [Task(**t) for t in r["tasks"]]}) for r in data["exams"]]


def save_result(done: Result, path: Path | None = None) -> None:
    path = history_path() if path is None else path
    exams = [*load_history(path), done]
    write_json(path, {"version": VERSION, "exams": [asdict(r) for r in exams]})
