"""What every hand-written controller shares: the Tenant reconcile it drives.

The three reference controllers (polling, list-watch, informer) differ only in
*when* they reconcile and *where they read the Tenant from*. What they do is the
same function the kopf Tenant operator runs, ``reconcile_tenant`` from
``operators/tenant/tenant_operator.py`` (loaded with
:func:`operatorlab.operators.load_module`), so a difference in behaviour or API
cost is the machinery's, never the reconcile's.

:class:`TenantReconciler` is that shared step, level-triggered: given a Tenant's
name and its current object (or ``None`` when it is gone) it makes the cluster
match, and counts what it did.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from kubernetes import client

from operatorlab.operators import load_module

__all__ = ["TenantReconciler", "is_being_deleted"]


@runtime_checkable
class TenantOperator(Protocol):
    """What this module uses of ``operators/tenant/tenant_operator.py``, typed.

    The operator file is loaded at run time (it is not a package), so its
    module object is untyped to mypy; this protocol states the functions the
    controllers rely on, and :class:`TenantReconciler` checks the loaded
    module against it once, when it starts.
    """

    TENANT_LABEL: str

    def reconcile_tenant(
        self, name: str, spec: Mapping[str, Any], *, uid: str, core: client.CoreV1Api | None = None
    ) -> dict[str, Any]: ...

    def delete_tenant_namespace(self, name: str, *, uid: str | None, core: client.CoreV1Api | None = None) -> bool: ...

    def namespace_name(self, tenant_name: str) -> str: ...


def is_being_deleted(obj: Mapping[str, Any]) -> bool:
    """True if the object has a ``metadata.deletionTimestamp`` (a finalizer still holds it)."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


class TenantReconciler:
    """Drives the Tenant operator's own reconcile for a hand-written controller.

    Args:
        api_client: every request goes through it (pass the controller's
            :class:`~operatorlab.controllers.metrics.CountingApiClient` so its
            reads and writes are counted).

    Thread-safe: several workers may call it at once (for different Tenants).
    Subclass it to inject a failure in a lesson or test; the API it talks to is
    always the real one.
    """

    def __init__(self, api_client: client.ApiClient) -> None:
        module = load_module("tenant")
        if not isinstance(module, TenantOperator):
            raise TypeError(
                f"{module.__file__} lacks one of reconcile_tenant, delete_tenant_namespace, namespace_name "
                f"or TENANT_LABEL, which the hand-written controllers call; restore it from git"
            )
        self.operator: TenantOperator = module
        self.core = client.CoreV1Api(api_client)
        self._lock = threading.Lock()
        self.reconciles = 0
        self.failures = 0
        self.cleanups = 0

    def sync(self, name: str, tenant: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Make the cluster match the Tenant ``name`` as it is now.

        ``tenant`` is its current object, or ``None`` if it no longer exists.
        A Tenant that exists and is not being deleted is reconciled (namespace
        and quota created or patched, only where they differ, and only if they
        are the Tenant's: see the operator's "Ownership"); one that is gone or
        being deleted has its namespace deleted, if that namespace is the
        Tenant's. The hand-written controllers put no finalizer on Tenants:
        that is the kopf operator's way. What a Tenant deleted while no
        controller ran leaves behind, the garbage collector removes, by the
        owner reference the reconcile puts on the namespace and the quota.

        Returns:
            The reconcile's status dict, or ``None`` after a cleanup.

        Raises:
            kopf.PermanentError: the Tenant can never work as written.
            kopf.TemporaryError: retrying later may succeed (429/5xx/403, the
                namespace is still Terminating, or its name is taken: the
                operator's ``NameTaken``).
            kubernetes.client.ApiException: any other API error.
        """
        if tenant is None or is_being_deleted(tenant):
            self.cleanup(name, uid=None if tenant is None else tenant["metadata"].get("uid"))
            return None
        return self.reconcile(tenant)

    def reconcile(self, tenant: Mapping[str, Any]) -> dict[str, Any]:
        """``reconcile_tenant(name, spec, uid=uid)`` for one Tenant object; see :meth:`sync` for errors."""
        with self._lock:
            self.reconciles += 1
        meta = tenant["metadata"]
        try:
            return self.operator.reconcile_tenant(
                meta["name"], tenant.get("spec") or {}, uid=meta["uid"], core=self.core
            )
        except Exception:
            with self._lock:
                self.failures += 1
            raise

    def cleanup(self, name: str, uid: str | None = None) -> bool:
        """Delete the namespace of a Tenant that is gone, if it is that Tenant's; return whether it did.

        ``uid`` is the Tenant's, if known (a Tenant being deleted); ``None``
        when the Tenant is gone: then the namespace must carry an owner
        reference naming a Tenant of that name. Already gone is fine.
        """
        with self._lock:
            self.cleanups += 1
        try:
            return self.operator.delete_tenant_namespace(name, uid=uid, core=self.core)
        except Exception:
            with self._lock:
                self.failures += 1
            raise

    def counters(self) -> dict[str, int]:
        """``reconciles``, ``failures`` and ``cleanups`` so far."""
        with self._lock:
            return {"reconciles": self.reconciles, "failures": self.failures, "cleanups": self.cleanups}

    def namespace_name(self, name: str) -> str:
        """The Tenant's namespace, ``tenant-<name>`` (ValueError if that is not a valid name)."""
        return self.operator.namespace_name(name)

    @property
    def tenant_label(self) -> str:
        """The label the reconcile puts on a Tenant's namespace (its value: the Tenant's name)."""
        return self.operator.TENANT_LABEL
