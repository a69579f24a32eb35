"""What a lab is: a known good state, a fault, named checks, graded hints, a fix, a reset.

A lab lives in ``labs/<id>/lab.py`` and defines one subclass of :class:`Lab` (the
registry finds it). Its methods act on the live cluster of a :class:`LabContext`:

``setup``   make a known good state (every check passes afterwards);
``inject``  break it (at least one check fails afterwards), return once the fault shows;
``check``   named :class:`Check` results, returned as a list or yielded one at a time
            (a probe that perturbs the world can then stop at the first failure, and
            its ``finally`` still cleans up); a failing message points at *evidence*
            (an object, a field, a log line, a counter), never at the answer;
``hints``   graded: the first vague, the last specific;
``solve``   the reference fix (what a learner would do);
``reset``   remove everything the lab made (objects, processes, files).

Labs are driven from separate processes (``operatorlab lab start`` now, ``lab check``
later), so everything a lab must find again (the operators and proxies it started, the
objects it made) is a typed record in its state file (:mod:`~operatorlab.labs.state`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from kubernetes import client, config

from operatorlab import paths
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check
from operatorlab.labs import cleanup
from operatorlab.labs.errors import LabNotStarted
from operatorlab.labs.state import LabState, ProcessRecord, StateFile, TrackedObject
from operatorlab.operators import OperatorProcess
from operatorlab.tenants import Tenants


class LabContext:
    """Where a lab runs: the cluster, its API client, the labs' state folder and work folder.

    Args:
        cluster: a ``LocalCluster`` or ``ExistingCluster`` (``operatorlab.cluster.current()``).
        state_dir: where state files go (default ``<cache>/labs/<cluster name>-<kubeconfig key>``).
        workdir_root: the parent of each lab's work folder, where a learner's copy of an
            operator is written (default: ``labs/`` of the checkout, next to the README).
    """

    def __init__(self, cluster: Any, state_dir: Path | None = None, workdir_root: Path | None = None) -> None:
        self.cluster = cluster
        if state_dir is None:
            key = hashlib.sha256(str(Path(cluster.kubeconfig).resolve()).encode()).hexdigest()[:10]
            state_dir = paths.cache_root() / "labs" / f"{cluster.name}-{key}"
        self.state_dir = state_dir
        self.workdir_root = workdir_root or labs_dir()
        self._api_client: client.ApiClient | None = None

    @property
    def kubeconfig(self) -> Path:
        return Path(self.cluster.kubeconfig)

    @property
    def api_client(self) -> client.ApiClient:
        if self._api_client is None:
            self._api_client = config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._api_client

    @property
    def provider(self) -> str:
        return getattr(self.cluster, "provider", "existing")


def labs_dir() -> Path:
    """``labs/`` of the checkout: one folder per lab."""
    return paths.repo_root() / "labs"


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
        self.state = StateFile(ctx.state_dir / f"{self.id}.json")

    # -- the protocol -----------------------------------------------------------------

    def setup(self) -> None:
        raise NotImplementedError

    def inject(self) -> None:
        raise NotImplementedError

    def check(self) -> Iterable[Check]:
        raise NotImplementedError

    def solve(self) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        """Stop what the lab started, delete what it made, forget its state."""
        if self.state.exists:
            record = self.state.record
            cleanup.stop_processes(record)
            cleanup.remove_files(record)
            if record.objects:
                cleanup.delete_objects(self.api, record.objects, discovery_cache=self.ctx.state_dir / "discovery.json",
                                       what=f"lab {self.id}")
        self.state.delete()

    # -- helpers for lab authors ------------------------------------------------------

    @property
    def record(self) -> LabState:
        """The lab's state (raises :class:`LabNotStarted` if it was never set up)."""
        if not self.state.exists:
            raise LabNotStarted(f"lab {self.id!r} is not started: run `operatorlab lab start {self.id}` first")
        return self.state.record

    def solution(self) -> str | None:
        """``labs/<id>/SOLUTION.md``, the fix explained (``operatorlab lab solve`` shows it), if the lab has one."""
        path = labs_dir() / self.id / "SOLUTION.md"
        return path.read_text() if path.is_file() else None

    @property
    def workdir(self) -> Path:
        """``labs/<id>/``: the lab's folder, where a learner's copy of an operator goes.

        Made if missing: under a ``workdir_root`` of its own (a test's) it starts empty.
        """
        path = self.ctx.workdir_root / self.id
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def api(self) -> client.ApiClient:
        return self.ctx.api_client

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @property
    def tenants(self) -> Tenants:
        return Tenants(self.api)

    def begin(self) -> None:
        """Start a fresh state (called by the runner before ``setup``)."""
        self.state.begin(LabState(lab=self.id, kubeconfig=str(self.ctx.kubeconfig)))

    def track(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Remember an object to delete on reset; call it *before* creating the object."""
        tracked = TrackedObject(api_version, kind, name, namespace)
        if tracked not in self.record.objects:
            self.record.objects.append(tracked)
            self.state.save()

    def tracks(self, kind: str, name: str) -> bool:
        """Whether the lab made an object of ``kind`` and ``name`` (e.g. inject created it)."""
        return any(o.kind == kind and o.name == name for o in self.record.objects)

    def remember_file(self, path: Path) -> None:
        """Remember a file to delete on reset."""
        if str(path) not in self.record.files:
            self.record.files.append(str(path))
            self.state.save()

    # -- processes --------------------------------------------------------------------

    def operator(self, role: str = "operator") -> OperatorProcess:
        """The operator process a previous step started as ``role``.

        Raises:
            LabNotStarted: the lab has no operator of that role (it was not set up).
        """
        rec = self.record.processes.get(role)
        if rec is None or rec.kind != "operator" or not rec.path:
            raise LabNotStarted(f"lab {self.id!r} runs no operator {role!r}: run `operatorlab lab start {self.id}`")
        return OperatorProcess(rec.path, kubeconfig=rec.kubeconfig, env=rec.env,
                               env_file=Path(rec.env_file) if rec.env_file else None, log_path=Path(rec.log),
                               attached=False, identity=rec.identity, namespaces=rec.namespaces,
                               standalone=rec.standalone)

    def run_operator(self, path: Path, role: str = "operator", *, kubeconfig: Path | None = None,
                     env: dict[str, str] | None = None, env_file: Path | None = None,
                     namespaces: Sequence[str] = (), standalone: bool = True) -> OperatorProcess:
        """Start the operator file ``path`` as ``role`` (replacing an earlier one), detached, and record it.

        It talks to the lab's cluster as admin unless ``kubeconfig`` says otherwise (a
        ServiceAccount, the fault proxy), and watches ``namespaces`` only, if given (a lab of a
        namespaced resource keeps to its own namespace: other operators may run beside it).
        It runs ``--standalone`` unless ``standalone`` is False: then its environment (``env_file``)
        says how it peers, as several replicas of one operator must.
        """
        if (earlier := self.record.processes.get(role)) is not None:
            earlier.identity.stop()
        operator = OperatorProcess(path, kubeconfig=kubeconfig or self.ctx.kubeconfig, env=env, env_file=env_file,
                                   log_path=self.ctx.state_dir / f"{self.id}-{role}.log", attached=False,
                                   namespaces=namespaces, standalone=standalone)
        return self._start(operator, role)

    def restart_operator(self, role: str = "operator") -> OperatorProcess:
        """Start the operator of ``role`` again, as configured (its env file and source read anew)."""
        return self._start(self.operator(role), role)

    def restart_changed_operators(self) -> list[str]:
        """Restart each operator whose source or env file changed since it started (a learner's edit).

        As a Deployment rollout would. Returns the roles restarted.
        """
        changed = [role for role, rec in self.record.processes.items()
                   if rec.kind == "operator" and rec.fingerprint != self.operator(role).fingerprint()]
        for role in changed:
            self.restart_operator(role)
        return changed

    def _start(self, operator: OperatorProcess, role: str) -> OperatorProcess:
        def record(started: OperatorProcess) -> None:
            assert started.identity is not None
            self.record.processes[role] = ProcessRecord(
                "operator", started.identity.pid, started.identity.started, str(started.log_path),
                port=started.liveness_port, path=str(started.path), kubeconfig=str(started.kubeconfig),
                env=started.env, env_file=str(started.env_file) if started.env_file else None,
                fingerprint=started.fingerprint(), namespaces=list(started.namespaces),
                standalone=started.standalone)
            self.state.save()

        return operator.start(on_spawn=record)

    def proxy(self, role: str = "proxy") -> FaultProxy:
        """The lab's API fault proxy called ``role``: the one started earlier, or a new one to start."""

        def record(proxy: FaultProxy) -> None:
            assert proxy.identity is not None
            self.record.processes[role] = ProcessRecord("proxy", proxy.identity.pid, proxy.identity.started,
                                                        str(proxy.log_path), port=proxy.port)
            self.remember_file(proxy.kubeconfig)  # saves

        rec = self.record.processes.get(role)
        return FaultProxy(self.ctx.kubeconfig, self.ctx.state_dir, name=f"{self.id}-{role}",
                          identity=rec.identity if rec else None, port=rec.port if rec else None, on_start=record)
