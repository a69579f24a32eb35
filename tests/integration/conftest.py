"""Fixtures for the integration tests; the cluster fixtures are in tests/conftest.py.

``tenant_set``: Tenants for controller tests on the real cluster -- create,
change, check convergence, clean up. Tenants are cluster-scoped and every
Tenant controller reconciles all of them, so every test using it runs in the
xdist group "tenant-operator".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.utils import parse_quantity

from operatorlab import tenants
from operatorlab.tenants import Tenants
from operatorlab.wait import eventually


class TenantSet(Tenants):
    """The Tenants one test makes, with convergence checks; :meth:`cleanup` removes them.

    Args:
        api_client: the cluster.
        suffix: makes this test's names unique (the ``unique`` fixture).
    """

    def __init__(self, api_client, suffix: str) -> None:
        super().__init__(api_client)
        self.suffix = suffix
        self.created: list[str] = []

    @staticmethod
    def namespace_of(tenant: str) -> str:
        """The Tenant's namespace, by the operator's own rule (``tenant-<name>``)."""
        return tenants.namespace_of(tenant)

    def name(self, label: str | int) -> str:
        """A name unique to this test: ``ctl-<suffix>-<label>``."""
        return f"ctl-{self.suffix}-{label}"

    def create(self, name: str, cpu_quota: str | int = "1", display_name: str | None = None) -> dict:
        self.created.append(name)
        return super().create(name, cpu_quota, display_name or f"test tenant {name}")

    def set_cpu(self, name: str, cpu: str) -> dict:
        return self.patch_spec(name, cpuQuota=cpu)

    def find(self, name: str) -> dict | None:
        """The Tenant, or None if it does not exist."""
        try:
            return self.get(name)
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise

    def converged(self, name: str, cpu: str) -> bool:
        """The namespace exists (not Terminating, labelled) and its quota caps CPU at ``cpu``."""
        namespace = self.namespace_of(name)
        try:
            ns = self.core.read_namespace(namespace)
            quota = self.core.read_namespaced_resource_quota(tenants.QUOTA_NAME, namespace)
        except client.ApiException as e:
            if e.status == 404:
                return False
            raise
        hard = (quota.spec.hard if quota.spec else None) or {}
        return (
            ns.metadata.deletion_timestamp is None
            and (ns.metadata.labels or {}).get(tenants.TENANT_LABEL) == name
            and all(
                k in hard and parse_quantity(hard[k]) == parse_quantity(cpu) for k in ("requests.cpu", "limits.cpu")
            )
        )

    def wait_converged(self, names: list[str], cpu: str | dict[str, str], timeout: float = 60.0) -> None:
        """Wait until every Tenant in ``names`` is :meth:`converged` (``cpu``: one for all, or per name)."""
        wanted = cpu if isinstance(cpu, dict) else dict.fromkeys(names, cpu)
        eventually(lambda: all(self.converged(n, wanted[n]) for n in names), timeout=timeout,
                   message=f"tenants converged: {[n for n in names if not self.converged(n, wanted[n])]} are not")

    def namespace_gone(self, name: str) -> bool:
        try:
            self.core.read_namespace(self.namespace_of(name))
        except client.ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    def namespace_gone_or_terminating(self, name: str) -> bool:
        try:
            ns = self.core.read_namespace(self.namespace_of(name))
        except client.ApiException as e:
            if e.status == 404:
                return True
            raise
        return ns.metadata.deletion_timestamp is not None

    def delete_namespace(self, name: str) -> None:
        try:
            self.core.delete_namespace(self.namespace_of(name))
        except client.ApiException as e:
            if e.status != 404:
                raise

    def cleanup(self) -> None:
        """Delete every Tenant made (stripping finalizers a stopped kopf operator left) and its namespace.

        Waits for the Tenants to be gone; their namespaces may still be Terminating.
        """
        for name in self.created:
            try:
                self.custom.patch_cluster_custom_object(
                    tenants.GROUP, tenants.VERSION, tenants.PLURAL, name, {"metadata": {"finalizers": None}}
                )
            except client.ApiException as e:
                if e.status != 404:
                    raise
            self.delete(name)
            self.delete_namespace(name)
        eventually(lambda: all(self.find(n) is None for n in self.created), timeout=30, message="test tenants deleted")


@pytest.fixture
def tenant_set(api_client, unique) -> Iterator[TenantSet]:
    """Make Tenants for one test; all removed (with their namespaces) afterwards."""
    made = TenantSet(api_client, unique)
    yield made
    made.cleanup()
