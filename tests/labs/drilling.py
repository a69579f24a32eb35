"""Shared by the tests of the cluster-troubleshooting drills' bypasses: a drill started on a
cluster, reset afterwards with nothing left, and the names of the checks that fail."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from operatorlab.cluster import Cluster
from operatorlab.labs import Lab, registry, runner
from operatorlab.labs.state import LabState


def drill_module(lab_id: str) -> ModuleType:
    """The module of ``labs/<lab_id>/lab.py`` as the registry loaded it: its check names, namespace, app."""
    return sys.modules[registry.get(lab_id).__module__]


def started(lab_id: str, cluster: Cluster, tmp_path: Path,
            nothing_left: Callable[[Lab, LabState], None]) -> Iterator[Lab]:
    """For a fixture to yield: drill ``lab_id`` set up and broken on ``cluster``; reset afterwards."""
    ctx = runner.context(cluster, state_dir=tmp_path / "state", workdir_root=tmp_path / "labs")
    lab = runner.create(registry.get(lab_id), ctx)
    try:
        runner.start(lab)
        yield lab
    finally:
        recorded = lab.record if lab.state.exists else None
        runner.reset(lab)
        if recorded is not None:
            nothing_left(lab, recorded)


def failing(lab: Lab, *, first_failure: bool = False) -> list[str]:
    """The names of the checks that fail now (up to the first with ``first_failure``)."""
    return [c.name for c in runner.check(lab, first_failure=first_failure) if not c.passed]
