"""What an exercise is: a task, the learner's code, a behavioural check, graded hints, a solution.

An exercise lives in ``exercises/<id>/``: ``exercise.py`` defines one :class:`Exercise`
subclass (the registry finds it) and ``solution.py`` is the reference solution, kept
apart from the notebook and shown only on request. The starter is a notebook cell
tagged ``exercise`` (``%%exercise <id>``) that runs the learner's code and saves it to
``notebooks/work/<id>.py``; the cell after it, tagged ``check``, grades that file.

:meth:`Exercise.check` receives the learner's module and yields one
:class:`~operatorlab.grading.Check` per property, in order. It runs the learner's code against
the real cluster and perturbs the world itself; creating the expected objects by hand
cannot pass, because the check makes fresh ones under names of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import ClassVar

from kubernetes import client, config

from operatorlab import paths
from operatorlab.grading import Check


def exercises_dir() -> Path:
    """``exercises/`` of the checkout: one folder per exercise (check and solution)."""
    return paths.repo_root() / "exercises"


def work_dir() -> Path:
    """Where the learner's code goes: ``notebooks/work/`` (beside the notebooks, not in git).

    ``$OPERATORLAB_WORK_DIR`` moves it: the test session runs the notebooks with their
    starters, and must not overwrite a learner's own answers.
    """
    if env := os.environ.get("OPERATORLAB_WORK_DIR"):
        return Path(env)
    return paths.repo_root() / "notebooks" / "work"


class Exercise:
    """Base class of every exercise.

    Class attributes an exercise sets:

    - ``lesson``: the notebook it belongs to (``"03"``); ``title``: one line;
    - ``subject``: the name the learner's file must define (a function or a class);
    - ``hints``: graded, vague first; the last names the approach, never the code;
    - ``budget``: seconds the slowest property may take to converge;
    - ``xdist_group``: the operator group its test must join, if it runs one.
    """

    id: ClassVar[str] = ""
    lesson: ClassVar[str] = ""
    title: ClassVar[str] = ""
    subject: ClassVar[str] = ""
    hints: ClassVar[tuple[str, ...]] = ()
    budget: ClassVar[float] = 30.0
    xdist_group: ClassVar[str | None] = None

    def __init__(self, kubeconfig: Path | None = None) -> None:
        self.kubeconfig = kubeconfig
        self._api: client.ApiClient | None = None

    @property
    def kubeconfig_path(self) -> Path:
        """The kubeconfig in use: the given one, else the first of ``$KUBECONFIG``, else ``~/.kube/config``."""
        if self.kubeconfig is not None:
            return self.kubeconfig
        first = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        return Path(first or "~/.kube/config").expanduser()

    @property
    def api(self) -> client.ApiClient:
        """An API client for the cluster ``$KUBECONFIG`` (or the given kubeconfig) names."""
        if self._api is None:
            self._api = config.new_client_from_config(config_file=str(self.kubeconfig_path))
        return self._api

    def check(self, learner: ModuleType) -> Iterator[Check]:
        """Grade the learner's module: yield one :class:`Check` per property, as each is graded.

        The runner may stop reading at the first failing property, which closes the
        generator: undo what the check made in a ``finally``, never after the last ``yield``.
        """
        raise NotImplementedError

    def reset(self) -> None:
        """Remove what a check may have left (by default nothing: checks clean up after themselves)."""

    def solution_path(self) -> Path:
        return exercises_dir() / self.id / "solution.py"

    def solution_source(self) -> str:
        """The reference solution as a learner would write it (an exercise whose solution
        is a worked example's own function shows that function)."""
        return self.solution_path().read_text()

    def work_path(self) -> Path:
        return work_dir() / f"{self.id}.py"

    def scaffold(self) -> Path | None:
        """Copy starter files into the work folder and return it, for an exercise whose starter is
        files rather than a notebook cell (the capstone); None for the others."""
        return None

    def missing(self) -> str:
        """What to do when the learner's file does not exist yet."""
        return "run the exercise cell above (it writes this file)"
