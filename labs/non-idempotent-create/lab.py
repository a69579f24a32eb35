"""non-idempotent-create: a handler that only ever creates crashes with 409 after a restart."""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab.faults.variants import ReplaceFunction
from operatorlab.labs import Check, checks, probes
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
    title = "The quota that stopped following"
    summary = "after a restart a Tenant's quota stops following its spec, and the operator's log fills with errors"
    drill = True
    settle = 0.0  # each check run probes the operator itself (create, restart, update, delete), waiting as it goes
    edits = EDITS
    hints = (
        f"The quota of {TENANT} does not follow its spec any more. What do the Tenant's status, kopf's annotation "
        "kopf.zalando.org/reconcile on it, and the operator's log (operatorlab lab logs non-idempotent-create) say "
        "about each attempt?",
        "409 AlreadyExists: the reconcile tries to create something that exists since its first run. A reconcile "
        "must be safe to run any number of times (idempotent), after a restart as much as in one process.",
        "In labs/non-idempotent-create/tenant_operator.py, make _get_or_create read first (create only on a 404) "
        "and treat a 409 on create as 'it exists: read it'; save, and `lab check` restarts the lab's operator from "
        "your file. The operator routes a 409 to a retry one second later, so the fixed one converges at its next "
        "attempt. Fixing the quota by hand, re-creating the Tenant or clearing kopf's annotations is not a fix: "
        "labs/non-idempotent-create/SOLUTION.md says why.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(TENANT, "1")

    def inject(self) -> None:
        self.write_variant()
        self.start_variant()
        self.tenants.patch_spec(TENANT, cpuQuota="2")

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield probes.tenant_lifecycle(self, "lab-nic-probe", before_update=lambda: probes.restart(self),
                                      label="a new Tenant converges, across a restart of the operator (created, "
                                            "operator restarted, changed, deleted)")
        yield probes.settled(lambda: checks.tenant_reconciled(self.api, TENANT))

    def solve(self) -> None:
        # The operator retries the failing reconcile every second (a 409 is routed to a
        # TemporaryError with a 1 s delay), so the fixed copy, restarted by the next check,
        # converges at its next attempt: nothing of kopf's bookkeeping needs clearing.
        self.write_fixed()
        self.start_variant()
