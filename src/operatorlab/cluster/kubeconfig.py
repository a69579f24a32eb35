"""Render and write kubeconfig files: the one place that knows their format.

Every kubeconfig the lab writes comes from here: the admin's and one per control-plane
component (client certificates), a ServiceAccount's (a token, for least-privilege
tests), the fault proxy's (plain HTTP on loopback, no credentials), and the drills' (a
user's client certificate; several contexts in one file, :func:`merged`). The format is
``clientcmd/api/v1`` (https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/).

Certificates are referenced by absolute path when they live beside the cluster (short,
readable in a notebook) or embedded (``certificate-authority-data``) when the file must
stand alone. A kubeconfig grants access, so :func:`write_config` creates it with mode 0600: it
is never readable by others, not even for the instant between create and chmod.
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml


def config(
    *,
    server: str,
    cluster: str,
    user: str,
    ca: Path | None = None,
    ca_data: bytes | None = None,
    cert: Path | None = None,
    key: Path | None = None,
    token: str | None = None,
    insecure: bool = False,
    context: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A one-context kubeconfig, as the dict :func:`render` dumps.

    Args:
        server: the API server URL, e.g. ``https://127.0.0.1:6443`` (or ``http://`` for a proxy).
        cluster: the cluster's name (and the context's, unless ``context`` names it).
        user: the user entry's name (informational: identity comes from ``cert`` or ``token``).
        ca: the CA bundle that signed the serving certificate, by path.
        ca_data: the same, embedded (for a file that must stand alone).
        cert, key: a client certificate and key, by path.
        token: a bearer token (e.g. a ServiceAccount's, from the TokenRequest API).
        insecure: skip verifying the server's certificate (only when the source kubeconfig did).
        context: the context's name (default: the cluster's).
        namespace: the context's namespace (what kubectl uses without ``-n``; default ``default``).
    """
    cluster_entry: dict[str, Any] = {"server": server}
    if ca is not None:
        cluster_entry["certificate-authority"] = str(ca)
    if ca_data is not None:
        cluster_entry["certificate-authority-data"] = base64.b64encode(ca_data).decode()
    if insecure:
        cluster_entry["insecure-skip-tls-verify"] = True
    user_entry: dict[str, Any] = {}
    if cert is not None and key is not None:
        user_entry.update({"client-certificate": str(cert), "client-key": str(key)})
    if token is not None:
        user_entry["token"] = token
    context_entry: dict[str, Any] = {"cluster": cluster, "user": user}
    if namespace is not None:
        context_entry["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": cluster_entry}],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": context or cluster, "context": context_entry}],
        "current-context": context or cluster,
        "preferences": {},
    }


def merged(configs: list[dict[str, Any]], *, current: str) -> dict[str, Any]:
    """One kubeconfig holding every cluster, user and context of ``configs`` (the first of a name
    wins, as kubectl merges the files of ``$KUBECONFIG``), with ``current`` as its current context."""
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                           "current-context": current, "preferences": {}}
    for part in configs:
        for section in ("clusters", "users", "contexts"):
            names = {e["name"] for e in out[section]}
            out[section] += [e for e in part[section] if e["name"] not in names]
    return out


def render(**fields: Any) -> str:
    """Return a one-context kubeconfig as YAML (``fields``: :func:`config`'s arguments)."""
    return yaml.safe_dump(config(**fields), sort_keys=False)


def write(path: Path, **fields: Any) -> Path:
    """Render with :func:`render` (``fields`` are its arguments) and write to ``path``, mode 0600."""
    return write_config(path, config(**fields))


def write_config(path: Path, kubeconfig: dict[str, Any]) -> Path:
    """Write the kubeconfig ``kubeconfig`` (a dict, e.g. from :func:`merged`) to ``path``, mode 0600.

    The file is written to a private temporary file beside ``path`` and renamed over it,
    so a reader sees the old file or the new one, never half of one, and never a moment
    of wider permissions.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(yaml.safe_dump(kubeconfig, sort_keys=False))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def server(path: Path) -> str | None:
    """The API server URL of the current context of the kubeconfig ``path`` (None if it names none).

    ``operatorlab why`` compares it with its own to tell which running operators talk to
    the same cluster. Reads any kubeconfig, not only ours; unreadable or malformed -> None.
    """
    try:
        config = yaml.safe_load(path.read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        return str(cluster["server"]).rstrip("/")
    except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration):
        return None
