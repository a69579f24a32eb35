"""Run ``kubectl`` from Python (notebooks and labs), against the current cluster.

Uses the kubectl built with the local control plane (``$KUBEBUILDER_ASSETS``)
when there is one, so versions match; otherwise whatever ``kubectl`` is on PATH.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path


def executable() -> str:
    """Path of the kubectl to use.

    Raises:
        FileNotFoundError: no kubectl anywhere (the message says how to get one).
    """
    if (assets := os.environ.get("KUBEBUILDER_ASSETS")) and (Path(assets) / "kubectl").is_file():
        return str(Path(assets) / "kubectl")
    if found := shutil.which("kubectl"):
        return found
    raise FileNotFoundError("no kubectl: run `make setup` (builds one) or install kubectl")


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
