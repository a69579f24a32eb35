"""Run kopf operators (``operators/<name>/<name>_operator.py``, or a learner's copy) as processes.

Notebooks, tests, benchmarks and labs all start operators through :class:`OperatorProcess`
(never in the notebook's own kernel): a separate process can be SIGKILLed
mid-reconcile exactly as Kubernetes would kill a Pod, its log goes to a file
rather than into whichever notebook cell happens to run next, and it talks to
the cluster through its own kubeconfig, just as it would in production.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import importlib.util
import os
import signal
import sys
import time
import urllib.request
import weakref
from collections.abc import Callable, Mapping, Sequence
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


def constants(name: str) -> dict[str, object]:
    """The literal constants an operator file assigns at top level, read without importing it.

    ``GROUP, VERSION, PLURAL = "hedronite.io", "v1", "tenants"`` gives three entries.
    Importing the file would import kopf and aiohttp (seconds on a busy machine) for what
    is a handful of strings: every ``operatorlab`` command needs those names, few need kopf.
    """
    values: dict[str, object] = {}
    for node in ast.parse(operator_path(name).read_text()).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            try:
                if isinstance(target, ast.Name):
                    values[target.id] = ast.literal_eval(value)
                elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                    for t, v in zip(target.elts, value.elts, strict=True):
                        if isinstance(t, ast.Name):
                            values[t.id] = ast.literal_eval(v)
            except ValueError:  # not a literal (a call, a name): not a constant we can read
                continue
    return values


def kopf_argv(path: str | Path, *, namespaces: Sequence[str] = (), liveness_port: int | None = None,
              peering: str | None = None, standalone: bool = True, verbose: bool = True,
              extra: Sequence[str] = ()) -> list[str]:
    """The ``kopf run`` command line for the operator in the file ``path``.

    Args:
        namespaces: watch only these namespaces; none means ``--all-namespaces``
            (cluster-scoped resources such as Tenants are seen either way).
        liveness_port: serve kopf's liveness probe on ``127.0.0.1:<port>/healthz``.
        peering: a peering name (several replicas coordinate); ``None`` means ``--standalone``.
        standalone: with no ``peering``, ``False`` passes neither flag: kopf then takes its
            peering mode from its environment, as a Pod's ``env:`` would set it
            (``KOPF_RUN_STANDALONE``, ``KOPF_RUN_PEERING``, ``KOPF_RUN_PRIORITY``: click's
            ``auto_envvar_prefix="KOPF"`` in kopf 1.45's ``kopf/cli.py``), else auto-detects it.
        verbose: kopf's debug log (each object as handled): for log files that tests and labs
            read, too noisy for a person watching a terminal.
    """
    argv = [sys.executable, "-m", "kopf", "run", str(path)] + (["--verbose"] if verbose else [])
    argv += [f"--namespace={ns}" for ns in namespaces] if namespaces else ["--all-namespaces"]
    if peering:
        argv.append(f"--peering={peering}")
    elif standalone:
        argv.append("--standalone")
    if liveness_port:
        argv.append(f"--liveness=http://127.0.0.1:{liveness_port}/healthz")
    return [*argv, *extra]


def read_env_file(path: Path | None) -> dict[str, str]:
    """``KEY=VALUE`` lines of ``path`` (blank lines and ``#`` comments skipped); {} if there is none."""
    if path is None or not path.is_file():
        return {}
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            env[key.strip()] = value.strip()
    return env


class OperatorProcess:
    """One operator file run as ``kopf run <path>`` in its own process group.

    Two ways to run it:

    - *attached* (default: notebooks, tests): it dies with the interpreter that started
      it, even if that one is SIGKILLed (the kernel's parent-death signal), and is stopped
      at exit. A context manager: started on enter, stopped on exit::

          with OperatorProcess(operator_path("tenant"), kubeconfig=cluster.kubeconfig) as op:
              ...          # create Tenants; op.kill() to SIGKILL it mid-reconcile
          print(op.log())

    - *detached* (``attached=False``: the labs): it outlives the command that started it
      (``operatorlab lab start`` returns, the operator keeps running), and a later command
      finds it again by its recorded :attr:`identity` (pid + start time), passed back in as
      ``identity=``.

    Args:
        path: the operator's file (its kopf handlers): :func:`operator_path` for ours, or a
            learner's copy.
        kubeconfig: the cluster to talk to (default: inherit ``$KUBECONFIG``).
        namespaces, peering, standalone, extra_args: passed to :func:`kopf_argv`.
        env: extra environment variables (e.g. a resync interval).
        env_file: a ``KEY=VALUE`` file read at every start (a learner may edit it); ``env`` wins.
        log_path: where its output goes (default: a fresh file under the cache).
        attached: die with this interpreter (True) or outlive it (False).
        identity: the process a previous command started with this configuration.
        verbose: kopf's debug log (the default; tests and labs read it); ``False`` for a
            benchmark, where writing it would be part of what is measured.
    """

    def __init__(self, path: str | Path, *, kubeconfig: str | Path | None = None, namespaces: Sequence[str] = (),
                 peering: str | None = None, standalone: bool = True, env: Mapping[str, str] | None = None,
                 env_file: Path | None = None, extra_args: Sequence[str] = (), log_path: Path | None = None,
                 attached: bool = True, identity: process.Identity | None = None, verbose: bool = True) -> None:
        self.path = Path(path)
        self.kubeconfig = Path(kubeconfig) if kubeconfig else None
        self.namespaces = tuple(namespaces)
        self.peering = peering
        self.standalone = standalone
        self.env = dict(env or {})
        self.env_file = Path(env_file) if env_file else None
        self.extra_args = tuple(extra_args)
        self.log_path = log_path or (paths.cache_root() / "operators"
                                     / f"{self.path.stem}-{os.getpid()}-{id(self):x}.log")
        self.attached = attached
        self.identity = identity
        self.verbose = verbose
        self.liveness_port: int | None = None

    @property
    def name(self) -> str:
        """The operator's folder name (``tenant`` for ``operators/tenant/tenant_operator.py``)."""
        return self.path.stem.removesuffix("_operator")

    @property
    def pid(self) -> int | None:
        return self.identity.pid if self.identity else None

    def start(self, *, timeout: float = 60.0,
              on_spawn: Callable[[OperatorProcess], None] | None = None) -> OperatorProcess:
        """Start it (stopping the one :attr:`identity` names first) and wait until kopf's liveness probe answers.

        kopf answers the probe once its startup handlers are done. ``on_spawn`` is called as
        soon as the process exists, before the wait: a lab records it there, so that even an
        operator that fails to come up is stopped by ``reset``.

        Raises:
            FileNotFoundError: there is no operator file at :attr:`path` (for one of ours, pass
                ``operator_path(name)``).
            RuntimeError: it exited or did not answer within ``timeout`` s (with its log tail).
        """
        if not self.path.is_file():
            raise FileNotFoundError(f"no operator file {self.path}: OperatorProcess takes a path; for one of "
                                    f"ours: OperatorProcess(operator_path({self.path.stem!r}))")
        self.stop()
        attempts = 3
        while not self._spawn_and_wait(timeout=timeout, on_spawn=on_spawn):
            attempts -= 1
            # Only a probe port taken between choosing and binding it is worth another try.
            if not attempts or not process.lost_port_race(self.log_path):
                raise RuntimeError(f"operator {self.path} exited at startup:\n{process.tail(self.log_path)}")
        return self

    def _spawn_and_wait(self, *, timeout: float,
                        on_spawn: Callable[[OperatorProcess], None] | None) -> bool:
        """One attempt: spawn kopf on a new probe port; True once live, False if it exited."""
        self.liveness_port = process.free_port()
        env = {**os.environ, **read_env_file(self.env_file), **self.env}
        if self.kubeconfig:
            env["KUBECONFIG"] = str(self.kubeconfig)
        argv = kopf_argv(self.path, namespaces=self.namespaces, liveness_port=self.liveness_port,
                         peering=self.peering, standalone=self.standalone, verbose=self.verbose,
                         extra=self.extra_args)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as f:
            f.write(f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(argv)}\n")
        pid = process.spawn(argv, self.log_path, env=env, die_with_parent=self.attached)
        self.identity = process.Identity.of(pid)
        if self.attached:
            _running.add(self)
        if on_spawn:
            on_spawn(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                self.stop()  # reaps it
                return False
            if self._live():
                return True
            time.sleep(0.2)
        raise RuntimeError(f"operator {self.path} not live after {timeout:.0f}s:\n{process.tail(self.log_path)}")

    def stop(self, *, timeout: float = 20.0) -> None:
        """Graceful stop (SIGTERM: kopf finishes its handlers' current step), SIGKILL after ``timeout``."""
        if self.identity:
            self.identity.stop(timeout=timeout)
        _running.discard(self)

    def kill(self) -> None:
        """SIGKILL, as the kubelet does when a Pod is killed: no cleanup, no goodbye."""
        if self.identity:
            self.identity.stop(sig=signal.SIGKILL, timeout=5)
        _running.discard(self)

    def wait_exit(self, timeout: float = 30.0) -> bool:
        """Wait for the process to end by something else's hand (e.g. the fault proxy); True if it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                self.stop()  # reaps the zombie if it was our child
                return True
            time.sleep(0.1)
        return False

    @property
    def running(self) -> bool:
        return bool(self.identity and self.identity.alive)

    def log(self) -> str:
        """Everything the operator printed so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 5) -> str:
        return process.tail(self.log_path, lines)

    def fingerprint(self) -> str:
        """A digest of its source and env file: it changes when a learner edits either."""
        digest = hashlib.sha256()
        for path in (self.path, self.env_file):
            if path and path.is_file():
                digest.update(path.read_bytes())
        return digest.hexdigest()[:16]

    def _live(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def __enter__(self) -> OperatorProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
