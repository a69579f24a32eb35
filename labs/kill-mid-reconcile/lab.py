"""kill-mid-reconcile: the operator is SIGKILLed between creating a namespace and its quota."""

from __future__ import annotations

from operatorlab.labs import Check, checks, faults
from operatorlab.labs.tenantlab import TenantLab

ALPHA, BETA = "lab-kmr-alpha", "lab-kmr-beta"


class KillMidReconcile(TenantLab):
    title = "Kill the operator mid-reconcile"
    summary = "SIGKILL between namespace and quota: bring the operator back and prove nothing is lost or doubled"
    drill = True
    hints = (
        "Compare what Tenant lab-kmr-beta asks for with what exists in its namespace. Is anyone still working on it?",
        "The operator process is gone (its log ends abruptly). A reconcile that dies half-way is only safe if "
        "something runs it again.",
        "Start the Tenant operator again (`operatorlab operator run tenant` in another terminal): on.resume re-runs "
        "the reconcile for every Tenant, and reconcile_tenant is idempotent, so it finishes the half-done one.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(ALPHA, "1")

    def inject(self) -> None:
        once = self.ctx.state_dir / f"{self.id}-killed"
        self.state.remember("files", str(once))
        op = self.start_operator(env=faults.kill_at("after-namespace", once))
        self.create_tenant(BETA, "2", wait=False)
        if not op.wait_exit(timeout=30):
            raise RuntimeError(f"the kill hook did not fire:\n{op.log_tail()}")

    def check(self) -> list[Check]:
        names = [ALPHA] + ([BETA] if ["tenant", BETA, None] in self.state.data.get("objects", []) else [])
        return [*(checks.tenant_reconciled(self.api, n) for n in names), checks.one_quota_per_namespace(self.api, names)]

    def solve(self) -> None:
        self.start_operator()  # no fault hook this time
