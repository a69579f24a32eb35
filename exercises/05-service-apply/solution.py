"""Reference solution: a Website's Service by server-side apply, owned by the Website."""

from kubernetes import client

MANAGER = "website-operator"
APPLY_PATCH = "application/apply-patch+yaml"  # this content type makes a PATCH an apply


def apply_service(core: client.CoreV1Api, website: dict) -> None:
    meta = website["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    port = (website.get("spec") or {}).get("port", 80)
    owner = {"apiVersion": website["apiVersion"], "kind": website["kind"], "name": name, "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": port, "targetPort": "http"}]},
    }
    # The whole desired object, every time: the server merges it, owns exactly these fields
    # for MANAGER, leaves other managers' fields alone, and writes nothing when nothing differs.
    core.patch_namespaced_service(name, namespace, service, field_manager=MANAGER, force=True,
                                  _content_type=APPLY_PATCH)
