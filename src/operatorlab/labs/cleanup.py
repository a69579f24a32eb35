"""Undo a lab: stop its processes, delete the objects and files it recorded, wait until gone.

Objects are deleted through the kubernetes dynamic client (discovery maps each recorded
``apiVersion`` + ``kind`` to its resource), so a lab may track any kind, a custom
resource included, without a branch here for it.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

from operatorlab.labs.state import LabState, TrackedObject
from operatorlab.wait import eventually


def stop_processes(state: LabState) -> None:
    """Stop every process ``state`` records (if still that very process) and delete its log.

    First, so no operator re-creates what is being deleted.
    """
    for rec in state.processes.values():
        rec.identity.stop(timeout=10)
        Path(rec.log).unlink(missing_ok=True)


def remove_files(state: LabState) -> None:
    for path in state.files:
        Path(path).unlink(missing_ok=True)


def delete_objects(api: client.ApiClient, objects: list[TrackedObject], *, discovery_cache: Path, what: str,
                   timeout: float = 90.0) -> None:
    """Delete ``objects``, newest first, and wait (up to ``timeout`` s) until they are gone.

    Each object's finalizers are removed before the delete, because the operator that
    would honour them is stopped and the lab's objects must go regardless. (A lab reset is
    the one place where skipping an operator's cleanup is right: the lab tracked what that
    cleanup would have deleted, and deletes it too.)
    """
    dynamic = DynamicClient(api, cache_file=str(discovery_cache))
    for obj in reversed(objects):
        _delete(_resource(dynamic, obj), obj)

    def gone() -> bool:
        return not any(_exists(_resource(dynamic, obj), obj) for obj in objects)

    eventually(gone, timeout=timeout, message=f"{what}: {', '.join(map(str, objects))} gone")


def _resource(dynamic: DynamicClient, obj: TrackedObject) -> Resource | None:
    """The API resource serving ``obj``'s kind; None if the API serves it no more (its CRD went)."""
    try:
        return dynamic.resources.get(api_version=obj.api_version, kind=obj.kind)
    except ResourceNotFoundError:
        return None


def _delete(resource: Resource | None, obj: TrackedObject) -> None:
    if resource is None:
        return
    try:
        if resource.get(name=obj.name, namespace=obj.namespace).metadata.finalizers:
            resource.patch(body={"metadata": {"finalizers": None}}, name=obj.name, namespace=obj.namespace,
                           content_type="application/merge-patch+json")
        resource.delete(name=obj.name, namespace=obj.namespace)
    except NotFoundError:
        pass


def _exists(resource: Resource | None, obj: TrackedObject) -> bool:
    if resource is None:
        return False
    try:
        resource.get(name=obj.name, namespace=obj.namespace)
    except NotFoundError:
        return False
    return True
