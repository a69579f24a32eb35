"""Lesson 08, the capstone: a runbook of the learner's own, as a CRD and one idempotent reconcile.

The learner's operator is graded as any operator is, by ``operatorlab verify``'s behavioural
suite (:mod:`operatorlab.verify`): its CRD applied and a bad object refused; the example
converging; a restart writing nothing; SIGKILL after each write; a child deleted while it
is down; delete; an unusable spec. The learner's files are a scaffold copied into their
work folder (``notebooks/work/08-capstone/``): the operator, ``crd.yaml``, ``example.yaml``
and ``unusable.yaml``, graded where they are.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from operatorlab.exercises import Exercise
from operatorlab.exercises.base import work_dir
from operatorlab.grading import Check
from operatorlab.verify import Inputs, verify

HERE = Path(__file__).resolve().parent


class Capstone(Exercise):
    lesson = "08"
    title = "Your runbook as an operator: a CRD of five fields or fewer and one idempotent reconcile"
    subject = "reconcile"
    budget = 90.0
    # Graded on a cluster of its own by tests/verify/ (the generic exercise tests leave it out).
    hints = (
        "Read the first FAIL only: each property needs the ones above it. Your operator's log is in the "
        "message when it exited; `operatorlab why KIND/NAME` says why a handler did not fire or finish.",
        "Converge: set a Ready condition with observedGeneration once, after the work, and give every object you "
        "create an owner reference (kopf.append_owner_reference). Resync and SIGKILL: GET before you create, "
        "treat a 409 on create as 'someone made it: read it', and patch only what differs.",
        "Unusable: catch what only a person can fix (a name taken, a spec that cannot work), record it with "
        "record_status(ready=False) and kopf.warn once, and raise kopf.PermanentError, or a TemporaryError "
        "with a delay of tens of seconds: never retry at once.",
    )

    def work_path(self) -> Path:
        return work_dir() / self.id / "capstone_operator.py"

    def missing(self) -> str:
        return "copy the scaffold first: run the lesson's scaffold cell, or `operatorlab exercise scaffold 08-capstone`"

    def scaffold(self) -> Path:
        """Copy the scaffold into the work folder, never over a file the learner already has."""
        folder = self.work_path().parent
        folder.mkdir(parents=True, exist_ok=True)
        for source in sorted((HERE / "scaffold").iterdir()):
            if source.is_file() and not (folder / source.name).exists():
                shutil.copyfile(source, folder / source.name)
        return folder

    def check(self, learner: ModuleType) -> Iterator[Check]:
        operator = Path(str(learner.__file__))
        yield from verify(Inputs.beside(operator), self.kubeconfig_path)
