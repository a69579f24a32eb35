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
            conditions = (crd.status.conditions if crd.status else None) or []  # no status yet: not established
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                pending.discard(name)
        if pending:
            time.sleep(0.2)
    if pending:
        raise TimeoutError(f"CRDs not established after {timeout:.0f}s: {', '.join(sorted(pending))}")


def wait_crds_served(api_client, crds: Iterable[dict], *, timeout: float = 60.0) -> None:
    """Block until the watch cache of every served version of each CRD answers a LIST.

    ``Established=True`` only says the API server's discovery knows the
    resource. Its watch cache may still be starting: for a moment after a CRD
    is (re)applied or the API server (re)starts, a LIST or WATCH served from
    the cache waits for it, and under load is answered ``429 storage is
    (re)initializing``. An operator started then logs that as an ERROR on its
    first LIST. ``resourceVersion=0`` asks for the cache's answer (any
    resourceVersion will do), so a prompt 200 means the cache is ready; waiting
    here keeps a learner's first log clean.

    Raises:
        TimeoutError: a resource was not served within ``timeout`` seconds
            (the last API error says why).
        kubernetes.client.ApiException: an error waiting cannot cure (e.g. 403).
    """
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)
    pending = {
        (crd["spec"]["group"], version["name"], crd["spec"]["names"]["plural"])
        for crd in crds for version in crd["spec"]["versions"] if version.get("served", True)
    }
    deadline = time.monotonic() + timeout
    last_error = ""
    while pending:
        for group, version, plural in sorted(pending):
            try:
                # Across all namespaces for a namespaced resource too.
                custom.list_cluster_custom_object(group, version, plural, resource_version="0")
            except client.ApiException as e:
                if e.status not in (404, 429, 503):  # not yet routed, storage starting, not yet ready
                    raise
                last_error = f"{plural}.{group}/{version}: {e.status} {e.reason}"
            else:
                pending.discard((group, version, plural))
        if pending:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"CRDs not served after {timeout:.0f}s: {last_error}")
            time.sleep(0.2)


def apply_crds(api_client, directory: Path) -> list[str]:
    """Apply every CRD in ``directory`` and wait until the apiserver serves them.

    Served means Established *and* listable (:func:`wait_crds_served`), so an
    operator started right after ``operatorlab cluster up`` finds them ready.
    """
    crds = [o for o in load(directory) if o.get("kind") == "CustomResourceDefinition"]
    applied = apply(api_client, crds)
    wait_crds_established(api_client, [c["metadata"]["name"] for c in crds])
    wait_crds_served(api_client, crds)
    return applied
