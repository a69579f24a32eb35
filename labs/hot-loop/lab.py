"""hot-loop: a handler stamps its own Tenant, and the stamp is a change that runs the handler again."""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab.faults.variants import PrependToFunction
from operatorlab.labs import Check, checks, probes, reactions
from operatorlab.labs.tenantlab import VariantLab
from operatorlab.wait import eventually

TENANT = "lab-hl-green"
STAMP = "hedronite.io/last-reconciled"
QUIET = 6.0  # seconds a converged probe Tenant is watched while nobody changes it
ALLOWED = 1  # writes in that window: a late status write may land in it, a loop writes several a second
BUDGET = 20.0  # seconds the operator gets to converge a probe Tenant

# The release's "small" feature: stamp each Tenant with when it was last reconciled, for a
# dashboard. An annotation is part of what kopf compares to decide a Tenant changed.
STAMPING = f'''\
# For the dashboards: when was this Tenant last reconciled?
patch.metadata.annotations["{STAMP}"] = datetime.now(UTC).isoformat()
'''


class HotLoop(VariantLab):
    title = "The operator that never rests"
    summary = "a Ready Tenant nobody touches is written again and again, and the operator's CPU never idles"
    settle = 0.0  # each check run probes a fresh Tenant itself, waiting as it goes
    edits = (PrependToFunction("reconcile", STAMPING),)
    hints = (
        f"Watch Tenant {TENANT} for a few seconds (kubectl get tenant {TENANT} -o yaml -w, or its "
        "metadata.resourceVersion): who writes it, and what changes each time? Then read the operator's log.",
        "kopf decides a Tenant changed by comparing it with the copy it keeps in the "
        "kopf.zalando.org/last-handled-configuration annotation: spec, labels and annotations count, status "
        "does not. What does reconcile() in labs/hot-loop/tenant_operator.py write, and where?",
        f"reconcile() writes the {STAMP} annotation on every run, and that annotation is part of what kopf compares, "
        "so each write is a change that runs on.update again. Remove the stamp (or keep the time in status, "
        "which kopf ignores); labs/hot-loop/SOLUTION.md (`operatorlab lab solve hot-loop`) explains.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(TENANT, "1")

    def inject(self) -> None:
        # The release with the dashboard stamp rolls out.
        self.write_variant()
        self.start_variant()
        eventually(lambda: reactions.writes_while_idle(self, TENANT, 3.0).count > 3, timeout=30,
                   message=f"lab {self.id}: Tenant {TENANT} written again and again")

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield self._quiet_once_converged()
        yield probes.tenant_lifecycle(self, "lab-hl-life", budget=BUDGET,
                                      label="a new Tenant still converges (created, changed, deleted)")

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant()

    def _quiet_once_converged(self) -> Check:
        """A fresh Tenant converges, and then nothing writes it while nothing changes it."""
        label = f"a converged Tenant is left alone (at most {ALLOWED} write in {QUIET:g} s)"
        with reactions.probe_tenant(self, "lab-hl-quiet") as name:
            if not probes.wait(lambda: checks.tenant_reconciled(self.api, name).passed
                               and self.tenants.phase(name) == "Ready", BUDGET):
                return Check(label, False, f"Tenant {name} did not converge within {BUDGET:g} s: "
                                           f"{checks.tenant_reconciled(self.api, name).message}. "
                                           f"The operator's log: operatorlab lab logs {self.id}")
            probes.wait(lambda: reactions.writes_while_idle(self, name, 1.0).count == 0, 3.0)  # its last writes land
            writes = reactions.writes_while_idle(self, name, QUIET)
        if writes.count > ALLOWED:
            return Check(label, False, f"{writes.evidence(f'Tenant {name}')}. The operator's log: "
                                       f"operatorlab lab logs {self.id}")
        return Check(label, True, f"Tenant {name}: {writes.count} write(s) in {QUIET:g} s once Ready")
