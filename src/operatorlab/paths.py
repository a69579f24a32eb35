"""Where things live: the source checkout, the binary cache and cluster state.

Everything the lab writes outside the checkout lives under one cache root,
``$OPERATORLAB_CACHE`` (default ``${XDG_CACHE_HOME:-~/.cache}/operatorlab``):

- ``<root>/<kubernetes-version>/bin/``  the control-plane binaries (``controlplane/build.sh``)
- ``<root>/clusters/<name>/``           one local cluster's whole state (pki, etcd data, logs)
"""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The source checkout: the directory holding ``crds/``, ``operators/`` and ``controlplane/``.

    ``$OPERATORLAB_REPO`` overrides it (for an installed package run elsewhere).

    Raises:
        FileNotFoundError: no checkout is found above this file and none is configured.
    """
    if env := os.environ.get("OPERATORLAB_REPO"):
        return Path(env).resolve()
    for parent in Path(__file__).resolve().parents:
        if (parent / "controlplane" / "build.sh").is_file() and (parent / "crds").is_dir():
            return parent
    raise FileNotFoundError(
        "cannot find the Operator Lab checkout (crds/, controlplane/); set OPERATORLAB_REPO to it"
    )


def cache_root() -> Path:
    """The per-user cache root (not inside the checkout, survives ``git clean``)."""
    if env := os.environ.get("OPERATORLAB_CACHE"):
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "operatorlab"


def crds_dir() -> Path:
    return repo_root() / "crds"


def operators_dir() -> Path:
    return repo_root() / "operators"
