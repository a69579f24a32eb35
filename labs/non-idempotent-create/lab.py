"""non-idempotent-create: a handler that only ever creates crashes with 409 after a restart."""

from __future__ import annotations

from operatorlab.faults.variants import ReplaceFunction
from operatorlab.labs import Check, checks
from operatorlab.labs.tenantlab import VariantLab

TENANT = "lab-nic-green"

# The real _get_or_create reads first and treats a 409 on create as "someone made it: read theirs".
# The variant just creates: fine the first time, a 409 every time after.
EDITS = (ReplaceFunction("_get_or_create", '''\
def _get_or_create(read: Callable[[], Any], create: Callable[[], Any]) -> tuple[Any, bool]:
    """Create an object; return (object, created)."""
    return create(), True
'''),)


class NonIdempotentCreate(VariantLab):
    title = "Create is not reconcile"
    summary = "after a restart every reconcile fails with 409 AlreadyExists: make the create idempotent"
    drill = True
    edits = EDITS
    hints = (
        "The quota does not follow the Tenant's spec any more. What does the Tenant's status (kopf's progress) and "
        "the operator's log say about each attempt?",
        "409 AlreadyExists: the reconcile tries to create something that exists since its first run. A reconcile "
        "must be safe to run any number of times (idempotent).",
        "In labs/non-idempotent-create/tenant_operator.py, make _get_or_create read first (create only on 404) "
        "and treat a 409 on create as 'it exists: read it'. kopf waits out the 60 s backoff it recorded (annotation "
        "kopf.zalando.org/reconcile): wait a minute, or remove that annotation and status.kopf.progress.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(TENANT, "1")

    def inject(self) -> None:
        self.write_variant()
        self.start_variant()
        self.tenants.patch_spec(TENANT, cpuQuota="2")

    def check(self) -> list[Check]:
        return [checks.tenant_reconciled(self.api, TENANT)]

    def solve(self) -> None:
        self.write_fixed()
        self.operator().stop()
        # kopf recorded "retry in 60 s" (annotation kopf.zalando.org/reconcile and status.kopf.progress);
        # the fixed operator would honour it. Forget the failed attempts: the fix makes them moot.
        self.custom.patch_cluster_custom_object(*checks.TENANTS, TENANT,
                                                {"metadata": {"annotations": {"kopf.zalando.org/reconcile": None}}})
        self.custom.patch_cluster_custom_object_status(*checks.TENANTS, TENANT,
                                                       {"status": {"kopf": {"progress": None}}})
        self.start_variant()
