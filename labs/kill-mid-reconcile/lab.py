"""kill-mid-reconcile: the operator is SIGKILLed between creating a namespace and its quota."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

from kubernetes import client

from operatorlab import tenants
from operatorlab.labs import Check, checks, probes, reactions
from operatorlab.labs.tenantlab import TENANT_API_VERSION, TenantLab

ALPHA, BETA = "lab-kmr-alpha", "lab-kmr-beta"
#: Seconds the probe watches a half-made Tenant while the lab's operator is dead: nobody may finish it.
NOBODY_ELSE = 8.0  # another operator on a loaded 2-core machine may take several seconds


def kill_on_namespace_created(pid: int, started: str) -> dict:
    """The fault proxy's rule: once the apiserver answers 201 to a namespace create, SIGKILL the operator, once."""
    return {"action": "kill", "method": "POST", "path": "^/api/v1/namespaces$", "response": 201,
            "pid": pid, "started": started, "times": 1, "name": "kill after namespace created"}


class KillMidReconcile(TenantLab):
    title = "Kill the operator mid-reconcile"
    summary = ("a Tenant has its namespace but no quota, and nothing is working on it: recover, with nothing "
               "lost or doubled")
    drill = True
    settle = 0.0  # each check run probes the operator itself (kill, restart, converge), waiting as it goes
    hints = (
        f"Compare what Tenant {BETA} asks for with what exists in its namespace. Is anyone still working on it? "
        f"(operatorlab lab logs kill-mid-reconcile)",
        "The lab's operator process is gone: its log ends abruptly, right after it sent the namespace create. A "
        "reconcile that dies half-way is only safe if something runs it again, and if running it again is harmless.",
        "Bring the lab's own operator back, as a Deployment would replace the killed Pod: `operatorlab lab restart "
        f"kill-mid-reconcile`. kopf never recorded the creation of {BETA} as handled, so it runs the creation handler "
        "again, and reconcile_tenant is idempotent: it finds the namespace and creates only the quota. Making the "
        "quota by hand or running a second operator elsewhere is not a fix; labs/kill-mid-reconcile/SOLUTION.md "
        "says why.",
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

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield self._survives_a_kill()
        names = [ALPHA] + ([BETA] if self.made_tenant(BETA) else [])
        for name in names:
            yield probes.settled(lambda n=name: checks.tenant_reconciled(self.api, n))
        yield self._nothing_doubled(names)

    def solve(self) -> None:
        self.proxy().clear()
        self.restart_operator()

    # -- checks -------------------------------------------------------------------------

    def _survives_a_kill(self) -> Check:
        """The check kills the lab's operator itself, right after a fresh Tenant's namespace is created.

        Then: nothing finishes the half-made Tenant while the operator is dead, not even after
        the check changes its spec (no second operator does the lab's one's work), and once
        the lab's operator is started again it converges with one namespace and one quota,
        both the Tenant's, and the quota's create
        went through the lab's fault proxy (the lab's operator made it, not another one), as did
        every write the API server committed to the Tenant. On a busy machine a second operator
        may be slower than the probe watches; it still writes the Tenant (its finalizer, its
        progress, a retry after its own create met a 409), and no write of its passes the proxy.
        """
        label = "a Tenant whose operator is killed mid-reconcile converges once it is back, nothing doubled"
        operator = self.operator()
        if not operator.running or operator.identity is None:
            return Check(label, False, f"not probed: the lab's operator (pid {operator.pid}) is not running")
        name = probes.probe_name("lab-kmr-probe")
        namespace = tenants.namespace_of(name)
        self.track(TENANT_API_VERSION, "Tenant", name)
        self.track("v1", "Namespace", namespace)
        self.proxy().set_rules([kill_on_namespace_created(operator.identity.pid, operator.identity.started)])
        created = time.time()
        writes: reactions.WriteCounter | None = None
        try:
            tenant = self.tenants.create(name, f"{secrets.randbelow(900) + 100}m", f"lab {self.id} probe")
            writes = reactions.WriteCounter(self, tenant, budget=2 * probes.STEP_BUDGET + NOBODY_ELSE + 30)
            if not operator.wait_exit(timeout=probes.STEP_BUDGET):
                return Check(label, False, f"the lab's operator was not killed within {probes.STEP_BUDGET:g} s of "
                                           f"Tenant {name}'s creation: it never created namespace {namespace} "
                                           f"through the lab's fault proxy. {self._log()}")
            # Then the world moves on while the lab's operator is dead, as it does: a new spec. An
            # operator that lost a race for the probe earlier and sits waiting for its next event
            # gets one now, and finishes the Tenant; nobody else may.
            finished_early = probes.wait(lambda: self._quotas(name), NOBODY_ELSE / 3)
            if not finished_early:
                self.tenants.patch_spec(name, cpuQuota=f"{secrets.randbelow(900) + 100}m")
            if finished_early or probes.wait(lambda: self._quotas(name), NOBODY_ELSE):
                return Check(label, False, f"while the lab's operator was dead, Tenant {name} got its ResourceQuota "
                                           f"{self._quotas(name)} anyway: another Tenant operator is at work on "
                                           f"this cluster (look for a second `kopf run`: ps -ef | grep kopf). Two "
                                           f"operators reconciling every Tenant fight; the lab's must be the one")
            self.proxy().clear()
            restarted = time.time()
            if failed := probes.start_again(self):
                return Check(label, False, failed)
            if not probes.wait(lambda: checks.tenant_reconciled(self.api, name).passed
                               and probes.handled(self, name)):
                return Check(label, False, f"Tenant {name}, half-made when the lab's operator was killed, "
                                           f"{probes.STEP_BUDGET:g} s after the operator started again: "
                                           f"{checks.tenant_reconciled(self.api, name).message}. {self._log()}")
            if len(owned := self._quotas(name)) != 1:
                return Check(label, False, f"namespace {namespace} holds {len(owned)} ResourceQuotas owned by "
                                           f"Tenant {name}: {owned}")
            if not self._created_by_lab_operator(namespace, since=restarted):
                return Check(label, False, f"Tenant {name}'s ResourceQuota {owned[0]} was not created by the lab's "
                                           f"operator once it was back: no create of it went through the lab's "
                                           f"fault proxy. Another Tenant operator is at work on this cluster (look "
                                           f"for a second `kopf run`: ps -ef | grep kopf); the lab's must be the one")
            # The check's own spec change is the one write to the probe that is nobody's operator's.
            committed, sent = writes.stop() - 1, reactions.writes_through(self.proxy(), name, created)
            if committed > sent:
                return Check(label, False, f"Tenant {name} was written {committed} times by operators, "
                                           f"{committed - sent} more than the lab's operator sent through its fault "
                                           f"proxy ({sent}): another "
                                           f"Tenant operator is at work on this cluster (look for a second `kopf "
                                           f"run`: ps -ef | grep kopf). Two operators reconciling every Tenant "
                                           f"fight; the lab's must be the one")
        finally:
            if writes is not None:
                writes.stop()
            self.proxy().clear()
            probes.delete_tenant(self, name, force=True)
        return Check(label, True, f"Tenant {name}: killed after its namespace was created, converged after the "
                                  f"restart with one quota")

    def _nothing_doubled(self, names: list[str]) -> Check:
        """Each lab Tenant's namespace holds exactly one ResourceQuota owned by that Tenant."""
        label = "each Tenant has exactly one quota of its own"
        for name in names:
            if len(owned := self._quotas(name)) != 1:
                return Check(label, False, f"namespace {tenants.namespace_of(name)} holds {len(owned)} ResourceQuotas "
                                           f"whose owner reference names Tenant {name}: {owned} "
                                           f"(kubectl get resourcequota -n {tenants.namespace_of(name)} -o yaml)")
        return Check(label, True, ", ".join(names))

    def _quotas(self, name: str) -> list[str]:
        """The ResourceQuotas in Tenant ``name``'s namespace owned by it (an owner reference with its uid).

        Counted by owner reference, not by name: a second quota of another name is as much a
        duplicate as a second one of the same name would be.
        """
        tenant = checks.get_or_none(lambda: self.tenants.get(name))
        if tenant is None:
            return []
        uid = tenant["metadata"]["uid"]
        found = checks.get_or_none(lambda: self.core.list_namespaced_resource_quota(tenants.namespace_of(name)))
        return [q.metadata.name for q in (found.items if found else []) if _owned_by(q, uid)]

    def _created_by_lab_operator(self, namespace: str, *, since: float) -> bool:
        """Whether the lab's operator created a ResourceQuota in ``namespace`` after ``since``.

        Its every request goes through the lab's fault proxy, which records each with the
        apiserver's answer: a create is a POST, or a server-side apply's PATCH, answered 201.
        Timing alone cannot tell a second operator from the lab's on a busy machine, where the
        other may take longer than the probe watches; who sent the create can.
        """
        path = rf"^/api/v1/namespaces/{namespace}/resourcequotas(/[^/]+)?$"
        return any(r["status"] == 201 for method in ("POST", "PATCH")
                   for r in reactions.requests_to(self.proxy(), method, path, since))

    def _log(self) -> str:
        return f"The operator's log: operatorlab lab logs {self.id}"


def _owned_by(obj: client.V1ResourceQuota, uid: str) -> bool:
    return any(ref.uid == uid for ref in obj.metadata.owner_references or [])
