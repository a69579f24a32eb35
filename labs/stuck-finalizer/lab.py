"""stuck-finalizer: the operator is gone and a deleted Tenant hangs in Terminating."""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab import tenants
from operatorlab.labs import Check, checks, probes
from operatorlab.labs.tenantlab import TenantLab

TENANT = "lab-sf-amber"


class StuckFinalizer(TenantLab):
    title = "Stuck in Terminating"
    summary = "a deleted Tenant has been Terminating for a while and never goes; make it go, leaving nothing behind"
    drill = True
    settle = 0.0  # each check run probes the operator itself (create, update, delete), waiting as it goes
    hints = (
        f"`kubectl get tenant {TENANT} -o yaml`: it has a deletionTimestamp. What is Kubernetes waiting for before it "
        "removes the object?",
        "metadata.finalizers names who must clean up first: kopf's marker, i.e. the Tenant operator, whose delete "
        "handler removes the tenant's namespace. Is the lab's operator running? (operatorlab lab logs stuck-finalizer)",
        "Bring the lab's own operator back, as a Deployment would replace its crashed Pod: `operatorlab lab restart "
        f"stuck-finalizer`; kopf then runs the delete handler for {TENANT}, deletes its namespace and removes the "
        "finalizer. Force-removing the finalizer also makes the Tenant go, but skips the cleanup the finalizer "
        "promised; labs/stuck-finalizer/SOLUTION.md says what each costs.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(TENANT, "1")

    def inject(self) -> None:
        self.operator().kill()
        self.tenants.delete(TENANT)

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield probes.tenant_lifecycle(self, "lab-sf-probe", label="a new Tenant deleted while the operator runs goes, "
                                                                  "and its namespace with it")
        yield probes.settled(lambda: checks.tenant_not_stuck(self.api, TENANT))
        if self.record.injected is not None:  # the lab deleted it: it must go, and the right way
            yield self._cleaned_up_by_the_operator()

    def solve(self) -> None:
        self.restart_operator()

    def _cleaned_up_by_the_operator(self) -> Check:
        """The stuck Tenant went through its finalizer: the lab's operator ran its delete handler for it.

        Stripping the finalizer by hand also makes the Tenant go, and then the garbage
        collector deletes the namespace by its owner reference, so an empty cluster proves
        nothing: the evidence is the delete handler's success in the lab's operator's log.
        """
        label = f"Tenant {TENANT} went through the operator's cleanup"
        if checks.get_or_none(lambda: self.tenants.get(TENANT)) is not None:
            return Check(label, False, f"Tenant {TENANT} is still there: "
                                       f"{checks.tenant_not_stuck(self.api, TENANT).message}")
        if not probes.handled(self, TENANT, probes.DELETE_HANDLER):
            return Check(label, False, f"Tenant {TENANT} is gone, but the lab's operator never ran its delete handler "
                                       f"for it: its log has no \"[{TENANT}] Handler '{probes.DELETE_HANDLER}' "
                                       f"succeeded\". What removed its finalizer, and what did that skip? "
                                       f"(kubectl get events --field-selector involvedObject.name={TENANT})")
        orphan = checks.no_orphan_namespace(self.api, TENANT)
        if not orphan.passed:
            return Check(label, False, orphan.message)
        return Check(label, True, f"the delete handler ran; namespace {tenants.namespace_of(TENANT)} is gone or going")
