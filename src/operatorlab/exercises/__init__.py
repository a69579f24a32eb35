"""Graded exercises: the learner writes the code, a behavioural check grades what it does.

In a notebook::

    %load_ext operatorlab.exercises                     # once, in the lesson's first cell

    %%exercise 03-process-next-work-item                # the cell tagged "exercise": it runs,
    def process_next_work_item(queue, sync): ...       # and is saved to notebooks/work/ID.py

    from operatorlab.exercises import check             # the cell tagged "check"
    check("03-process-next-work-item")

From a shell: ``operatorlab exercise list | check ID | hint ID | solution ID | reset ID | scaffold ID``.

- :mod:`~operatorlab.exercises.base`: :class:`Exercise` (task, subject, check, hints).
- :mod:`~operatorlab.exercises.registry`: finds ``exercises/<id>/exercise.py``.
- :mod:`~operatorlab.exercises.runner`: grades a file into a :class:`Verdict`, never raising.

The checks are built from :mod:`operatorlab.grading`, as the labs' are.
"""

from operatorlab.exercises.base import Exercise
from operatorlab.exercises.registry import UnknownExercise, discover, get
from operatorlab.exercises.runner import Verdict, grade, hint, scaffold, solution


def check(exercise_id: str) -> Verdict:
    """Grade ``notebooks/work/<id>.py`` and return the verdict (a notebook shows it)."""
    return grade(exercise_id)


def load_ipython_extension(shell) -> None:
    """``%load_ext operatorlab.exercises``: registers the ``%%exercise`` cell magic."""
    from operatorlab.exercises.notebook import register

    register(shell)


__all__ = ["Exercise", "UnknownExercise", "Verdict", "check", "discover", "get", "grade", "hint", "scaffold",
           "solution"]
