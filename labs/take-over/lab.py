"""take-over: the operator adopts a namespace someone else made, and would delete it with its Tenant."""

from __future__ import annotations

import secrets
import time
from typing import Any

from kubernetes import client

from operatorlab import tenants
from operatorlab.faults.variants import ReplaceFunction
from operatorlab.labs import Check, checks, probes
from operatorlab.labs.tenantlab import TENANT_API_VERSION, VariantLab
from operatorlab.wait import eventually

VICTIM = "lab-to-victim"
DATA = "precious"  # the user's ConfigMap in their namespace
OWNER_LABEL = tenants.TENANT_LABEL
REACT = 20.0  # seconds the operator gets to act on a probe Tenant

# The real ownership() says "taken" for an object that is neither ours (an owner reference
# with the Tenant's uid) nor explicitly handed over (the adopt annotation). The variant
# "simplifies" it: whatever is not ours yet is adoptable.
BROKEN_OWNERSHIP = '''\
def ownership(meta: Mapping[str, Any], owner: kopf.Body) -> str:
    """Whose an existing object is: ``OURS``, or ``ADOPTABLE`` by ``owner``."""
    refs = meta.get("ownerReferences") or []
    if any(ref.get("uid") == owner.metadata.uid for ref in refs):
        return OURS
    return ADOPTABLE
'''


class TakeOver(VariantLab):
    title = "Whose namespace is it?"
    summary = "a new Tenant took over a namespace someone else made: make the operator claim only what it created"
    drill = True
    settle = 0.0  # each check run probes the operator itself (create, update, delete), waiting as it goes
    edits = (ReplaceFunction("ownership", BROKEN_OWNERSHIP),)
    hints = (
        f"Look at namespace tenant-{VICTIM}: who made it, and what does it say about its owner now "
        f"(kubectl get ns tenant-{VICTIM} -o yaml)? What would `kubectl delete tenant {VICTIM}` do to the "
        f"ConfigMap {DATA} in it?",
        "An operator may only write to what it created or what it was explicitly handed. Find where "
        "labs/take-over/tenant_operator.py decides whose an existing object is, and what it answers for a "
        "namespace that has neither the Tenant's owner reference nor the hedronite.io/adopt annotation.",
        "ownership() must answer TAKEN for an object that is neither ours nor handed over by the "
        "hedronite.io/adopt annotation (and not controlled by anyone else); then give the user's namespace back: "
        f"remove the owner reference and the {OWNER_LABEL} label the operator put on it. "
        "labs/take-over/SOLUTION.md (shown by `operatorlab lab solve take-over`) explains it all.",
    )

    def setup(self) -> None:
        self.start_operator()
        self.track("v1", "Namespace", tenants.namespace_of(VICTIM))
        _create_foreign_namespace(self.core, tenants.namespace_of(VICTIM))

    def inject(self) -> None:
        # A "simplified" release of the operator rolls out, and then someone creates a Tenant
        # whose name happens to match the user's namespace.
        self.write_variant()
        self.start_variant()
        self.track(TENANT_API_VERSION, "Tenant", VICTIM)
        self.tenants.create(VICTIM, "1", f"lab {self.id}")
        eventually(lambda: _claimed(self.core.read_namespace(tenants.namespace_of(VICTIM))), timeout=30,
                   message=f"lab {self.id}: the variant took over namespace tenant-{VICTIM}")

    def check(self) -> list[Check]:
        return [self._victim_untouched(), self._foreign_survives(), self._free_name_converges()]

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant()
        self.give_back()

    def give_back(self) -> None:
        """Give the user's namespace back: the owner reference and the label the variant added go."""
        self.core.patch_namespace(tenants.namespace_of(VICTIM), {"metadata": {"ownerReferences": None,
                                                                    "labels": {OWNER_LABEL: None}}})

    # -- checks -------------------------------------------------------------------------

    def _victim_untouched(self) -> Check:
        label = f"the user's namespace tenant-{VICTIM} and its ConfigMap {DATA} are theirs"
        ns = checks.get_or_none(lambda: self.core.read_namespace(tenants.namespace_of(VICTIM)))
        data = checks.get_or_none(lambda: self.core.read_namespaced_config_map(DATA, tenants.namespace_of(VICTIM)))
        if ns is None or ns.metadata.deletion_timestamp or data is None:
            return Check(label, False, f"namespace tenant-{VICTIM} or its ConfigMap {DATA} is gone or going: the "
                                       f"user's data is lost. Start again: operatorlab lab start {self.id}")
        if _claimed(ns):
            return Check(label, False, f"namespace tenant-{VICTIM} carries metadata.ownerReferences="
                                       f"{_refs(ns)} and labels={ns.metadata.labels}: deleting the owner would "
                                       f"delete it, with {DATA}")
        return Check(label, True, "no owner reference, no owner label")

    def _foreign_survives(self) -> Check:
        """Fresh foreign namespaces survive Tenants of their names being created, updated and deleted.

        Two of them, probed at once: a plain one, and one that even carries the operator's
        label naming the Tenant (anyone can set a label: it proves nothing about who made
        the namespace). Nothing may change in either, and nothing may appear in them.
        """
        label = "a namespace the operator did not create survives a Tenant of its name (create, update, delete)"
        token = secrets.token_hex(3)
        plain, spoofed = f"lab-to-probe-{token}", f"lab-to-label-{token}"
        watched: dict[str, dict[str, Any]] = {}  # probe Tenant -> its namespace's fingerprint before
        for name, labels in ((plain, {}), (spoofed, {OWNER_LABEL: spoofed})):
            namespace = tenants.namespace_of(name)
            self.track("v1", "Namespace", namespace)
            self.track(TENANT_API_VERSION, "Tenant", name)
            _create_foreign_namespace(self.core, namespace, labels)
            watched[name] = _fingerprint(self.core, namespace)
        # Seen twice: while the Tenant lives (what its owner reference would let the garbage
        # collector sweep away later is still there) and once it is gone.
        reacted, gone, during, after = {}, {}, {}, {}
        try:
            for name in watched:
                self.tenants.create(name, "1", f"lab {self.id} probe")
            for name, before in watched.items():
                reacted[name] = probes.wait(lambda n=name, b=before: _name_taken(self.tenants.get(n))
                                            or _fingerprint(self.core, tenants.namespace_of(n)) != b, REACT)
            for name in watched:
                self.tenants.patch_spec(name, cpuQuota="2")
            time.sleep(2)
            for name in watched:
                during[name] = _fingerprint(self.core, tenants.namespace_of(name))
            for name in watched:
                gone[name] = probes.delete_tenant(self, name, budget=REACT)
                after[name] = _fingerprint(self.core, tenants.namespace_of(name))
        finally:
            for name in watched:
                probes.delete_tenant(self, name, force=True)
                checks.get_or_none(lambda n=name: self.core.delete_namespace(tenants.namespace_of(n)))
        for name, before in watched.items():
            namespace = tenants.namespace_of(name)
            labelled = f" (labelled {OWNER_LABEL}={name} by its maker)" if name == spoofed else ""
            for seen in (during.get(name), after.get(name)):
                if seen != before:
                    return Check(label, False, f"namespace {namespace}{labelled}, made by someone else with "
                                               f"ConfigMap {DATA}, was changed by the operator for Tenant {name}: "
                                               f"{_changes(before, seen or {'namespace': 'gone'})}")
            if not reacted[name]:
                return Check(label, False, f"Tenant {name} got no NameTaken condition within {REACT:g} s: is the "
                                           f"operator running? Its log: {self.operator().log_path}")
            if not gone[name]:
                return Check(label, False, f"Tenant {name} was not deleted within {REACT:g} s: its finalizer stayed")
        return Check(label, True, "untouched, even with the operator's label on it; the Tenants said NameTaken")

    def _free_name_converges(self) -> Check:
        """A Tenant of a free name still gets its namespace and quota, follows an update and goes."""
        return probes.tenant_lifecycle(self, "lab-to-fresh", budget=REACT,
                                       label="a Tenant of a free name still converges (create, update, delete)")


