"""drop-on-resume: an operator without on.resume never notices what changed while it was down."""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab import tenants
from operatorlab.faults.variants import DropDecorator
from operatorlab.labs import Check, checks, probes
from operatorlab.labs.tenantlab import VariantLab
from operatorlab.wait import eventually

TENANT = "lab-dor-blue"


class DropOnResume(VariantLab):
    title = "The gap after a restart"
    summary = "a namespace deleted while the operator was down never comes back, and the Tenant still says Ready"
    drill = True
    settle = 0.0  # each check run probes the operator itself (stop, delete, start), waiting as it goes
    edits = (DropDecorator("reconcile", "kopf.on.resume"),)
    hints = (
        f"The Tenant {TENANT} still says Ready. Which of the operator's handlers would run for a Tenant whose spec "
        "did not change, after the operator restarts? (operatorlab lab logs drop-on-resume: what does the operator "
        "do with it at startup?)",
        "kopf runs on.create once, on.update on a spec change, and one more kind of handler for every object that "
        "exists when the operator starts. Compare the decorators on reconcile() in labs/drop-on-resume/"
        "tenant_operator.py with those in operators/tenant/tenant_operator.py.",
        "Add @kopf.on.resume(GROUP, VERSION, PLURAL, id=\"reconcile\") above the other two decorators of reconcile() "
        "and save: `operatorlab lab check drop-on-resume` restarts the lab's operator from your file. Making the "
        "namespace by hand, or removing kopf's annotations so that the Tenant looks new, is not a fix: "
        "labs/drop-on-resume/SOLUTION.md says why.",
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

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield probes.gap_closed_on_restart(self, "lab-dor-probe")
        yield probes.settled(lambda: checks.tenant_reconciled(self.api, TENANT))

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant()
