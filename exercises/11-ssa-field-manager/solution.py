"""Reference solution: apply only the field this manager owns, under its own name, and never force."""

from kubernetes import client
from kubernetes.client.rest import ApiException

MANAGER = "sizer"
APPLY_PATCH = "application/apply-patch+yaml"  # this content type makes a PATCH a server-side apply


def set_size(core: client.CoreV1Api, namespace: str, name: str, size: int) -> bool:
    # Only what this manager means to own: the server merges it with the other managers' fields.
    intent = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
              "data": {"size": str(size)}}
    try:
        core.patch_namespaced_config_map(name, namespace, intent, field_manager=MANAGER,
                                         _content_type=APPLY_PATCH)
    except ApiException as e:
        if e.status == 409:  # another manager owns data.size: leave it to them, say so
            return False
        raise
    return True
