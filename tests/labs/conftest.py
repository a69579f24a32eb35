"""Shared by the lab tests: nothing a lab recorded outlives its reset."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from operatorlab.labs import Lab
from operatorlab.labs.state import LabState


def _assert_nothing_left(lab: Lab, recorded: LabState) -> None:
    """Nothing the lab recorded outlives its reset: processes, files, state, objects of any kind."""
    for role, rec in recorded.processes.items():
        assert not rec.identity.alive, f"{role} still runs"
        assert not Path(rec.log).exists(), rec.log
    for path in recorded.files:
        assert not Path(path).exists(), path
    assert not lab.state.path.exists()
    dynamic = DynamicClient(lab.api)
    for obj in recorded.objects:
        resource = dynamic.resources.get(api_version=obj.api_version, kind=obj.kind)
        with pytest.raises(NotFoundError):
            resource.get(name=obj.name, namespace=obj.namespace)


@pytest.fixture
def nothing_left() -> Callable[[Lab, LabState], None]:
    return _assert_nothing_left
