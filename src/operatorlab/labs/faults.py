"""Fault injectors the labs share: deterministic, and undone by ``reset``.

- :class:`LabOperator`: a lab's operator process (``kopf run``), started *detached*
  (it outlives the ``operatorlab lab start`` command that started it, so a learner can
  look at it from another command), remembered in the lab's state file by pid and
  executable, and SIGKILLable. It may run a learner's copy of an operator
  (``labs/<id>/tenant_operator.py``) instead of ``operators/<name>/<name>_operator.py``.
- :func:`kill_at`: the environment that makes the Tenant operator SIGKILL itself at an
  exact point of a reconcile (its ``OPERATORLAB_KILL_AT`` hook), once.
- :func:`stop_component` / :func:`start_component`: one control-plane component of a
  local cluster; on an existing cluster a clear :class:`LabUnavailable`.
- :func:`transform`: make a broken variant of an operator by exact text edits.

The API fault proxy is in :mod:`operatorlab.labs.proxy`.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

from operatorlab import operators
from operatorlab.cluster import process
from operatorlab.labs.base import LabUnavailable


class LabOperator:
    """One operator process of a lab, remembered in the lab's state under ``role``.

    Constructed with only ``role``, it is the one a previous command started (its
    configuration comes from the state file). With keyword arguments, it is configured
    anew (saved on :meth:`start`).

    Args:
        lab: the lab owning it.
        role: its key in the lab's state (a lab may run several operators).
        operator: the operator's folder under ``operators/`` (its kopf handlers).
        source: run this file instead of ``operators/<operator>/<operator>_operator.py`` (a learner's copy).
        env: extra environment variables (fault hooks, resync intervals).
        env_file: a ``KEY=VALUE`` file read at every start (a learner may edit it).
        kubeconfig: the identity and address to use (default: the lab's cluster, as admin).
    """

    def __init__(self, lab, role: str = "operator", *, operator: str | None = None, source: Path | None = None,
                 env: dict[str, str] | None = None, env_file: Path | None = None,
                 kubeconfig: Path | None = None) -> None:
        self.lab = lab
        self.role = role
        saved = lab.state.data.get("processes", {}).get(role, {})
        configured = operator is not None
        self.operator = operator or saved.get("operator", "tenant")
        self.source = Path(source) if source else (Path(saved["source"]) if not configured and saved.get("source") else None)
        self.env = dict(env or (saved.get("env", {}) if not configured else {}))
        self.env_file = Path(env_file) if env_file else (
            Path(saved["env_file"]) if not configured and saved.get("env_file") else None)
        self.kubeconfig = Path(kubeconfig) if kubeconfig else (
            Path(saved["kubeconfig"]) if not configured and saved.get("kubeconfig") else lab.ctx.kubeconfig)
        self.pid: int | None = saved.get("pid")
        self.started: str | None = saved.get("started")
        self.log_path = lab.ctx.state_dir / f"{lab.id}-{role}.log"

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The file kopf runs."""
        return self.source or operators.operator_path(self.operator)

    def start(self, *, timeout: float = 60.0) -> LabOperator:
        """Start it (stopping an earlier one of this role) and wait until kopf's liveness probe answers.

        Raises:
            RuntimeError: it exited or did not become live (with the tail of its log).
        """
        self.stop()
        port = process.free_port()
        argv = operators.kopf_argv(self.operator, liveness_port=port)
        argv[argv.index(str(operators.operator_path(self.operator)))] = str(self.path)
        env = {**os.environ, **self._file_env(), **self.env, "KUBECONFIG": str(self.kubeconfig)}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as f:
            f.write(f"\n=== start {time.strftime('%H:%M:%S')}: {self.path}\n")
        # Detached (no die-with-parent): it must outlive `operatorlab lab start`.
        self.pid = process.spawn(argv, self.log_path, env=env)
        self.started = start_time(self.pid)
        self._save(port)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                if self._hook_fired():
                    return self  # killed itself at its fault point during startup: as asked
                raise RuntimeError(f"operator {self.role} exited at startup:\n{process.tail(self.log_path)}")
            if _live(port):
                return self
            time.sleep(0.2)
        raise RuntimeError(f"operator {self.role} not live after {timeout:.0f}s:\n{process.tail(self.log_path)}")

    def stop(self, *, timeout: float = 20.0) -> None:
        """SIGTERM (kopf finishes the current handler step), SIGKILL after ``timeout``."""
        stop_recorded(self.pid, self.started, timeout=timeout)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, as when a Pod is OOM-killed."""
        stop_recorded(self.pid, self.started, sig=signal.SIGKILL, timeout=5)

    @property
    def running(self) -> bool:
        return is_ours(self.pid, self.started)

    def wait_exit(self, timeout: float = 30.0) -> bool:
        """Wait until it ends by itself (a kill hook fired); True if it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                process.stop(self.pid)  # reaps it if it was our child
                return True
            time.sleep(0.1)
        return False

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 5) -> str:
        return process.tail(self.log_path, lines)

    def changed(self) -> bool:
        """Whether its source or env file changed since it started (a learner's edit)."""
        saved = self.lab.state.data.get("processes", {}).get(self.role)
        return bool(saved) and saved.get("fingerprint") != self.fingerprint()

    def restart_if_changed(self) -> bool:
        """Restart it if a learner edited its source or env file; True if it did."""
        if self.changed():
            self.start()
            return True
        return False

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for path in (self.path, self.env_file):
            if path and path.is_file():
                h.update(path.read_bytes())
        return h.hexdigest()[:16]

    # -- internals ----------------------------------------------------------------------

    def _file_env(self) -> dict[str, str]:
        if not self.env_file or not self.env_file.is_file():
            return {}
        env = {}
        for line in self.env_file.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                env[key.strip()] = value.strip()
        return env

    def _hook_fired(self) -> bool:
        marker = self.env.get(KILL_ONCE_FILE_ENV)
        return bool(marker) and Path(marker).exists()

    def _save(self, port: int) -> None:
        self.lab.state.data.setdefault("processes", {})[self.role] = {
            "kind": "operator", "operator": self.operator, "pid": self.pid, "started": self.started, "port": port,
            "source": str(self.source) if self.source else None, "env": self.env,
            "env_file": str(self.env_file) if self.env_file else None, "kubeconfig": str(self.kubeconfig),
            "log": str(self.log_path), "fingerprint": self.fingerprint(),
        }
        self.lab.state.save()


def start_time(pid: int | None) -> str | None:
    """The kernel's start time of ``pid`` (``/proc/<pid>/stat`` field 22), or None if it is gone.

    A pid plus its start time names one process for good: a recycled pid has another start
    time. (The executable path cannot: between fork and exec the child still shows its
    parent's command line, and a lab's processes outlive the command that started them.)
    """
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (FileNotFoundError, ProcessLookupError, IndexError, TypeError):
        return None


def is_ours(pid: int | None, started: str | None) -> bool:
    """``pid`` is alive (not a zombie) and is the very process started at ``started``."""
    return bool(pid) and started is not None and process.is_running(pid) and start_time(pid) == started


def stop_recorded(pid: int | None, started: str | None, *, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """Stop a process a lab recorded (pid + start time); nothing if it is gone or not that one."""
    if is_ours(pid, started):
        process.stop(pid, sig=sig, timeout=timeout)
    else:
        process.stop(None)


def _live(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:  # noqa: S310 (loopback)
            return r.status == 200
    except OSError:
        return False


# -- kill at a reconcile point -------------------------------------------------------------

# The Tenant operator's hook (operators/tenant/tenant_operator.py, _fault_point). Spelled here
# rather than imported: importing the operator registers its kopf handlers in this process.
KILL_AT_ENV = "OPERATORLAB_KILL_AT"
KILL_ONCE_FILE_ENV = "OPERATORLAB_KILL_ONCE_FILE"
KILL_POINTS = ("after-namespace", "after-quota")


def kill_at(point: str, once_file: Path) -> dict[str, str]:
    """Environment for the Tenant operator: SIGKILL itself once, at ``point`` of a reconcile.

    ``once_file`` is created by the operator just before it kills itself; a restart with
    the same environment then carries on.
    """
    if point not in KILL_POINTS:
        raise ValueError(f"unknown kill point {point!r}; choose one of {', '.join(KILL_POINTS)}")
    once_file.unlink(missing_ok=True)
    return {KILL_AT_ENV: point, KILL_ONCE_FILE_ENV: str(once_file)}


# -- control-plane components ----------------------------------------------------------------


def require_local(cluster: Any, what: str) -> None:
    """Raise :class:`LabUnavailable` unless ``cluster`` is a local one whose processes we own."""
    if getattr(cluster, "provider", None) != "local":
        from operatorlab.cluster.existing import UNAVAILABLE_INJECTIONS

        raise LabUnavailable(
            f"{what} needs the built-in local cluster: on this {getattr(cluster, 'provider', 'existing')} "
            f"cluster Operator Lab does not own the control-plane processes. "
            f"Unavailable here: {', '.join(UNAVAILABLE_INJECTIONS)}. "
            f"Use it with: unset OPERATORLAB_CLUSTER && operatorlab cluster up"
        )


def stop_component(cluster: Any, name: str) -> None:
    """Stop one control-plane component (kube-controller-manager, kube-scheduler, kwok)."""
    require_local(cluster, f"stopping {name}")
    cluster.stop_component(name)


def start_component(cluster: Any, name: str, *, timeout: float = 60.0) -> None:
    """Start it again and wait until it is healthy."""
    require_local(cluster, f"starting {name}")
    cluster.start_component(name, timeout=timeout)


def component_running(cluster: Any, name: str) -> bool:
    return any(r.name == name and r.running for r in cluster.status())


# -- broken variants ----------------------------------------------------------------------


class VariantError(ValueError):
    """An edit's text is not found exactly once: the operator changed under the lab."""


def transform(text: str, edits: list[tuple[str, str]]) -> str:
    """Apply exact ``(old, new)`` replacements, each of which must match exactly once.

    The broken variants of the labs are made from the real operator at setup time by
    this function rather than committed as near-copies: the variant can never drift
    from the operator it teaches about, and if the operator changes so that an edit no
    longer applies, setup (and the lab tests) fail loudly instead of teaching an
    outdated bug.

    Raises:
        VariantError: an ``old`` text occurs zero or several times.
    """
    for old, new in edits:
        if not old:
            raise VariantError("an edit must replace some text (and, to be undone, by some text)")
        count = text.count(old)
        if count != 1:
            raise VariantError(f"expected exactly one occurrence of {old.strip()[:60]!r}, found {count}")
        text = text.replace(old, new)
    return text


def variant(operator: str, edits: list[tuple[str, str]], header: str = "") -> str:
    """``operators/<operator>/<operator>_operator.py`` with ``edits`` applied, and ``header`` prepended."""
    text = transform(operators.operator_path(operator).read_text(), edits)
    return header + text


def undo_edits(edits: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The reverse edits: applied to a variant, they give back the original."""
    return [(new, old) for old, new in reversed(edits)]
