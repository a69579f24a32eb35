"""status-rbac: the operator may patch Tenants but not their status subresource; its status writes are lost.

Unlike missing-rbac, the operator's own code never sees the 403: the handler succeeds,
then kopf's patch of ``/status`` is refused (kopf 1.45.2 retries it for about a minute and
gives up, its handler's success recorded already), so the work is done and nothing says so.
The check grades what the operator *reports* about a fresh Tenant (a Ready condition about
its current generation) and least privilege both: ``cluster-admin`` or a ``*`` rule on
``tenants/*`` fails as surely as the missing rule.
"""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab.cluster import manifests
from operatorlab.labs import Check, checks, probes
from operatorlab.labs.least_privilege import least_privilege
from operatorlab.labs.tenantlab import SYSTEM_NAMESPACE, TenantLab, operator_role
from operatorlab.wait import eventually

ROLE = "lab-status-rbac"
OK, NEW = "lab-sr-ok", "lab-sr-new"
STATUS = "tenants/status"


def _role_without_status() -> dict:
    """The shipped ClusterRole without its rule on the status subresource ("nobody reads status, surely")."""
    role = operator_role(ROLE)
    role["rules"] = [r for r in role["rules"] if STATUS not in r["resources"]]
    return role


class StatusRbac(TenantLab):
    title = "Done, and nobody knows"
    summary = "new Tenants get their namespace and quota but never a status, and the operator's log fills with errors"
    settle = 0.0  # each check run probes a fresh Tenant itself, waiting as it goes
    hints = (
        f"Tenant {NEW} has its namespace and quota: the work is done. What does `kubectl get tenant {NEW} -o yaml` "
        "show of status, and what do the operator's log lines after \"Handler 'reconcile' succeeded\" say "
        "(operatorlab lab logs status-rbac)?",
        "kopf writes a Tenant in two requests: a merge patch of the object, then one of its status subresource. "
        "Which request does the log show refused, and for whom? `kubectl auth can-i patch tenants.hedronite.io "
        f"--subresource=status --as=system:serviceaccount:{SYSTEM_NAMESPACE}:{ROLE}` asks the same question. "
        f"`operatorlab why tenant/{NEW} --as=system:serviceaccount:{SYSTEM_NAMESPACE}:{ROLE}` asks for every verb kopf "
        "needs. No cluster-admin, no wildcards: the check asks the API server what the account may do.",
        f"Give the ClusterRole {ROLE} back its rule `patch` on `{STATUS}` (group hedronite.io), nothing more. kopf "
        f"recorded the handler as done, so {NEW}'s lost status comes back only when the handler runs again: "
        "`operatorlab lab restart status-rbac` (its on.resume handler re-checks every Tenant). "
        "labs/status-rbac/SOLUTION.md (`operatorlab lab solve status-rbac`) explains it.",
    )

    def setup(self) -> None:
        self.start_operator_as_account(ROLE)
        self.create_tenant(OK, "1")

    def inject(self) -> None:
        manifests.apply(self.api, [_role_without_status()])
        self.create_tenant(NEW, "1", wait=False)
        refused = f'cannot patch resource "{STATUS}"'
        eventually(lambda: f"[{NEW}]" in self.operator().log() and refused in self.operator().log(), timeout=30,
                   message=f"lab {self.id}: kopf's status patch of Tenant {NEW} refused with 403")

    def check(self) -> Iterator[Check]:
        """The operator runs as its account; that account holds no more than the shipped ClusterRole; a fresh
        Tenant's status follows its spec; the lab's own Tenants report Ready about their spec."""
        yield probes.lab_operator_runs(self)
        yield least_privilege(self.api, SYSTEM_NAMESPACE, ROLE, operator_role(ROLE)["rules"],
                              role="ClusterRole (operators/tenant/deploy/clusterrole.yaml)")
        yield probes.status_follows(self, "lab-sr-probe")
        for name in [OK] + ([NEW] if self.made_tenant(NEW) else []):
            yield probes.settled(lambda n=name: checks.tenant_status_current(self.api, n))

    def solve(self) -> None:
        manifests.apply(self.api, [operator_role(ROLE)])
        self.restart_operator()  # on.resume re-runs the handler for every Tenant: the lost status is written
