"""Lesson 14's storage migration: every object of a CRD written again in its storage version, then recorded.

What the kube-storage-version-migrator does (and the built-in ``StorageVersionMigration`` of
``storagemigration.k8s.io``, where it is served): read each object and write it back unchanged. The API
server stores what it writes in the CRD's current storage version, so afterwards no object is left in
an older one, and ``status.storedVersions`` may say so: only then may that version leave ``spec.versions``.
"""

from collections.abc import Callable
from typing import Any, cast

from kubernetes import client


def migrate_storage(api_client: client.ApiClient, crd_name: str,
                    progress: Callable[[int, int], None] | None = None) -> int:
    """Rewrite every object of the CRD ``crd_name`` in its storage version; how many objects were rewritten."""
    extensions = client.ApiextensionsV1Api(api_client)
    objects = client.CustomObjectsApi(api_client)
    crd = extensions.read_custom_resource_definition(crd_name)
    group, plural = crd.spec.group, crd.spec.names.plural
    storage = next(v.name for v in crd.spec.versions if v.storage)
    listed = cast("dict[str, Any]", objects.list_cluster_custom_object(group, storage, plural))
    items = listed["items"]
    for done, obj in enumerate(items, 1):
        try:  # unchanged, guarded by its resourceVersion: the same object, written again
            objects.replace_cluster_custom_object(group, storage, plural, obj["metadata"]["name"], obj)
        except client.ApiException as e:
            if e.status not in (404, 409):  # deleted meanwhile; written meanwhile (so stored anew already)
                raise
        if progress:
            progress(done, len(items))
    # Every object is in the storage version now: the only one left to record.
    extensions.patch_custom_resource_definition_status(crd_name, {"status": {"storedVersions": [storage]}})
    return len(items)
