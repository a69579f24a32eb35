"""crd-group-mismatch: the handlers watch an API group no CRD serves, so they never fire."""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab.faults.variants import ReplaceAssignment
from operatorlab.labs import Check, checks, probes
from operatorlab.labs.tenantlab import VariantLab

OLD, NEW = "lab-cgm-old", "lab-cgm-new"


class CrdGroupMismatch(VariantLab):
    title = "The handler that never fires"
    summary = "after a 'harmless' clean-up new Tenants get no namespace, no status, no Events, and nothing errs"
    drill = True
    settle = 0.0  # each check run probes the operator itself (create, update, delete), waiting as it goes
    edits = (ReplaceAssignment("GROUP", 'GROUP, VERSION, PLURAL = "hedronite.com", "v1", "tenants"'),)
    hints = (
        f"The new Tenant {NEW} has no status, no finalizer, no Events: no handler has ever seen it. Is the lab's "
        "operator watching the resource you created?",
        "Read the operator's startup log (operatorlab lab logs crd-group-mismatch: kopf lists what it serves and "
        "warns about what it cannot find) and compare with `kubectl api-resources | grep -i tenant`.",
        "The group in labs/crd-group-mismatch/tenant_operator.py (GROUP, VERSION, PLURAL = ...) must be the CRD's "
        "spec.group, hedronite.io; save, and `lab check` restarts the lab's operator from your file. An operator "
        "started elsewhere is not a fix: the check asks the lab's operator's own log. "
        "labs/crd-group-mismatch/SOLUTION.md explains it.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(OLD, "1")

    def inject(self) -> None:
        self.write_variant()
        self.start_variant()
        self.create_tenant(NEW, "1", wait=False)

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield probes.tenant_lifecycle(self, "lab-cgm-probe",
                                      label="a new Tenant converges through the lab's operator (created, changed, "
                                            "deleted)")
        for name in [OLD] + ([NEW] if self.made_tenant(NEW) else []):
            yield probes.settled(lambda n=name: checks.tenant_reconciled(self.api, n))

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant()
