"""Find the labs: every ``labs/<id>/lab.py`` defining one :class:`~operatorlab.labs.base.Lab` subclass."""

from __future__ import annotations

import functools
from pathlib import Path

from operatorlab.labs.base import Lab, labs_dir
from operatorlab.labs.errors import UnknownLab
from operatorlab.loading import one_subclass


def discover(root: Path | None = None) -> dict[str, type[Lab]]:
    """``{id: Lab subclass}`` for every ``<root>/<id>/lab.py`` (default root: ``labs/``), sorted by id.

    The id is the folder's name; the class's ``id`` is set to it.

    Raises:
        TypeError: a lab.py defines no Lab subclass, or several.
    """
    root = root or labs_dir()
    return {path.parent.name: _load(path) for path in sorted(root.glob("*/lab.py"))}


@functools.cache
def _load(path: Path) -> type[Lab]:
    cls = one_subclass(path, Lab, f"operatorlab_labs_{path.parent.name.replace('-', '_')}")
    cls.id = path.parent.name
    if not cls.summary:
        raise TypeError(f"{path}: {cls.__name__}.summary is empty (lab list shows it)")
    return cls


def get(lab_id: str, root: Path | None = None) -> type[Lab]:
    """The lab class of ``lab_id``.

    Raises:
        UnknownLab: there is none.
    """
    labs = discover(root)
    if lab_id not in labs:
        raise UnknownLab(f"no lab {lab_id!r}; choose one of: {', '.join(labs)} (operatorlab lab list)")
    return labs[lab_id]


def drills(root: Path | None = None) -> dict[str, type[Lab]]:
    """The labs offered as timed drills."""
    return {k: v for k, v in discover(root).items() if v.drill}
