"""missing-rbac: the operator's ClusterRole lost a verb; reconciles fail with 403."""

from __future__ import annotations

import copy

from operatorlab import rbac
from operatorlab.cluster import manifests
from operatorlab.labs import Check, checks
from operatorlab.labs.tenantlab import TenantLab
from operatorlab.wait import eventually

ROLE = "lab-missing-rbac"
SYSTEM_NAMESPACE = "operatorlab-system"
OK, NEW = "lab-rbac-ok", "lab-rbac-new"


def _objects() -> list[dict]:
    return rbac.operator_rbac("tenant", name=ROLE)


def _role(objects: list[dict]) -> dict:
    return next(o for o in objects if o["kind"] == "ClusterRole")


class MissingRbac(TenantLab):
    title = "403 Forbidden"
    summary = "the operator runs as its ServiceAccount and a verb went missing from its ClusterRole: fix RBAC, not code"
    drill = True
    settle = 40.0  # the operator retries a 403 every 10 s
    hints = (
        "The new Tenant's namespace exists but it has no quota. What do the Tenant's status.message and the "
        "operator's log say?",
        "403: the API server refused a verb to system:serviceaccount:operatorlab-system:lab-missing-rbac. "
        "`kubectl auth can-i --as=... create resourcequotas -n tenant-lab-rbac-new` asks the same question.",
        "Grant create on resourcequotas in ClusterRole lab-missing-rbac (kubectl edit clusterrole lab-missing-rbac); "
        "the operator retries by itself, no restart, no code change.",
    )

    def setup(self) -> None:
        objects = _objects()
        manifests.apply(self.api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}])
        self.track("rbac.authorization.k8s.io/v1", "ClusterRole", ROLE)
        self.track("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", ROLE)
        self.track("v1", "ServiceAccount", ROLE, SYSTEM_NAMESPACE)
        manifests.apply(self.api, objects)
        kubeconfig = rbac.service_account_kubeconfig(self.api, SYSTEM_NAMESPACE, ROLE,
                                                     self.ctx.state_dir / f"{self.id}.kubeconfig")
        self.remember_file(kubeconfig)
        self.start_operator(kubeconfig=kubeconfig)
        self.create_tenant(OK, "1")

    def inject(self) -> None:
        role = copy.deepcopy(_role(_objects()))
        for rule in role["rules"]:
            if "resourcequotas" in rule["resources"]:
                rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
        manifests.apply(self.api, [role])
        self.create_tenant(NEW, "1", wait=False)
        eventually(lambda: "(403)" in (self.tenants.status(NEW).get("message") or ""), timeout=30,
                   message=f"lab {self.id}: the operator's quota create refused with 403")

    def check(self) -> list[Check]:
        names = [OK] + ([NEW] if self.made_tenant(NEW) else [])
        return [checks.tenant_reconciled(self.api, n) for n in names]

    def solve(self) -> None:
        manifests.apply(self.api, [_role(_objects())])
