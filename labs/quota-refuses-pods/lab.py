"""quota-refuses-pods: a release drops its CPU requests and limits; the Tenant's quota refuses its Pods."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

from operatorlab import tenants
from operatorlab.labs import Check, checks
from operatorlab.labs import workloads as w
from operatorlab.labs.tenantlab import TenantLab
from operatorlab.wait import eventually

TENANT, APP = "lab-quota", "worker"
NAMESPACE = tenants.namespace_of(TENANT)
REPLICAS = 2
CPU_QUOTA = "2"
RESOURCES = {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}
SCALES = f"Deployment {APP} scaled to a fresh replica count gets them all ready"
RUNNING = f"Deployment {NAMESPACE}/{APP} runs {REPLICAS} up-to-date ready replicas"
QUOTA = f"Tenant {TENANT} reconciled (namespace + quota match spec)"  # checks.tenant_reconciled's name


class QuotaRefusesPods(TenantLab):
    title = "Refused at the door"
    summary = (f"since its last release, Deployment {NAMESPACE}/{APP} gets no new Pod: its rollout and any "
               f"scaling stall. Make it run {REPLICAS} up-to-date replicas and scale again, within the Tenant's "
               f"limits as they are")
    drill = True
    settle = 0.0  # each check run scales the workload itself and waits for it
    hints = (
        f"kubectl get rs -n {NAMESPACE}: the newest ReplicaSet wants Pods and has none. kubectl describe it: "
        "what do its events say?",
        f"The API server refuses the Pods: namespace {NAMESPACE} has a ResourceQuota on requests.cpu and "
        "limits.cpu (made by the Tenant operator), and a quota on a resource makes every Pod say how much "
        "of it it wants. What does the new Pod template say (kubectl get deploy -o yaml: resources)?",
        f"The release dropped the container's resources. Give it CPU requests and limits again (kubectl rollout undo "
        f"deployment/{APP} -n {NAMESPACE}, or kubectl set resources ... --requests=cpu=100m --limits=cpu=200m), or "
        f"give the namespace defaults with a LimitRange. Deleting or loosening the quota is not the repair: the "
        f"Tenant says what it holds. labs/quota-refuses-pods/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.create_tenant(TENANT, CPU_QUOTA)
        w.apps(self).create_namespaced_deployment(NAMESPACE, w.deployment(APP, replicas=REPLICAS,
                                                                          resources=RESOURCES))
        eventually(lambda: w.deployment_ready(self, NAMESPACE, APP, REPLICAS).passed, timeout=120,
                   message=f"Deployment {NAMESPACE}/{APP} ready")

    def inject(self) -> None:
        # The new release's manifest has no resources stanza (null deletes it in a strategic merge patch).
        _set_resources(self, None)
        eventually(lambda: _refused(self), timeout=30, message=f"lab {self.id}: the quota refused a Pod of {APP}")

    def check(self) -> Iterator[Check]:
        # Scaling first: it also makes the ReplicaSet controller try again at once, where it may be
        # backing off after many refusals (its work queue retries a failing key ever more slowly).
        fresh = REPLICAS + 1 + secrets.randbelow(2)
        try:
            scaled = w.scale_completes(self, NAMESPACE, APP, replicas=fresh, label=SCALES)
            yield scaled
        finally:
            w.apps(self).patch_namespaced_deployment_scale(APP, NAMESPACE, {"spec": {"replicas": REPLICAS}})
        # Back to its replicas: seconds once Pods are admitted (while they are not, nothing to wait for).
        yield w.deployment_ready(self, NAMESPACE, APP, REPLICAS, label=RUNNING, budget=w.BUDGET if scaled.passed else 0)
        yield checks.tenant_reconciled(self.api, TENANT)

    def solve(self) -> None:
        _set_resources(self, RESOURCES)


def _set_resources(lab: TenantLab, resources: dict | None) -> None:
    w.apps(lab).patch_namespaced_deployment(APP, NAMESPACE, {"spec": {"template": {"spec": {"containers": [
        {"name": APP, "resources": resources}]}}}})


def _refused(lab: TenantLab) -> bool:
    d = w.apps(lab).read_namespaced_deployment(APP, NAMESPACE)
    rs = w.newest_replica_set(lab, d)
    return rs is not None and "FailedCreate" in (w.last_warning(lab, NAMESPACE, "ReplicaSet", rs.metadata.name) or "")
