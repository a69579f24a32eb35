"""Undo a lab: stop its processes, delete the objects and files it recorded, wait until gone."""

from __future__ import annotations

from pathlib import Path

from operatorlab.labs.faults import stop_recorded
from operatorlab.wait import eventually

TENANTS = ("hedronite.io", "v1", "tenants")
BASELINES = ("hedronite.io", "v1alpha1", "namespacebaselines")


def undo(lab, *, timeout: float = 90.0) -> None:
    """Everything ``lab`` recorded in its state, removed; waits until the objects are gone."""
    from kubernetes import client

    data = lab.state.data
    for role, info in data.get("processes", {}).items():
        stop_recorded(info.get("pid"), info.get("started"), timeout=10)
        if info.get("log"):
            Path(info["log"]).unlink(missing_ok=True)
    for path in data.get("files", []):
        Path(path).unlink(missing_ok=True)

    custom = client.CustomObjectsApi(lab.api)
    core = client.CoreV1Api(lab.api)
    rbac = client.RbacAuthorizationV1Api(lab.api)
    apps = client.AppsV1Api(lab.api)
    objects = [tuple(o) for o in data.get("objects", [])]
    namespaces: list[str] = []
    tenants: list[str] = []
    for kind, name, namespace in reversed(objects):
        if kind == "tenant":
            _ignore_404(lambda: custom.patch_cluster_custom_object(*TENANTS, name, {"metadata": {"finalizers": None}}))
            _ignore_404(lambda: custom.delete_cluster_custom_object(*TENANTS, name))
            tenants.append(name)
            namespaces.append(f"tenant-{name}")
        elif kind == "nsb":
            _ignore_404(lambda: custom.patch_cluster_custom_object(*BASELINES, name, {"metadata": {"finalizers": None}}))
            _ignore_404(lambda: custom.delete_cluster_custom_object(*BASELINES, name))
        elif kind == "namespace":
            namespaces.append(name)
        elif kind == "clusterrole":
            _ignore_404(lambda: rbac.delete_cluster_role(name))
        elif kind == "clusterrolebinding":
            _ignore_404(lambda: rbac.delete_cluster_role_binding(name))
        elif kind == "serviceaccount":
            _ignore_404(lambda: core.delete_namespaced_service_account(name, namespace))
        elif kind == "deployment":
            _ignore_404(lambda: apps.delete_namespaced_deployment(name, namespace))
        else:
            raise ValueError(f"lab {lab.id}: do not know how to delete a {kind!r}")
    for name in namespaces:
        _ignore_404(lambda: core.delete_namespace(name))

    def gone() -> bool:
        left_tenants = {t["metadata"]["name"] for t in custom.list_cluster_custom_object(*TENANTS)["items"]}
        left_namespaces = {n.metadata.name for n in core.list_namespace().items}
        return not (set(tenants) & left_tenants) and not (set(namespaces) & left_namespaces)

    if tenants or namespaces:
        eventually(gone, timeout=timeout, message=f"lab {lab.id}: its Tenants {tenants} and namespaces {namespaces} gone")


def _ignore_404(call) -> None:
    from kubernetes import client

    try:
        call()
    except client.ApiException as e:
        if e.status != 404:
            raise
