"""missing-rbac: the operator's ClusterRole lost a verb; reconciles fail with 403.

The check grades behaviour and the least privilege both: a fresh Tenant must converge
with the operator running as its ServiceAccount, AND that account may do nothing beyond
the operator's ClusterRole as shipped (asked of the API server, as the account), so
``cluster-admin`` or a ``*`` rule fails as surely as the missing verb.
"""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab.cluster import manifests
from operatorlab.labs import Check, checks, probes
from operatorlab.labs.least_privilege import least_privilege
from operatorlab.labs.tenantlab import SYSTEM_NAMESPACE, TenantLab, operator_role
from operatorlab.wait import eventually

ROLE = "lab-missing-rbac"
OK, NEW = "lab-rbac-ok", "lab-rbac-new"


class MissingRbac(TenantLab):
    title = "403 Forbidden"
    summary = "new Tenants get a namespace but no quota, and stay Retrying with a 403 in their status"
    drill = True
    settle = 40.0  # the operator retries a 403 every 10 s
    hints = (
        "The new Tenant's namespace exists but it has no quota. What do the Tenant's status.message and the "
        "operator's log say?",
        "403: the API server refused a verb to system:serviceaccount:operatorlab-system:lab-missing-rbac. "
        "`kubectl auth can-i --as=... create resourcequotas -n tenant-lab-rbac-new` asks the same question; "
        "`kubectl auth can-i --list --as=...` shows all it may do. The check also refuses anything more than the "
        "operator needs: no cluster-admin, no wildcards.",
        "Grant exactly the missing verb: `create` on `resourcequotas` in ClusterRole lab-missing-rbac "
        "(kubectl edit clusterrole lab-missing-rbac); the operator retries by itself, no restart, no code change. "
        "labs/missing-rbac/SOLUTION.md (shown by `operatorlab lab solve missing-rbac`) explains it.",
    )

    def setup(self) -> None:
        self.start_operator_as_account(ROLE)
        self.create_tenant(OK, "1")

    def inject(self) -> None:
        role = operator_role(ROLE)
        for rule in role["rules"]:
            if "resourcequotas" in rule["resources"]:
                rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
        manifests.apply(self.api, [role])
        self.create_tenant(NEW, "1", wait=False)
        eventually(lambda: "(403)" in (self.tenants.status(NEW).get("message") or ""), timeout=30,
                   message=f"lab {self.id}: the operator's quota create refused with 403")

    def check(self) -> Iterator[Check]:
        """The operator runs as its account; that account holds no more than the shipped ClusterRole;
        a fresh Tenant converges through create, change and delete; the lab's own Tenants are reconciled."""
        yield probes.lab_operator_runs(self)
        yield least_privilege(self.api, SYSTEM_NAMESPACE, ROLE, operator_role(ROLE)["rules"],
                              role="ClusterRole (operators/tenant/deploy/clusterrole.yaml)")
        yield probes.tenant_lifecycle(self, "lab-rbac-probe")
        for name in [OK] + ([NEW] if self.made_tenant(NEW) else []):
            yield checks.tenant_reconciled(self.api, name)

    def solve(self) -> None:
        manifests.apply(self.api, [operator_role(ROLE)])
