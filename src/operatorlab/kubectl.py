"""Run ``kubectl`` from Python (notebooks and labs), against the current cluster.

Uses the kubectl built with the local control plane (``$KUBEBUILDER_ASSETS``)
when there is one, so versions match; otherwise whatever ``kubectl`` is on PATH;
otherwise the one ``make`` built alone into the cache for a cluster someone else runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from operatorlab.cluster import binaries


def executable() -> str:
    """Path of the kubectl to use.

    Raises:
        FileNotFoundError: no kubectl anywhere (the message says how to get one).
    """
    if (assets := os.environ.get("KUBEBUILDER_ASSETS")) and (Path(assets) / "kubectl").is_file():
        return str(Path(assets) / "kubectl")
    if found := shutil.which("kubectl"):
        return found
    if (built := binaries.default_dir() / "kubectl").is_file():
        return str(built)
    raise FileNotFoundError(
        "no kubectl: run `make setup` (builds one; with OPERATORLAB_CLUSTER=existing only kubectl), "
        "or install one: https://kubernetes.io/docs/tasks/tools/"
    )


def _minor(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a Kubernetes version such as ``v1.36.3`` or ``v1.31.0+k3s1``."""
    match = re.match(r"v?(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"not a Kubernetes version: {version!r}")
    return int(match.group(1)), int(match.group(2))


def skew_warning(client: str, server: str) -> str | None:
    """A warning when kubectl and the API server are more than one minor version apart.

    Kubernetes' version skew policy supports kubectl "within one minor version (older
    or newer) of kube-apiserver" (https://kubernetes.io/releases/version-skew-policy/);
    beyond that, commands may fail or silently send fields the server does not know.
    """
    (client_major, client_minor), (server_major, server_minor) = _minor(client), _minor(server)
    if client_major == server_major and abs(client_minor - server_minor) <= 1:
        return None
    return (
        f"kubectl {client} is more than one minor version away from the API server {server}, "
        f"outside Kubernetes' version skew policy: install kubectl {server_major}.{server_minor} "
        "(https://kubernetes.io/docs/tasks/tools/) or put it first on PATH"
    )


def client_version() -> str:
    """The kubectl client's ``gitVersion`` (``kubectl version --client -o json``)."""
    result = subprocess.run([executable(), "version", "--client", "-o", "json"],
                            capture_output=True, text=True, check=True)
    return str(json.loads(result.stdout)["clientVersion"]["gitVersion"])


def kubectl(command: str | list[str], *, check: bool = True, echo: bool = True, stdin: str | None = None) -> str | None:
    """Run ``kubectl <command>``; print its output, or return it.

    Args:
        command: the arguments, as a shell-like string (``"get nodes -o wide"``) or a list.
        check: raise if kubectl exits non-zero (otherwise return its error output).
        echo: print the command and its output, as a terminal would, and return None
            (so a notebook shows it once); with ``echo=False`` return the output instead.
        stdin: text fed to kubectl (for ``apply -f -``).

    Raises:
        subprocess.CalledProcessError: kubectl failed and ``check`` is true (output included).
    """
    args = shlex.split(command) if isinstance(command, str) else list(command)
    result = subprocess.run([executable(), *args], input=stdin, capture_output=True, text=True)
    output = (result.stdout + result.stderr).rstrip("\n")
    if echo:
        shown = command.strip() if isinstance(command, str) else " ".join(shlex.quote(a) for a in args)
        print(f"$ kubectl {shown}\n{output}")
    if check and result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, ["kubectl", *args], output=output)
    return None if echo else output
