"""What a lab remembers between commands, as typed records in a JSON file.

``operatorlab lab start`` and ``operatorlab lab check`` are separate processes, so
everything a lab must find again -- the objects to delete on reset, the processes to
stop (by :class:`~operatorlab.cluster.process.Identity`), the files to remove -- is a
record here, saved after every change. Records are dataclasses, so a typo in a field
is an error at the line that makes it, not a silent ``None`` three commands later.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from operatorlab.cluster.process import Identity
from operatorlab.labs.errors import BadState


@dataclass(frozen=True)
class TrackedObject:
    """An object a lab made, deleted on reset (through the dynamic client, whatever its kind)."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@dataclass
class ProcessRecord:
    """A process a lab started (an operator or a fault proxy), found again by its identity.

    For an operator it also holds how to start it again (``path``, ``kubeconfig``, ``env``,
    ``env_file``, the ``namespaces`` it watches: none means all; ``standalone``: False when kopf
    takes its peering mode from that environment) and the
    :meth:`~operatorlab.operators.OperatorProcess.fingerprint` of its source when it started,
    so ``lab check`` notices a learner's edit.
    """

    kind: Literal["operator", "proxy"]
    pid: int
    started: str
    log: str
    port: int | None = None
    path: str | None = None
    kubeconfig: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    env_file: str | None = None
    fingerprint: str | None = None
    namespaces: list[str] = field(default_factory=list)
    standalone: bool = True

    @property
    def identity(self) -> Identity:
        return Identity(self.pid, self.started)


@dataclass
class LabState:
    """One lab's state: made by ``begin``, grown by setup and inject, removed by reset."""

    lab: str
    kubeconfig: str
    started: float = field(default_factory=time.time)
    objects: list[TrackedObject] = field(default_factory=list)
    processes: dict[str, ProcessRecord] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    injected: float | None = None
    solved: bool = False
    hints_shown: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LabState:
        """Raises: TypeError, KeyError: not a state of this shape."""
        return cls(**{**data,
                      "objects": [TrackedObject(**o) for o in data.get("objects", [])],
                      "processes": {role: ProcessRecord(**p) for role, p in data.get("processes", {}).items()}})


@dataclass
class Drill:
    """The drill running on a cluster: which lab, and the clock."""

    lab: str
    started: float = field(default_factory=time.time)
    finished: float | None = None

    def elapsed(self) -> float:
        return (self.finished or time.time()) - self.started


def read_json(path: Path, what: str) -> dict[str, Any] | None:
    """The JSON object in ``path``; None if there is no such file.

    Raises:
        BadState: the file is not a JSON object (nothing is deleted: the message says how).
    """
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as e:
        raise BadState(f"{what} {path} is not JSON ({e}); look at it, then remove it: rm {path}") from e
    if not isinstance(data, dict):
        raise BadState(f"{what} {path} is not a JSON object; look at it, then remove it: rm {path}")
    return data


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(path)


class StateFile:
    """A lab's :class:`LabState` in ``<state dir>/<lab id>.json``, loaded when first used."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._record: LabState | None = None

    @property
    def exists(self) -> bool:
        return self.path.is_file()

    @property
    def record(self) -> LabState:
        """The lab's state (as saved by the last command).

        Raises:
            FileNotFoundError: the lab was never started (no file).
            BadState: the file is not a state this version reads.
        """
        if self._record is None:
            data = read_json(self.path, "lab state")
            if data is None:
                raise FileNotFoundError(self.path)
            try:
                self._record = LabState.from_json(data)
            except (TypeError, KeyError) as e:
                raise BadState(f"lab state {self.path} is not one this version reads ({e}): the processes it "
                               f"names may still run; look at it, stop them, then: rm {self.path}") from e
        return self._record

    def begin(self, record: LabState) -> None:
        self._record = record
        self.save()

    def save(self) -> None:
        write_json(self.path, self.record.to_json())

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._record = None
