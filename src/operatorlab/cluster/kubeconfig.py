"""Write kubeconfig files: the admin's for people and tools, one per component.

A kubeconfig here references the PKI files by absolute path rather than
embedding them, so it stays short and readable in a notebook. The format is
``clientcmd/api/v1`` (https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/).
"""

from __future__ import annotations

from pathlib import Path

import yaml


def render(*, server: str, ca: Path, cert: Path, key: Path, cluster: str, user: str) -> str:
    """Return a one-context kubeconfig as YAML.

    Args:
        server: the apiserver URL, e.g. ``https://127.0.0.1:6443``.
        ca: the CA bundle that signed the serving certificate.
        cert, key: the client certificate and key that identify ``user``.
        cluster: the cluster (and context) name.
        user: the user entry's name (informational; identity comes from ``cert``).
    """
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write(path: Path, **fields) -> Path:
    """Render with :func:`render` and write to ``path`` (mode 0600, since it grants access)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(**fields))
    path.chmod(0o600)
    return path
