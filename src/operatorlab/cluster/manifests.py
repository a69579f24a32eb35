"""Apply YAML manifests the way ``kubectl apply --server-side`` does, from Python.

Server-side apply (https://kubernetes.io/docs/reference/using-api/server-side-apply/)
is idempotent by design: applying the same file twice changes nothing, so
``make lab`` can re-apply ``crds/`` on every start.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import yaml

FIELD_MANAGER = "operatorlab"


def load(path: Path) -> list[dict]:
    """All non-empty documents of a YAML file, or of every ``*.yaml`` in a directory (sorted)."""
    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    return [doc for f in files for doc in yaml.safe_load_all(f.read_text()) if doc]


def apply(api_client, objects: Iterable[dict], *, dry_run: bool = False) -> list[str]:
    """Server-side apply each object; return ``kind/name`` of each.

    Raises:
        kubernetes.client.ApiException: the apiserver refused an object (e.g. 422 invalid).
    """
    from kubernetes.dynamic import DynamicClient

    dynamic = DynamicClient(api_client)
    applied = []
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        dynamic.server_side_apply(
            resource, body=obj, name=obj["metadata"]["name"], namespace=namespace,
            field_manager=FIELD_MANAGER, force_conflicts=True,
            **({"dry_run": "All"} if dry_run else {}),
        )
        applied.append(f"{obj['kind']}/{obj['metadata']['name']}")
    return applied


def wait_crds_established(api_client, names: Iterable[str], *, timeout: float = 60.0) -> None:
    """Block until each CRD (by ``plural.group`` name) has condition ``Established=True``.

    Raises:
        TimeoutError: a CRD was not established within ``timeout`` seconds.
    """
    from kubernetes import client

    ext = client.ApiextensionsV1Api(api_client)
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            crd = ext.read_custom_resource_definition(name)
            if any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or [])):
                pending.discard(name)
        if pending:
            time.sleep(0.2)
    if pending:
        raise TimeoutError(f"CRDs not established after {timeout:.0f}s: {', '.join(sorted(pending))}")


def apply_crds(api_client, directory: Path) -> list[str]:
    """Apply every CRD in ``directory`` and wait until the apiserver serves them."""
    crds = [o for o in load(directory) if o.get("kind") == "CustomResourceDefinition"]
    applied = apply(api_client, crds)
    wait_crds_established(api_client, [c["metadata"]["name"] for c in crds])
    return applied
