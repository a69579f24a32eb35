"""status-pruned: the Tenant CRD's status schema was "tidied"; the API server prunes what the operator reports.

The schema now names only some status fields and no longer preserves unknown ones, so the
API server drops ``status.conditions`` and ``status.observedGeneration`` from every write
(and from every read of what was stored before). kopf 1.45.2 keeps its handler progress in
annotations, not in status, so no handler repeats: the loss is the operator's report. The
check creates a fresh Tenant, changes it, and grades what its status says and how often the
handler ran; the lab's own Tenants must report Ready about their spec too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from operatorlab import paths, tenants
from operatorlab.cluster import manifests
from operatorlab.labs import Check, checks, probes
from operatorlab.labs.tenantlab import TenantLab
from operatorlab.wait import eventually

CRD = f"{tenants.PLURAL}.{tenants.GROUP}"
OLD, NEW = "lab-sp-old", "lab-sp-new"


def shipped_crd() -> dict[str, Any]:
    """The Tenant CRD as ``crds/tenant.yaml`` has it."""
    return next(o for o in manifests.load(paths.crds_dir() / "tenant.yaml") if o["kind"] == "CustomResourceDefinition")


def tidied_crd() -> dict[str, Any]:
    """The "tidied" CRD: its status schema names its fields and, "being explicit", preserves no others."""
    crd = copy.deepcopy(shipped_crd())
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    del status["x-kubernetes-preserve-unknown-fields"]
    status["description"] = "The observed state, written by the operator: namespace, cpuQuota, phase, message."
    return crd


def replace_crd(api, crd: dict[str, Any]) -> None:
    """Make the cluster's Tenant CRD exactly ``crd``'s spec (a PUT: what anyone added since goes too)."""
    from kubernetes import client

    extensions = client.ApiextensionsV1Api(api)
    live = extensions.read_custom_resource_definition(CRD)
    body = {"apiVersion": crd["apiVersion"], "kind": crd["kind"], "spec": crd["spec"],
            "metadata": {"name": CRD, "resourceVersion": live.metadata.resource_version,
                         "labels": live.metadata.labels, "annotations": live.metadata.annotations}}
    extensions.replace_custom_resource_definition(CRD, body)


def keeps_status(api, name: str) -> bool:
    """Whether the API server now keeps ``status.observedGeneration`` of Tenant ``name`` (a dry-run write)."""
    from kubernetes import client

    tenant = client.CustomObjectsApi(api).patch_cluster_custom_object_status(
        *checks.TENANTS, name, {"status": {"observedGeneration": 0}}, dry_run="All")
    return (tenant.get("status") or {}).get("observedGeneration") == 0


class StatusPruned(TenantLab):
    title = "Ready, says who?"
    summary = ("kubectl get tenants says Ready, yet kubectl wait --for=condition=Ready never returns and "
               "status.observedGeneration is gone")
    settle = 0.0  # each check run probes a fresh Tenant itself, waiting as it goes
    hints = (
        f"`kubectl get tenants` says {NEW} is Ready. Does `kubectl wait --for=condition=Ready tenant/{NEW} "
        f"--timeout=10s` agree? Compare what the operator's log says it wrote (operatorlab lab logs status-pruned) "
        f"with what `kubectl get tenant {NEW} -o yaml` shows.",
        "The operator's status write is accepted, no error, and part of it does not stick: kopf warns \"Merge-patching "
        "finished with inconsistencies\". Who decides which fields of a custom object are kept? "
        f"`kubectl get crd {CRD} -o yaml` and `kubectl explain tenant.status` show what it declares; "
        f"`operatorlab why tenant/{NEW}` weighs it with what kopf recorded.",
        "The CRD's status schema names only namespace, cpuQuota, phase and message and no longer says "
        "`x-kubernetes-preserve-unknown-fields: true`, so the API server prunes conditions and observedGeneration. "
        "Put the schema back (`kubectl apply --server-side --force-conflicts -f crds/tenant.yaml`, or declare the "
        f"fields in full), then `operatorlab lab restart status-pruned`: {NEW}'s report was never stored, and only "
        "the handler writes it again. labs/status-pruned/SOLUTION.md (`operatorlab lab solve status-pruned`) "
        "explains it, and what kopf keeps where.",
    )

    def setup(self) -> None:
        replace_crd(self.api, shipped_crd())  # as shipped, whatever an earlier run left
        self.start_operator()
        self.create_tenant(OLD, "1")

    def inject(self) -> None:
        # A schema clean-up rolls out: "status fields should be declared, not preserved blindly".
        replace_crd(self.api, tidied_crd())
        eventually(lambda: not keeps_status(self.api, OLD), timeout=30,
                   message=f"lab {self.id}: the API server prunes the status of Tenant {OLD}")
        self.create_tenant(NEW, "1", wait=False)
        pruned = f"[{NEW}] Merge-patching finished with inconsistencies"
        eventually(lambda: pruned in self.operator().log(), timeout=30,
                   message=f"lab {self.id}: the status the operator wrote for Tenant {NEW} pruned")

    def check(self) -> Iterator[Check]:
        """The lab's operator runs; a fresh Tenant's status follows its spec, written once per change; the lab's
        own Tenants report Ready about their spec."""
        yield probes.lab_operator_runs(self)
        yield probes.status_follows(self, "lab-sp-probe")
        for name in [OLD] + ([NEW] if self.made_tenant(NEW) else []):
            yield probes.settled(lambda n=name: checks.tenant_status_current(self.api, n))

    def solve(self) -> None:
        replace_crd(self.api, shipped_crd())
        eventually(lambda: keeps_status(self.api, OLD), timeout=30,
                   message=f"lab {self.id}: the API server keeps the status of Tenant {OLD}")
        self.restart_operator()  # on.resume runs the handler for every Tenant: lab-sp-new's report is written again

    def reset(self) -> None:
        super().reset()
        replace_crd(self.api, shipped_crd())
