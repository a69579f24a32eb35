"""delete-404: a delete handler that fails when what it would delete is gone already."""

from __future__ import annotations

import json
from collections.abc import Iterator

from operatorlab import tenants
from operatorlab.faults.variants import ReplaceFunction
from operatorlab.labs import Check, checks, probes, reactions
from operatorlab.labs.tenantlab import VariantLab
from operatorlab.wait import eventually

TENANT = "lab-d4-plum"
HANDLER = "delete-namespace"  # the delete handler's id, which names kopf's record of its progress
BUDGET = 20.0  # seconds the operator gets to converge a probe Tenant, or to let it go
NAMESPACE_GONE = 60.0  # seconds the namespace controller gets to finish deleting a probe's namespace

# A "simplified" delete handler: read the namespace, check it is the Tenant's, delete it.
# The read raises ApiException 404 when the namespace is gone already, and kopf retries an
# arbitrary exception (every 60 s by default), holding its finalizer meanwhile.
BROKEN_DELETE = '''\
def delete(name: str, meta: kopf.Meta, logger: kopf.Logger, **_: Any) -> None:
    """Delete the tenant's namespace before the Tenant goes (kopf's finalizer), if it is the Tenant's."""
    core = _core()
    namespace = _as_dict(core.read_namespace(name=namespace_name(name)))
    if not _owned_by_tenant(namespace.get("metadata") or {}, name, meta["uid"]):
        logger.info(f"the namespace of tenant {name!r} is not this Tenant's: nothing deleted")
        return
    core.delete_namespace(name=namespace_name(name))
    logger.info(f"deleted namespace of tenant {name!r}")
'''


class Delete404(VariantLab):
    title = "Nothing left to delete"
    summary = "a deleted Tenant stays Terminating for ever while its operator runs"
    settle = 0.0  # each check run probes fresh Tenants itself, waiting as it goes
    edits = (ReplaceFunction("delete", BROKEN_DELETE),)
    hints = (
        f"kubectl get tenant {TENANT} -o yaml: what is Kubernetes waiting for before the Tenant can go, and what "
        "does kopf say about its progress? The operator's log says more: operatorlab lab logs delete-404.",
        f"Namespace tenant-{TENANT} was deleted by hand before the Tenant. What does the delete handler in "
        "labs/delete-404/tenant_operator.py do when the object it wants to delete is not there, and what does "
        "kopf do with a handler that raises?",
        "A delete handler's goal is \"the namespace is gone\", and a 404 means it is reached: treat 404 as "
        "done, as delete_tenant_namespace() in operators/tenant/tenant_operator.py does; a finalizer stripped "
        "by hand fixes one Tenant, not the operator. labs/delete-404/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(TENANT, "1")

    def inject(self) -> None:
        # The simplified release rolls out; someone tidies up by deleting the tenant's namespace
        # by hand, then deletes the Tenant.
        self.write_variant()
        self.start_variant()
        self.core.delete_namespace(tenants.namespace_of(TENANT))
        eventually(lambda: tenants.namespace_of(TENANT) not in self.tenants.namespaces(), timeout=NAMESPACE_GONE,
                   message=f"lab {self.id}: namespace tenant-{TENANT} deleted by hand")
        self.tenants.delete(TENANT)
        eventually(lambda: _retried(self.tenants.get(TENANT)), timeout=30,
                   message=f"lab {self.id}: the delete handler of Tenant {TENANT} failed")

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield self._goes_without_its_namespace()
        yield probes.tenant_lifecycle(self, "lab-d4-life", budget=BUDGET,
                                      label="a Tenant with its namespace still converges (created, changed, deleted)")

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant()

    def _goes_without_its_namespace(self) -> Check:
        """A fresh Tenant whose namespace someone deleted first is itself deleted within the budget."""
        label = "a Tenant whose namespace is gone already can be deleted"
        with reactions.probe_tenant(self, "lab-d4-gone") as name:
            namespace = tenants.namespace_of(name)
            if not probes.wait(lambda: checks.tenant_reconciled(self.api, name).passed, BUDGET):
                return Check(label, False, f"Tenant {name} did not converge within {BUDGET:g} s: "
                                           f"{checks.tenant_reconciled(self.api, name).message}")
            self.core.delete_namespace(namespace)
            if reactions.gone_within(lambda: namespace in self.tenants.namespaces(), NAMESPACE_GONE) is None:
                return Check(label, False, f"namespace {namespace}, deleted by the check, was not gone within "
                                           f"{NAMESPACE_GONE:g} s (kubectl get ns {namespace} -o yaml): "
                                           f"is the cluster's controller-manager running?")
            self.tenants.delete(name)
            seconds = reactions.gone_within(lambda: name in self.tenants.names(), BUDGET)
            if seconds is None:
                evidence = _attempts(self.tenants.get(name))
                return Check(label, False, f"Tenant {name}, deleted {BUDGET:g} s after its namespace {namespace} "
                                           f"was, is still there: {checks.tenant_not_stuck(self.api, name).message}; "
                                           f"{evidence}. The operator's log: operatorlab lab logs {self.id}")
        return Check(label, True, f"Tenant {name} gone {seconds:.1f} s after its delete")


def _progress(tenant: dict) -> dict:
    """kopf's record of the delete handler's attempts: an annotation ``kopf.zalando.org/<handler id>``.

    kopf 1.45.2's default ``SmartProgressStorage`` writes it to annotations only (it reads
    ``status.kopf.progress`` but no longer writes it: ``NoWriteStatusProgressStorage``).
    """
    raw = (tenant["metadata"].get("annotations") or {}).get(f"kopf.zalando.org/{HANDLER}")
    return json.loads(raw) if raw else {}


def _retried(tenant: dict) -> bool:
    """Whether kopf recorded a failed attempt of the delete handler (it will retry it)."""
    return bool(_progress(tenant).get("retries"))


def _attempts(tenant: dict) -> str:
    """The delete handler's attempts as kopf recorded them, for a failing check's message."""
    progress = _progress(tenant)
    if not progress:
        return f"no kopf.zalando.org/{HANDLER} annotation (the delete handler has not failed yet)"
    first_lines = " ".join(str(progress.get("message") or "").split("\n")[:2])
    return (f"annotation kopf.zalando.org/{HANDLER}: retries={progress.get('retries')}, "
            f"delayed until {progress.get('delayed')}, message {first_lines!r}")
