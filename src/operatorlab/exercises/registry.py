"""Find the exercises: every ``exercises/<id>/exercise.py`` defining one :class:`Exercise` subclass."""

from __future__ import annotations

import functools
import importlib.util
import inspect
import sys
from pathlib import Path

from operatorlab.exercises.base import Exercise, exercises_dir


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
    module_name = f"operatorlab_exercises_{path.parent.name.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    found = [obj for obj in vars(module).values() if inspect.isclass(obj) and issubclass(obj, Exercise)
             and obj is not Exercise and obj.__module__ == module_name]
    if len(found) != 1:
        raise TypeError(f"{path} must define exactly one Exercise subclass, found {[c.__name__ for c in found]}")
    cls = found[0]
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