def _create_foreign_namespace(core: client.CoreV1Api, name: str, labels: dict[str, str] | None = None) -> None:
    """A namespace made by a person, not the operator, with their data in it (and ``labels``)."""
    core.create_namespace({"metadata": {"name": name, "labels": {"team": "someone-else", **(labels or {})}}})
    core.create_namespaced_config_map(name, {"metadata": {"name": DATA}, "data": {"notes": "years of work"}})


def _claimed(ns: client.V1Namespace) -> bool:
    return bool(ns.metadata.owner_references) or OWNER_LABEL in (ns.metadata.labels or {})


def _refs(ns: client.V1Namespace) -> list[str]:
    return [f"{r.kind}/{r.name}" for r in ns.metadata.owner_references or []]


def _fingerprint(core: client.CoreV1Api, namespace: str) -> dict[str, Any]:
    """What must not change: the namespace's resourceVersion, labels, owners, deletion; its ConfigMap's;
    and its ResourceQuotas (none: a quota the operator put in someone else's namespace caps their work)."""
    ns = checks.get_or_none(lambda: core.read_namespace(namespace))
    data = checks.get_or_none(lambda: core.read_namespaced_config_map(DATA, namespace))
    if ns is None:
        return {"namespace": "gone"}
    quotas = sorted(q.metadata.name for q in core.list_namespaced_resource_quota(namespace).items)
    return {"resourceVersion": ns.metadata.resource_version, "labels": ns.metadata.labels,
            "ownerReferences": _refs(ns), "deletionTimestamp": ns.metadata.deletion_timestamp,
            DATA: data.metadata.resource_version if data else "gone", "resourceQuotas": quotas}


def _changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What differs, in words: the evidence of a take-over."""
    if after.get("namespace") == "gone":
        return "it is gone"
    said = []
    if after["deletionTimestamp"] and not before["deletionTimestamp"]:
        said.append(f"it is being deleted (deletionTimestamp {after['deletionTimestamp']:%H:%M:%S})")
    for key in ("labels", "ownerReferences"):
        if after[key] != before[key]:
            said.append(f"metadata.{key} was {before[key]}, is {after[key]}")
    if after[DATA] != before[DATA]:
        said.append(f"ConfigMap {DATA}: resourceVersion {before[DATA]} -> {after[DATA]}")
    if after["resourceQuotas"] != before["resourceQuotas"]:
        said.append(f"ResourceQuotas were {before['resourceQuotas']}, are {after['resourceQuotas']}")
    return "; ".join(said) or f"metadata.resourceVersion {before['resourceVersion']} -> {after['resourceVersion']}"


def _name_taken(tenant: dict) -> bool:
    conditions = (tenant.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("reason") == "NameTaken" for c in conditions)
