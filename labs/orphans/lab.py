"""orphans: owner references the garbage collector cannot follow, so children outlive their Tenant."""

from __future__ import annotations

from collections.abc import Iterator

from kubernetes import client

from operatorlab import tenants
from operatorlab.faults.variants import ReplaceFunction
from operatorlab.labs import Check, checks, probes, reactions
from operatorlab.labs.tenantlab import VariantLab

TENANT = "lab-or-teal"
BUDGET = 20.0  # seconds the operator gets to converge a probe Tenant
GC_BUDGET = 45.0  # seconds the garbage collector gets to start deleting an owned namespace (a loaded machine: tens)

# The release was prepared on the prototype branch, where Tenants were hedronite.io/v1beta1:
# its owner references name a version the API does not serve.
BROKEN_OWNER = '''\
def owner_body(name: str, uid: str) -> kopf.Body:
    """Enough of one of our custom resources for kopf to build an owner reference to it."""
    return kopf.Body({"apiVersion": f"{GROUP}/v1beta1", "kind": KIND, "metadata": {"name": name, "uid": uid}})
'''


class Orphans(VariantLab):
    title = "Children that outlive their owner"
    summary = "a Tenant deleted while its operator was down left its namespace behind, and nothing ever removes it"
    settle = 0.0  # each check run probes fresh Tenants itself, waiting as it goes
    edits = (ReplaceFunction("owner_body", BROKEN_OWNER),)
    hints = (
        f"kubectl get ns tenant-{TENANT} -o yaml: whose is it, by its metadata? Does that owner exist? Who is "
        "supposed to delete an object whose owner is gone, when the operator could not?",
        "The garbage collector in kube-controller-manager deletes an object once the owner its owner reference "
        "names is gone; it finds that owner by apiVersion, kind and uid. Compare the owner references the lab's "
        "operator writes with `kubectl get tenant NAME -o yaml` of a live Tenant (kubectl api-resources helps).",
        "owner_body() in labs/orphans/tenant_operator.py builds owner references with apiVersion hedronite.io/v1beta1, "
        "a version the API does not serve: the garbage collector cannot look the owner up, so it never deletes the "
        f"child. Build them from GROUP and VERSION, then delete namespace tenant-{TENANT}, which still carries the "
        "old reference. labs/orphans/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        self.start_operator()

    def inject(self) -> None:
        # The release rolls out and a Tenant is created.
        self.write_variant()
        self.start_variant()
        self.create_tenant(TENANT, "1")
        # Later the operator is down for a while (a node drain); someone deletes the Tenant and,
        # since it hangs in Terminating, removes its finalizer by hand.
        self.operator().stop()
        probes.delete_tenant(self, TENANT, force=True)
        self.restart_operator()

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield self._left_behind_is_gone()
        yield probes.tenant_lifecycle(self, "lab-or-life", budget=BUDGET,
                                      label="a new Tenant converges (created, changed, deleted)")
        yield self._collected_without_the_operator()

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant()
        self.core.delete_namespace(tenants.namespace_of(TENANT))

    def _left_behind_is_gone(self) -> Check:
        """The namespace the deleted Tenant left behind is gone (the broken release's leftovers cleaned up)."""
        check = checks.no_orphan_namespace(self.api, TENANT)
        if check.passed:
            return check
        ns = self.core.read_namespace(tenants.namespace_of(TENANT))
        return Check(check.name, False, f"{check.message}; its metadata.ownerReferences: {_refs(ns)}")

    def _collected_without_the_operator(self) -> Check:
        """A fresh Tenant deleted while the operator is down (its finalizer stripped): its namespace goes anyway.

        That is the owner reference's promise, kept by the garbage collector in
        kube-controller-manager, not by the operator: the check stops the lab's operator for it
        and starts it again afterwards.
        """
        label = "a Tenant deleted while its operator is down takes its namespace with it (garbage collection)"
        with reactions.probe_tenant(self, "lab-or-gc") as name:
            namespace = tenants.namespace_of(name)
            if not probes.wait(lambda: checks.tenant_reconciled(self.api, name).passed, BUDGET):
                return Check(label, False, f"Tenant {name} did not converge within {BUDGET:g} s: "
                                           f"{checks.tenant_reconciled(self.api, name).message}")
            self.operator().stop()
            try:
                probes.delete_tenant(self, name, force=True)
                seconds = reactions.gone_within(lambda: _live(self.core, namespace) is not None, GC_BUDGET)
            finally:
                self.restart_operator()
            if seconds is None:
                ns = _live(self.core, namespace)
                refs = _refs(ns) if ns is not None else "(gone since)"
                return Check(label, False, f"namespace {namespace} is still live {GC_BUDGET:g} s after its Tenant "
                                           f"{name} was deleted (finalizer stripped, operator stopped): its "
                                           f"metadata.ownerReferences are {refs}; kubectl get ns {namespace} -o yaml")
        return Check(label, True, f"namespace {namespace} deleted by the garbage collector {seconds:.1f} s after "
                                  f"Tenant {name} went")


def _live(core: client.CoreV1Api, namespace: str) -> client.V1Namespace | None:
    """The namespace if it exists and is not being deleted, else None."""
    ns = checks.get_or_none(lambda: core.read_namespace(namespace))
    return ns if ns is not None and not ns.metadata.deletion_timestamp else None


def _refs(ns: client.V1Namespace) -> list[str]:
    return [f"{r.api_version} {r.kind} {r.name} (uid {r.uid})" for r in ns.metadata.owner_references or []]
