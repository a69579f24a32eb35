"""Find the exercises: every ``exercises/<id>/exercise.py`` defining one :class:`Exercise` subclass."""

from __future__ import annotations

import functools
from pathlib import Path

from operatorlab.exercises.base import Exercise, exercises_dir
from operatorlab.loading import one_subclass


class UnknownExercise(LookupError):
    """No exercise has this id (the message lists the ids there are)."""


def discover(root: Path | None = None) -> dict[str, type[Exercise]]:
    """``{id: Exercise subclass}`` for every ``<root>/<id>/exercise.py``, sorted by id (lesson first).

    Raises:
        TypeError: an exercise.py defines no Exercise subclass, or several, or lacks a field.
    """
    root = root or exercises_dir()
    return {path.parent.name: _load(path) for path in sorted(root.glob("*/exercise.py"))}


@functools.cache
def _load(path: Path) -> type[Exercise]:
    cls = one_subclass(path, Exercise, f"operatorlab_exercises_{path.parent.name.replace('-', '_')}")
    cls.id = path.parent.name
    for field in ("lesson", "title", "subject", "hints"):
        if not getattr(cls, field):
            raise TypeError(f"{path}: {cls.__name__}.{field} is empty")
    if not (path.parent / "solution.py").is_file():
        raise TypeError(f"{path.parent}: no solution.py (every exercise keeps its reference solution beside it)")
    return cls


def get(exercise_id: str, root: Path | None = None) -> type[Exercise]:
    """The exercise class of ``exercise_id``.

    Raises:
        UnknownExercise: there is none.
    """
    found = discover(root)
    if exercise_id not in found:
        raise UnknownExercise(f"no exercise {exercise_id!r}; choose one of: {', '.join(found)} "
                              "(operatorlab exercise list)")
    return found[exercise_id]
