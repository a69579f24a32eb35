"""Tenants for controller tests on the real cluster: create, change, check, clean up.

Shared by test_controllers.py, test_controllers_replay.py and test_conformance.py.
Tenants are cluster-scoped and every Tenant controller reconciles all of them,
so every test using these runs in the xdist group "tenant-operator".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.utils import parse_quantity

from operatorlab.wait import eventually

GROUP, VERSION, PLURAL = "hedronite.io", "v1", "tenants"
LABEL = "hedronite.io/tenant"
QUOTA = "tenant-quota"


def namespace_of(tenant: str) -> str:
    return f"tenant-{tenant}"


class Tenants:
    """The Tenants one test made; :meth:`cleanup` removes them and their namespaces."""

    def __init__(self, custom: client.CustomObjectsApi, core: client.CoreV1Api, suffix: str) -> None:
        self.custom = custom
        self.core = core
        self.suffix = suffix
        self.created: list[str] = []

    def name(self, label: str | int) -> str:
        """A name unique to this test: ``ctl-<suffix>-<label>``."""
        return f"ctl-{self.suffix}-{label}"

    def create(self, name: str, cpu: str = "1") -> dict:
        self.created.append(name)
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Tenant", "metadata": {"name": name},
                "spec": {"cpuQuota": cpu, "displayName": f"test tenant {name}"}}
        return self.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)

    def set_cpu(self, name: str, cpu: str) -> dict:
        return self.custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"spec": {"cpuQuota": cpu}})

    def get(self, name: str) -> dict | None:
        try:
            return self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise

    def delete(self, name: str) -> None:
        try:
            self.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except client.ApiException as e:
            if e.status != 404:
                raise

    def converged(self, name: str, cpu: str) -> bool:
        """The namespace exists (not Terminating, labelled) and its quota caps CPU at ``cpu``."""
        try:
            ns = self.core.read_namespace(namespace_of(name))
            quota = self.core.read_namespaced_resource_quota(QUOTA, namespace_of(name))
        except client.ApiException as e:
            if e.status == 404:
                return False
            raise
        hard = (quota.spec.hard if quota.spec else None) or {}
        return (
            ns.metadata.deletion_timestamp is None
            and (ns.metadata.labels or {}).get(LABEL) == name
            and all(k in hard and parse_quantity(hard[k]) == parse_quantity(cpu) for k in ("requests.cpu", "limits.cpu"))
        )

    def wait_converged(self, names: list[str], cpu: str | dict[str, str], timeout: float = 60.0) -> None:
        wanted = cpu if isinstance(cpu, dict) else dict.fromkeys(names, cpu)
        eventually(lambda: all(self.converged(n, wanted[n]) for n in names), timeout=timeout,
                   message=f"tenants converged: {[n for n in names if not self.converged(n, wanted[n])]} are not")

    def namespace_gone_or_terminating(self, name: str) -> bool:
        try:
            ns = self.core.read_namespace(namespace_of(name))
        except client.ApiException as e:
            if e.status == 404:
                return True
            raise
        return ns.metadata.deletion_timestamp is not None

    def namespace_gone(self, name: str) -> bool:
        try:
            self.core.read_namespace(namespace_of(name))
        except client.ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    def delete_namespace(self, name: str) -> None:
        try:
            self.core.delete_namespace(namespace_of(name))
        except client.ApiException as e:
            if e.status != 404:
                raise

    def cleanup(self) -> None:
        """Delete every Tenant made (stripping finalizers a stopped kopf operator left) and its namespace."""
        for name in self.created:
            try:
                self.custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"metadata": {"finalizers": None}})
            except client.ApiException as e:
                if e.status != 404:
                    raise
            self.delete(name)
            self.delete_namespace(name)
        eventually(lambda: all(self.get(n) is None for n in self.created), timeout=30, message="test tenants deleted")


@pytest.fixture
def tenants(custom, core, unique) -> Iterator[Tenants]:
    """Make Tenants for one test; all removed (with their namespaces) afterwards."""
    made = Tenants(custom, core, unique)
    yield made
    made.cleanup()
