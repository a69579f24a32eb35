"""Is an operator running for this cluster? What can be seen of one from outside.

A kopf finalizer waits for an operator, so "stuck Terminating" is really "no operator
runs": worth showing the evidence rather than guessing. Two places are looked at:

- **this machine**: ``kopf run`` processes (``operatorlab operator run``, a notebook's or a
  lab's ``OperatorProcess``, a learner's own ``kopf run``) whose kubeconfig names the same
  API server. Read from ``/proc`` (Linux): another user's processes cannot be read;
- **the cluster**: the Deployment of one of our operators (``operators/<name>/deploy/``),
  as ``make deploy`` makes it, and whether a replica is ready.

An operator elsewhere (another machine, another Deployment name) is not seen; messages
say "seen", never "none exists".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from operatorlab import operators, paths
from operatorlab.cluster import kubeconfig
from operatorlab.diagnose.rest import get_or_none


@dataclass(frozen=True)
class SeenOperator:
    """One operator found: where, running what, whether it runs now, and whether it is this kind's.

    ``handles``: True for the kind's operator (its file, or a copy of it by the same name, as a
    lab's variant is), False for another of ours (a Website operator is no help to a
    Tenant), None when unknown (a file of another name: it may handle anything).
    """

    where: str
    what: str
    running: bool
    files: tuple[str, ...] = ()
    handles: bool | None = None

    def for_kind(self, plural: str, kind: str, operator: str | None) -> SeenOperator:
        """This operator, judged as a candidate to handle ``kind`` (see ``handles``).

        ``operator`` names the one of ours that handles it, if any: its file (or a copy by
        that name, as a lab's variant is) handles it, our other operators do not. A file of
        another name handles it if its source names the kind or its plural (``@kopf.on.create(
        "hedronite.io", "v1", "tenants")``); unreadable, it may.
        """
        if not self.files:
            return self
        names = {Path(f).name for f in self.files}
        ours = {f"{n}_operator.py" for n in operators.operator_names()}
        if operator and f"{operator}_operator.py" in names:
            return replace(self, handles=True)
        if names <= ours:
            return replace(self, handles=False)
        try:
            sources = [Path(f).read_text(errors="replace") for f in self.files]
        except OSError:
            return replace(self, handles=None)
        return replace(self, handles=any(f'"{plural}"' in s or f"'{plural}'" in s or kind in s for s in sources))


def kopf_command(argv: list[str]) -> list[str] | None:
    """The arguments after ``kopf run`` if ``argv`` runs kopf (``kopf run ...``, ``python -m kopf run ...``)."""
    for i, arg in enumerate(argv[:-1]):
        if Path(arg).name == "kopf" and argv[i + 1] == "run":
            return argv[i + 2:]
    return None


def kopf_processes(server: str, proc: Path = Path("/proc")) -> list[SeenOperator]:
    """``kopf run`` processes on this machine whose kubeconfig's server is ``server``."""
    found = []
    server = server.rstrip("/")
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            args = kopf_command(argv)
            if args is None:
                continue
            environ = dict(item.split("=", 1) for item in
                           (entry / "environ").read_bytes().decode(errors="replace").split("\0") if "=" in item)
        except OSError:  # gone meanwhile, or another user's
            continue
        config = environ.get("KUBECONFIG", "").split(os.pathsep)[0] or str(
            Path(environ.get("HOME", "~")).expanduser() / ".kube" / "config")
        if kubeconfig.server(Path(config)) != server:
            continue
        files = [a for a in args if a.endswith(".py")] or [a for a in args if not a.startswith("-")]
        try:  # a relative path is relative to the process's working directory
            cwd = (entry / "cwd").resolve()
        except OSError:
            cwd = Path("/")
        found.append(SeenOperator(where=f"process {entry.name} on this machine",
                                  what="kopf run " + " ".join(files), running=True,
                                  files=tuple(str(cwd / f) for f in files if f.endswith(".py"))))
    return found


def operator_for(group: str, plural: str) -> str | None:
    """Which of ``operators/`` handles ``plural.group`` (by its ``GROUP`` and ``PLURAL``), if one does."""
    for name in operators.operator_names():
        module = operators.load_module(name)
        if getattr(module, "GROUP", None) == group and getattr(module, "PLURAL", None) == plural:
            return name
    return None


def deployment_of(name: str) -> tuple[str, str]:
    """``(namespace, name)`` of the Deployment ``operators/<name>/deploy/`` makes."""
    deploy = paths.operators_dir() / name / "deploy"
    namespace = yaml.safe_load((deploy / "kustomization.yaml").read_text())["namespace"]
    return namespace, yaml.safe_load((deploy / "deployment.yaml").read_text())["metadata"]["name"]


def deployed(api_client: Any, name: str) -> SeenOperator | None:
    """Our operator ``name`` deployed in the cluster (``make deploy``), if its Deployment exists."""
    namespace, deployment = deployment_of(name)
    found = get_or_none(api_client, f"/apis/apps/v1/namespaces/{namespace}/deployments/{deployment}")
    if found is None:
        return None
    ready = int((found.get("status") or {}).get("readyReplicas") or 0)
    wanted = int((found.get("spec") or {}).get("replicas") or 0)
    return SeenOperator(where=f"Deployment {namespace}/{deployment}", what=f"{ready}/{wanted} replicas ready",
                        running=ready > 0, handles=True)
