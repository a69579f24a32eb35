"""Shared by the bypass tests of the labs around broken copies of the Tenant operator.

Each such module proves what is *not* the fix fails a named check: it starts the lab
(setup + inject) once per test on a cluster of the module's own, in an xdist group of its own
(``labs-<id>``, as the take-over lab's bypasses: beside the other Tenant labs' cluster, never on
it, as two Tenant operators would fight), and asks which check fails first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from operatorlab.cluster import Cluster, current
from operatorlab.labs import Lab, registry, runner
from operatorlab.labs.state import LabState
from tests.labs.clusters import ON_EXISTING_CLUSTER, own_cluster


def group(lab_id: str) -> str:
    """The xdist group (and cluster name) of a lab's bypass tests; on an existing cluster, the Tenant operators'."""
    return "tenant-operator" if ON_EXISTING_CLUSTER else f"labs-{lab_id}"


def cluster(lab_id: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """For a module-scoped fixture to yield: a cluster of the module's own (the session's on an existing one)."""
    if ON_EXISTING_CLUSTER:
        yield current()
        return
    yield from own_cluster(group(lab_id), tmp_path_factory)


def started(lab_id: str, on: Cluster, tmp_path: Path, nothing_left: Callable[[Lab, LabState], None]) -> Iterator[Lab]:
    """For a fixture to yield: lab ``lab_id`` set up and injected, in a work folder of its own; reset after."""
    cls = registry.get(lab_id)
    # Its own work folder (the learner's copy of the operator goes there), not the checkout's
    # labs/<id>/: test_labs.py may run the same lab at the same time on another worker.
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
