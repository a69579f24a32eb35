"""The ``%%exercise ID`` cell magic: the learner's cell runs, and is saved for the grader.

``%load_ext operatorlab.exercises`` (a lesson's first cell) registers it. A cell starting
with ``%%exercise 03-process-next-work-item`` is executed in the notebook, so the learner
can call and try what they wrote, and is written to ``notebooks/work/<id>.py`` (the
folder :func:`~operatorlab.exercises.base.work_dir` names), which ``check(ID)`` and
``operatorlab exercise check ID`` grade.
"""

from __future__ import annotations

import os
from typing import Any

from operatorlab.exercises import registry


def exercise_magic(line: str, cell: str, *, shell: Any) -> None:
    """Run ``cell`` in the notebook and save it as the learner's file for exercise ``line``."""
    exercise_id = line.strip()
    cls = registry.get(exercise_id)  # an unknown id fails here, before anything runs
    path = cls(None).work_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cell)
    print(f"saved to {os.path.relpath(path)}; grade it with the next cell")
    shell.run_cell(cell, store_history=False)


def register(shell: Any) -> None:
    """Register ``%%exercise`` with an IPython shell."""
    shell.register_magic_function(lambda line, cell: exercise_magic(line, cell, shell=shell),
                                  magic_kind="cell", magic_name="exercise")
