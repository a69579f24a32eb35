"""crd-group-mismatch: the handlers watch an API group no CRD serves, so they never fire."""

from __future__ import annotations

from operatorlab.faults.variants import ReplaceAssignment
from operatorlab.labs import Check, checks
from operatorlab.labs.tenantlab import VariantLab

OLD, NEW = "lab-cgm-old", "lab-cgm-new"


class CrdGroupMismatch(VariantLab):
    title = "The handler that never fires"
    summary = "new Tenants are ignored after a 'small refactor': find what the operator really watches"
    drill = True
    edits = (ReplaceAssignment("GROUP", 'GROUP, VERSION, PLURAL = "hedronite.com", "v1", "tenants"'),)
    hints = (
        "The new Tenant has no status, no finalizer, no Events: no handler has ever seen it. Is the operator "
        "watching the resource you created?",
        "Read the operator's startup log (kopf lists the resources it serves, and warns about unresolved ones) and "
        "compare with `kubectl api-resources | grep -i tenant`.",
        "The group in labs/crd-group-mismatch/tenant_operator.py must be the CRD's spec.group, hedronite.io.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(OLD, "1")

    def inject(self) -> None:
        self.write_variant()
        self.start_variant()
        self.create_tenant(NEW, "1", wait=False)

    def check(self) -> list[Check]:
        names = [OLD] + ([NEW] if self.made_tenant(NEW) else [])
        return [checks.tenant_reconciled(self.api, n) for n in names]

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant()
