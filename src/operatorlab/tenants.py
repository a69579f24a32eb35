"""Tenants from the client's side: create, inspect and clean up ``hedronite.io/v1`` Tenants.

Notebooks, labs and tests all manipulate Tenants the same way through
:class:`Tenants`, so "delete it and wait until it and its namespace are really
gone" is written once. (The operator's own logic lives in ``operators/tenant``.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from operatorlab.operators import constants, load_module
from operatorlab.wait import eventually

# The Tenant's names are the operator's own (operators/tenant/tenant_operator.py): read
# from it, never spelled again, so no lab, check, test or benchmark can drift from what
# the operator does. Read as literals: importing the operator imports kopf, which only
# namespace_of needs.
_constants = constants("tenant")
GROUP: str = str(_constants["GROUP"])
VERSION: str = str(_constants["VERSION"])
PLURAL: str = str(_constants["PLURAL"])
#: The label on a Tenant's namespace and quota; its value is the Tenant's name.
TENANT_LABEL: str = str(_constants["TENANT_LABEL"])
#: The name of the ResourceQuota in a Tenant's namespace.
QUOTA_NAME: str = str(_constants["QUOTA_NAME"])


def namespace_of(name: str) -> str:
    """A Tenant's namespace, ``tenant-<name>``, by the operator's own rule.

    Raises:
        ValueError: ``name`` cannot make a namespace name (the operator refuses such a Tenant).
    """
    return str(load_module("tenant").namespace_name(name))


def manifest(name: str, cpu_quota: str | int, display_name: str | None = None) -> dict[str, Any]:
    """A Tenant object as a dict, ready to create."""
    spec: dict[str, Any] = {"cpuQuota": cpu_quota}
    if display_name:
        spec["displayName"] = display_name
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Tenant", "metadata": {"name": name}, "spec": spec}


class Tenants:
    """Tenant operations on one cluster.

    Args:
        api_client: a ``kubernetes.client.ApiClient``; default: the current kubeconfig.
    """

    def __init__(self, api_client=None) -> None:
        from kubernetes import client, config

        if api_client is None:
            api_client = config.new_client_from_config()
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    def create(self, name: str, cpu_quota: str | int, display_name: str | None = None) -> dict[str, Any]:
        """Create a Tenant. Raises ``ApiException`` (409 exists, 422 refused by the schema)."""
        return _json_object(
            self.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, manifest(name, cpu_quota, display_name))
        )

    def get(self, name: str) -> dict[str, Any]:
        return _json_object(self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name))

    def status(self, name: str) -> dict[str, Any]:
        """The Tenant's status (``{}`` before the operator wrote any)."""
        status: dict[str, Any] = self.get(name).get("status") or {}
        return status

    def phase(self, name: str) -> str | None:
        phase = self.status(name).get("phase")
        return phase if isinstance(phase, str) else None

    def patch_spec(self, name: str, **spec: Any) -> dict[str, Any]:
        """Merge-patch fields of ``spec``, e.g. ``patch_spec("acme", cpuQuota="2")``."""
        return _json_object(self.custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"spec": spec}))

    def names(self) -> set[str]:
        listed = _json_object(self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL))
        return {t["metadata"]["name"] for t in listed["items"]}

    def namespaces(self) -> set[str]:
        """Names of all namespaces (Tenant or not), to check what exists."""
        # The API always names a stored object; the client's model leaves metadata optional.
        return {n.metadata.name for n in self.core.list_namespace().items if n.metadata and n.metadata.name}

    def quota(self, name: str) -> dict[str, str]:
        """``spec.hard`` of the tenant's ResourceQuota (``{}`` if it sets none).

        Raises ``ApiException`` 404 if absent.
        """
        quota = self.core.read_namespaced_resource_quota(QUOTA_NAME, namespace_of(name))
        return dict(quota.spec.hard or {}) if quota.spec else {}

    def delete(self, name: str, *, missing_ok: bool = True) -> None:
        """Ask the API server to delete a Tenant (its finalizer may hold it until the operator acts)."""
        from kubernetes import client

        try:
            self.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except client.ApiException as e:
            if not (missing_ok and e.status == 404):
                raise

    def remove(self, names: Iterable[str], *, force: bool = False, timeout: float = 120.0) -> None:
        """Delete Tenants and their namespaces, and wait until all are really gone.

        Args:
            force: strip finalizers first, for when no operator runs to honour them.
                This skips the operator's cleanup: we delete the namespaces ourselves.
            timeout: seconds to wait for the Tenants and namespaces to disappear.

        Raises:
            AssertionError: something still exists after ``timeout`` s.
        """
        from kubernetes import client

        names = list(names)
        for name in names:
            try:
                if force:
                    self.custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name,
                                                            {"metadata": {"finalizers": None}})
                self.delete(name)
            except client.ApiException as e:
                if e.status != 404:
                    raise
            if force:
                try:
                    self.core.delete_namespace(namespace_of(name))
                except client.ApiException as e:
                    if e.status != 404:
                        raise

        def all_gone() -> bool:
            left = self.names() | self.namespaces()
            return not any(n in left or namespace_of(n) in left for n in names)

        eventually(all_gone, timeout=timeout, message=f"Tenants {names} and their namespaces deleted")


def _json_object(result: object) -> dict[str, Any]:
    """A custom-object call's result, which the client types as ``object``: the decoded JSON object.

    Raises TypeError if it is not one (a client that stopped decoding responses).
    """
    if not isinstance(result, dict):
        raise TypeError(f"expected a JSON object from the API, got {type(result).__name__}")
    return result
