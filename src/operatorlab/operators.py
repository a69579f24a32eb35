"""Run the kopf operators in ``operators/<name>/`` as child processes.

Notebooks, tests and labs all start operators through :class:`OperatorProcess`
(never in the notebook's own kernel): a separate process can be SIGKILLed
mid-reconcile exactly as Kubernetes would kill a Pod, its log goes to a file
rather than into whichever notebook cell happens to run next, and it talks to
the cluster through its own kubeconfig, just as it would in production.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import signal
import sys
import time
import urllib.request
import weakref
from pathlib import Path
from types import ModuleType

from operatorlab import paths
from operatorlab.cluster import process


# Operators started by this interpreter: stopped when it exits (a notebook kernel
# shutting down, a test session ending), so none is left reconciling behind our back.
_running: weakref.WeakSet[OperatorProcess] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for operator in list(_running):
        operator.stop(timeout=5)


def operator_names() -> list[str]:
    """The operators in the checkout: each ``operators/<name>/<name>_operator.py``."""
    return sorted(p.parent.name for p in paths.operators_dir().glob("*/*_operator.py"))


def operator_path(name: str) -> Path:
    """``operators/<name>/<name>_operator.py``.

    Raises:
        ValueError: there is no such operator (the message lists those there are).
    """
    path = paths.operators_dir() / name / f"{name}_operator.py"
    if not path.is_file():
        raise ValueError(f"no operator {name!r}; choose one of: {', '.join(operator_names())}")
    return path


def load_module(name: str) -> ModuleType:
    """Import ``operators/<name>/<name>_operator.py`` as a module, to reuse its pure parts.

    The hand-written controllers call the Tenant operator's own ``reconcile_tenant``
    so every controller in the course drives the very same reconcile. Importing also
    registers its kopf handlers in kopf's default registry, which is inert unless
    kopf runs in this process. Returns the same module object on every call.
    """
    module_name = f"operatorlab_operators_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, operator_path(name))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def kopf_argv(name: str, *, namespaces: list[str] | None = None, liveness_port: int | None = None,
              peering: str | None = None, verbose: bool = True, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The ``kopf run`` command line for an operator.

    Args:
        namespaces: watch only these namespaces; ``None`` means ``--all-namespaces``
            (cluster-scoped resources such as Tenants are seen either way).
        liveness_port: serve kopf's liveness probe on ``127.0.0.1:<port>/healthz``.
        peering: a peering name (several replicas coordinate); ``None`` means ``--standalone``.
        verbose: kopf's debug log (each object as handled): for log files that tests and labs
            read, too noisy for a person watching a terminal.
    """
    argv = [sys.executable, "-m", "kopf", "run", str(operator_path(name))] + (["--verbose"] if verbose else [])
    argv += [f"--namespace={ns}" for ns in namespaces] if namespaces else ["--all-namespaces"]
    argv += [f"--peering={peering}"] if peering else ["--standalone"]
    if liveness_port:
        argv.append(f"--liveness=http://127.0.0.1:{liveness_port}/healthz")
    return [*argv, *extra]


class OperatorProcess:
    """One operator run as ``kopf run ...`` in its own process group.

    Usable as a context manager (started on enter, stopped on exit)::

        with OperatorProcess("tenant", kubeconfig=cluster.kubeconfig) as op:
            ...          # create Tenants; op.kill() to SIGKILL it mid-reconcile
        print(op.log())

    Args:
        name: the operator's folder under ``operators/``.
        kubeconfig: the cluster to talk to (default: inherit ``$KUBECONFIG``).
        namespaces, peering, extra_args: passed to :func:`kopf_argv`.
        env: extra environment variables (e.g. the fault-injection hooks of the labs).
        log_path: where its output goes (default: a fresh file under the cache).
    """

    def __init__(self, name: str, *, kubeconfig: str | Path | None = None, namespaces: list[str] | None = None,
                 peering: str | None = None, env: dict[str, str] | None = None,
                 extra_args: list[str] | tuple[str, ...] = (), log_path: Path | None = None) -> None:
        self.name = name
        self.kubeconfig = kubeconfig
        self.namespaces = namespaces
        self.peering = peering
        self.extra_env = dict(env or {})
        self.extra_args = tuple(extra_args)
        self.log_path = log_path or paths.cache_root() / "operators" / f"{name}-{os.getpid()}-{id(self):x}.log"
        self.pid: int | None = None
        self.liveness_port: int | None = None

    def start(self, *, timeout: float = 60.0) -> OperatorProcess:
        """Start it and wait until its liveness probe answers (startup handlers done).

        Raises:
            RuntimeError: it exited or did not answer within ``timeout`` s (with its log tail).
        """
        self.liveness_port = process.free_port()
        env = {**os.environ, **self.extra_env}
        if self.kubeconfig:
            env["KUBECONFIG"] = str(self.kubeconfig)
        argv = kopf_argv(self.name, namespaces=self.namespaces, liveness_port=self.liveness_port,
                         peering=self.peering, extra=self.extra_args)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as f:
            f.write(f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(argv)}\n")
        self.pid = process.spawn(argv, self.log_path, env=env, die_with_parent=True)
        _running.add(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(f"operator {self.name} exited at startup:\n{process.tail(self.log_path)}")
            if self._live():
                return self
            time.sleep(0.2)
        raise RuntimeError(f"operator {self.name} not live after {timeout:.0f}s:\n{process.tail(self.log_path)}")

    def stop(self, *, timeout: float = 20.0) -> None:
        """Graceful stop (SIGTERM: kopf finishes its handlers' current step), SIGKILL after ``timeout``."""
        process.stop(self.pid, timeout=timeout)
        _running.discard(self)

    def kill(self) -> None:
        """SIGKILL, as the kubelet does when a Pod is killed: no cleanup, no goodbye."""
        process.stop(self.pid, sig=signal.SIGKILL, timeout=5)
        _running.discard(self)

    def wait_exit(self, timeout: float = 30.0) -> bool:
        """Wait for the process to end by itself (e.g. a kill hook fired); True if it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                process.stop(self.pid)  # reaps the zombie
                return True
            time.sleep(0.1)
        return False

    @property
    def running(self) -> bool:
        return process.is_running(self.pid)

    def log(self) -> str:
        """Everything the operator printed so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _live(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def __enter__(self) -> OperatorProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
