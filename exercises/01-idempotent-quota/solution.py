"""Reference solution: the quota half of an idempotent reconcile (read, compare as quantities, write the difference)."""

from kubernetes import client
from kubernetes.utils import parse_quantity

NAME = "tenant-quota"


def ensure_quota(core: client.CoreV1Api, namespace: str, cpu: str) -> bool:
    want = {"requests.cpu": str(cpu), "limits.cpu": str(cpu)}
    try:
        quota = core.read_namespaced_resource_quota(NAME, namespace)
    except client.ApiException as e:
        if e.status != 404:
            raise
        core.create_namespaced_resource_quota(namespace, {"metadata": {"name": NAME}, "spec": {"hard": want}})
        return True
    hard = (quota.spec.hard if quota.spec else None) or {}
    # As quantities: the API stores "0.5" as "500m", the same amount.
    if all(key in hard and parse_quantity(hard[key]) == parse_quantity(value) for key, value in want.items()):
        return False
    core.patch_namespaced_resource_quota(NAME, namespace, {"spec": {"hard": want}})
    return True
