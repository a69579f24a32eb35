"""drop-on-resume: an operator without on.resume never notices what changed while it was down."""

from __future__ import annotations

from operatorlab import tenants
from operatorlab.faults.variants import DropDecorator
from operatorlab.labs import Check, checks
from operatorlab.labs.tenantlab import VariantLab
from operatorlab.wait import eventually

TENANT = "lab-dor-blue"


class DropOnResume(VariantLab):
    title = "The gap on.resume closes"
    summary = "a namespace deleted while the operator was down never comes back: find the missing handler"
    drill = True
    edits = (DropDecorator("reconcile", "kopf.on.resume"),)
    hints = (
        "The Tenant still says Ready. Which of the operator's handlers would run for a Tenant whose spec did not "
        "change, after the operator restarts?",
        "Look at the decorators on reconcile() in labs/drop-on-resume/tenant_operator.py and compare them with "
        "operators/tenant/tenant_operator.py. kopf runs on.create once, on.update on a spec change...",
        "Add @kopf.on.resume(GROUP, VERSION, PLURAL, id=\"reconcile\") above the other two decorators and save: "
        "`operatorlab lab check drop-on-resume` restarts the operator from your file.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(TENANT, "1")

    def inject(self) -> None:
        # A "new release" of the operator (the variant) rolls out...
        self.write_variant()
        op = self.start_variant()
        # ...later it is down for a while (a node drain), and meanwhile someone deletes the namespace.
        op.stop()
        self.core.delete_namespace(tenants.namespace_of(TENANT))
        eventually(lambda: tenants.namespace_of(TENANT) not in self.tenants.namespaces(), timeout=60,
                   message="namespace deleted while the operator is down")
        self.start_variant()

    def check(self) -> list[Check]:
        return [checks.tenant_reconciled(self.api, TENANT)]

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant()
