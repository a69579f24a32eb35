"""kill-mid-reconcile: the operator is SIGKILLed between creating a namespace and its quota."""

from __future__ import annotations

from operatorlab.labs import Check, checks
from operatorlab.labs.tenantlab import TenantLab

ALPHA, BETA = "lab-kmr-alpha", "lab-kmr-beta"


def kill_on_namespace_created(pid: int, started: str) -> dict:
    """The fault proxy's rule: once the apiserver answers 201 to a namespace create, SIGKILL the operator, once."""
    return {"action": "kill", "method": "POST", "path": "^/api/v1/namespaces$", "response": 201,
            "pid": pid, "started": started, "times": 1, "name": "kill after namespace created"}


class KillMidReconcile(TenantLab):
    title = "Kill the operator mid-reconcile"
    summary = "SIGKILL between namespace and quota: bring the operator back and prove nothing is lost or doubled"
    drill = True
    hints = (
        "Compare what Tenant lab-kmr-beta asks for with what exists in its namespace. Is anyone still working on it?",
        "The operator process is gone (its log ends abruptly, right after it sent the namespace create). A "
        "reconcile that dies half-way is only safe if something runs it again, and if running it again is harmless.",
        "Start the Tenant operator again (`operatorlab operator run tenant` in another terminal). kopf never recorded "
        "the creation of lab-kmr-beta as handled, so it runs the creation handler again, as a create (kopf never "
        "turns an unfinished creation into a resume), and reconcile_tenant is idempotent: it finds the namespace and "
        "creates only the quota.",
    )

    def setup(self) -> None:
        proxy = self.proxy().start()
        self.start_operator(kubeconfig=proxy.kubeconfig)
        self.create_tenant(ALPHA, "1")

    def inject(self) -> None:
        operator = self.operator()
        assert operator.identity is not None
        self.proxy().set_rules([kill_on_namespace_created(operator.identity.pid, operator.identity.started)])
        self.create_tenant(BETA, "2", wait=False)
        if not operator.wait_exit(timeout=30):
            raise RuntimeError(f"the fault proxy did not kill the operator:\n{operator.log_tail()}")

    def check(self) -> list[Check]:
        names = [ALPHA] + ([BETA] if self.made_tenant(BETA) else [])
        return [*(checks.tenant_reconciled(self.api, n) for n in names),
                checks.one_quota_per_namespace(self.api, names)]

    def solve(self) -> None:
        self.proxy().clear()
        self.restart_operator()
