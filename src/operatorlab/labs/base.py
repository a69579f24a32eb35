"""What a lab is: a known good state, a fault, named checks, graded hints, a fix, a reset.

A lab lives in ``labs/<id>/lab.py`` and defines one subclass of :class:`Lab` (the
registry finds it). Its methods act on the live cluster of a :class:`LabContext`:

``setup``   make a known good state (every check passes afterwards);
``inject``  break it (at least one check fails afterwards), return once the fault shows;
``check``   named :class:`Check` results; a failing message points at *evidence*
            (an object, a field, a log line, a counter), never at the answer;
``hints``   graded: the first vague, the last specific;
``solve``   the reference fix (what a learner would do);
``reset``   remove everything the lab made (Tenants, namespaces, processes, files).

Labs are driven from separate processes (``operatorlab lab start`` now, ``lab check``
later), so everything a lab must remember (the pids of the operators and proxies it
started, the objects it made) goes into :attr:`LabContext.state`, a JSON file.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from operatorlab import paths


@dataclass(frozen=True)
class Check:
    """One named check: passed or not, and what to look at."""

    name: str
    passed: bool
    message: str = ""


class LabUnavailable(RuntimeError):
    """The lab needs something this cluster cannot give (e.g. stopping a control-plane component)."""


class LabNotStarted(RuntimeError):
    """``check``/``solve`` on a lab that was never set up (no state file)."""


@dataclass
class LabContext:
    """Where a lab runs: the cluster, its API client, the lab's state file and work folder.

    Args:
        cluster: a ``LocalCluster`` or ``ExistingCluster`` (``operatorlab.cluster.current()``).
        state_dir: where state files go (default ``<cache>/labs/<cluster key>``).
        workdir_root: the parent of each lab's work folder, where a learner's copy of an
            operator is written (default: ``labs/`` of the checkout, next to the README).
    """

    cluster: Any
    state_dir: Path | None = None
    workdir_root: Path | None = None
    _api_client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.state_dir is None:
            key = hashlib.sha256(str(Path(self.cluster.kubeconfig).resolve()).encode()).hexdigest()[:10]
            self.state_dir = paths.cache_root() / "labs" / f"{self.cluster.name}-{key}"
        if self.workdir_root is None:
            self.workdir_root = labs_dir()

    @property
    def kubeconfig(self) -> Path:
        return Path(self.cluster.kubeconfig)

    @property
    def api_client(self):
        if self._api_client is None:
            from kubernetes import config

            self._api_client = config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._api_client

    @property
    def provider(self) -> str:
        return getattr(self.cluster, "provider", "existing")


def labs_dir() -> Path:
    """``labs/`` of the checkout: one folder per lab."""
    return paths.repo_root() / "labs"


class State:
    """A lab's JSON state file: a dict saved on every :meth:`save`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.data: dict[str, Any] = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            self.data = {}

    @property
    def exists(self) -> bool:
        return self.path.is_file()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=True))
        tmp.replace(self.path)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self.data = {}

    def remember(self, key: str, value: Any) -> None:
        """Append ``value`` to the list ``key`` (once) and save."""
        items = self.data.setdefault(key, [])
        if value not in items:
            items.append(value)
        self.save()


class Lab:
    """Base class of every lab (see the module docstring for the protocol).

    Class attributes a lab sets:

    - ``title``, ``summary`` (one line for ``operatorlab lab list``);
    - ``hints``: graded, vague first;
    - ``drill``: offered as a timed CKA-style drill;
    - ``requires``: e.g. ``{"local"}`` when it stops control-plane components;
    - ``xdist_group``: ``"tenant-operator"`` / ``"nsb-operator"`` if it runs that operator
      (tests pin such labs to one pytest-xdist worker);
    - ``settle``: seconds a check may wait for the cluster to converge after a fix.
    """

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    hints: ClassVar[tuple[str, ...]] = ()
    drill: ClassVar[bool] = False
    requires: ClassVar[frozenset[str]] = frozenset()
    xdist_group: ClassVar[str | None] = None
    settle: ClassVar[float] = 30.0

    def __init__(self, ctx: LabContext) -> None:
        self.ctx = ctx
        self.state = State(ctx.state_dir / f"{self.id}.json")

    # -- the protocol -----------------------------------------------------------------

    def setup(self) -> None:
        raise NotImplementedError

    def inject(self) -> None:
        raise NotImplementedError

    def check(self) -> list[Check]:
        raise NotImplementedError

    def solve(self) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        """Stop what the lab started, delete what it made, forget its state."""
        from operatorlab.labs import cleanup

        cleanup.undo(self)
        self.state.delete()

    # -- helpers for lab authors ------------------------------------------------------

    @property
    def workdir(self) -> Path:
        """``labs/<id>/``: the lab's folder, where a learner's copy of an operator goes."""
        return self.ctx.workdir_root / self.id

    @property
    def api(self):
        return self.ctx.api_client

    @property
    def core(self):
        from kubernetes import client

        return client.CoreV1Api(self.api)

    @property
    def custom(self):
        from kubernetes import client

        return client.CustomObjectsApi(self.api)

    @property
    def tenants(self):
        from operatorlab.tenants import Tenants

        return Tenants(self.api)

    def begin(self) -> None:
        """Start a fresh state (called by the runner before ``setup``)."""
        self.state.data = {"lab": self.id, "started": time.time(), "kubeconfig": str(self.ctx.kubeconfig)}
        self.state.save()

    def track(self, kind: str, name: str, namespace: str | None = None) -> None:
        """Remember an object to delete on reset: ``tenant``, ``namespace``, ``nsb``, ``clusterrole``..."""
        self.state.remember("objects", [kind, name, namespace])

    def operator(self, role: str = "operator", **kwargs):
        """The lab's operator process called ``role`` (see :class:`~operatorlab.labs.faults.LabOperator`)."""
        from operatorlab.labs.faults import LabOperator

        return LabOperator(self, role, **kwargs)

    def proxy(self, role: str = "proxy"):
        """The lab's API fault proxy called ``role``, remembered in its state (see :class:`FaultProxy`)."""
        from operatorlab.labs.proxy import FaultProxy

        def remember(proxy: FaultProxy) -> None:
            self.state.data.setdefault("processes", {})[role] = {
                "kind": "proxy", "pid": proxy.pid, "started": proxy.started, "port": proxy.port,
                "log": str(proxy.log_path)}
            self.state.remember("files", str(proxy.kubeconfig))

        saved = self.state.data.get("processes", {}).get(role, {})
        return FaultProxy(self.ctx.kubeconfig, self.ctx.state_dir, name=f"{self.id}-{role}",
                          pid=saved.get("pid"), started=saved.get("started"), port=saved.get("port"),
                          on_start=remember)
