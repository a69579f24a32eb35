"""stuck-finalizer: the operator is gone and a deleted Tenant hangs in Terminating."""

from __future__ import annotations

from operatorlab.labs import Check, checks
from operatorlab.labs.tenantlab import TenantLab

TENANT = "lab-sf-amber"


class StuckFinalizer(TenantLab):
    title = "Stuck in Terminating"
    summary = "a Tenant deleted while its operator is down never goes: fix it properly, not by force"
    drill = True
    hints = (
        "`kubectl get tenant lab-sf-amber -o yaml`: it has a deletionTimestamp. What is Kubernetes waiting for?",
        "metadata.finalizers names who must clean up first: kopf's marker, i.e. the Tenant operator, whose delete "
        "handler removes the tenant's namespace. Is that operator running?",
        "Start the operator again (`operatorlab operator run tenant`). Force-removing the finalizer also makes the "
        "Tenant go, but skips the cleanup: namespace tenant-lab-sf-amber would stay behind, orphaned.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(TENANT, "1")

    def inject(self) -> None:
        self.operator().kill()
        self.tenants.delete(TENANT)

    def check(self) -> list[Check]:
        return [checks.tenant_not_stuck(self.api, TENANT), checks.no_orphan_namespace(self.api, TENANT)]

    def solve(self) -> None:
        self.start_operator()
