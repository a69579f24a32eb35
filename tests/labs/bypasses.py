"""Shared by the bypass tests of the labs around broken copies of the Tenant operator.

Each such module proves what is *not* the fix fails a named check: it starts the lab
(setup + inject) once per test on the lab's own cluster (the ``group_cluster`` fixture: one per
lab, in the lab's xdist group, shared with its protocol test in test_labs.py; never beside
another lab's Tenant operator, as two would fight), and asks which check fails first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from operatorlab.cluster import Cluster
from operatorlab.labs import Lab, registry, runner
from operatorlab.labs.state import LabState


def started(lab_id: str, on: Cluster, tmp_path: Path, nothing_left: Callable[[Lab, LabState], None]) -> Iterator[Lab]:
    """For a fixture to yield: lab ``lab_id`` set up and injected, in a work folder of its own; reset after."""
    cls = registry.get(lab_id)
    # Its own work folder (the learner's copy of the operator goes there), not the checkout's
    # labs/<id>/, which is the learner's.
    (tmp_path / "labs" / cls.id).mkdir(parents=True)
    lab = runner.create(cls, runner.context(on, state_dir=tmp_path / "state", workdir_root=tmp_path / "labs"))
    try:
        runner.start(lab)
        yield lab
    finally:
        recorded = lab.record
        runner.reset(lab)
        nothing_left(lab, recorded)


def first_failure(lab: Lab) -> list[str]:
    """The names of the checks up to and including the first failing one that fail (at most one)."""
    return [c.name for c in runner.check(lab, first_failure=True) if not c.passed]
