"""two-replicas: the Tenant operator runs as two replicas, and both handle every Tenant.

The lab runs two processes of one copy of the Tenant operator, as a Deployment's two Pods:
``replica-a`` and ``replica-b``, each launched from an environment file of its own (the
Pod's ``env:``; kopf reads every ``kopf run`` option from ``KOPF_RUN_<OPTION>`` too) and
each with its own ``POD_ID``, the identity kopf announces to its peers. The check grades
behaviour, not the files: both replicas must be alive (a fix that stops one is no fix), a
fresh Tenant must be worked on by exactly one of them (the other's log never mentions
it), and when the check SIGKILLs the working one, the other must handle a second fresh
Tenant within the lifetime the dead one announced.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from operatorlab.faults.variants import PrependToFunction
from operatorlab.labs import Check, checks, probes, reactions
from operatorlab.labs.errors import LabNotStarted
from operatorlab.labs.tenantlab import VariantLab
from operatorlab.wait import eventually

TENANT = "lab-tr-green"
REPLICAS = {"replica-a": "tenant-operator-a", "replica-b": "tenant-operator-b"}  # role -> POD_ID
PEERING = "tenant-operator"  # the ClusterKopfPeering of the known good state
PEERINGS = ("kopf.dev", "v1", "clusterkopfpeerings")
BUDGET = 20.0  # seconds a probe Tenant gets to converge
QUIET = 3.0  # seconds the other replica gets to show it works on a probe too, once it converged
LIFETIME = 10  # seconds: the lab's copy of the operator announces this peering lifetime
MAX_LIFETIME = 60  # kopf's default lifetime: a longer one leaves Tenants unhandled for longer after a crash
TAKEOVER_SLACK = 15.0  # seconds beyond the dead replica's lifetime: the take-over's re-listing and the reconcile
# What a kopf replica logs about its peering (kopf 1.45.2, kopf/_core/engines/peering.py).
PEERING_LINE = re.compile(r"Pausing operations|Pausing all operators|Resuming operations|Keep-alive in .*not found")

# The replicas' settings, in the copy they run: how long their peers wait for a silent one.
LIFETIME_SETTING = f'''\
# A replica that stops renewing its record is presumed dead after this many seconds (kopf: 60).
settings.peering.lifetime = {LIFETIME}
'''
ENV_HEADER = '''\
# How {role} of the Tenant operator is launched: the environment of its `kopf run`, as a Pod's
# `env:` (KEY=VALUE, read at every start; `operatorlab lab check two-replicas` restarts a replica
# whose file changed). kopf reads each option of `kopf run` from KOPF_RUN_<OPTION> as well
# (KOPF_RUN_STANDALONE=true is --standalone). Its POD_ID, {pod}, is set by the lab.
'''


class TwoReplicas(VariantLab):
    title = "Two replicas, every Tenant twice"
    summary = "the operator now runs as two replicas for availability, and both of them handle every Tenant"
    settle = 0.0  # each check run probes fresh Tenants itself, waiting as it goes
    edits = (PrependToFunction("configure", LIFETIME_SETTING),)
    hints = (
        "Read both replicas' logs (operatorlab lab logs two-replicas) for one fresh Tenant: which of them works on "
        "it? Two copies of a controller that each act on every event race each other's writes. How do replicas of "
        "one kopf operator agree that only one of them works?",
        "kopf's answer is peering, and --standalone (what labs/two-replicas/replica-*.env say) switches it off. "
        "Peered replicas announce themselves in a peering object (kubectl api-resources --api-group=kopf.dev) and all "
        "but the highest priority pause. Which object, which name, which priority does each replica use?",
        "In each replica-*.env replace KOPF_RUN_STANDALONE=true by KOPF_RUN_PEERING=<name> and a KOPF_RUN_PRIORITY "
        "of its own (100 and 50: equal priorities all pause), and create the ClusterKopfPeering <name> they share "
        "(the replicas watch all namespaces). Stopping a replica is not a fix: the check kills the working one and "
        "times the other's take-over. labs/two-replicas/SOLUTION.md (`operatorlab lab solve two-replicas`) explains.",
    )

    def env_file(self, role: str) -> Path:
        return self.workdir / f"{role}.env"

    def setup(self) -> None:
        self.write_variant()
        self.track("kopf.dev/v1", "ClusterKopfPeering", PEERING)
        self.create_peering(PEERING)
        self._launch(peered=True)
        self.create_tenant(TENANT, "1")

    def inject(self) -> None:
        # The replicas' launch configuration is regenerated from the operator's standard manifests
        # (operators/tenant/deploy: one replica, --standalone) and rolled out to both...
        self._launch(peered=False)
        # ...and a clean-up removes the peering object nobody announces itself in any more.
        checks.get_or_none(lambda: self.custom.delete_cluster_custom_object(*PEERINGS, PEERING))
        eventually(lambda: all(self._mentions(role, TENANT) > 0 for role in REPLICAS), timeout=30,
                   message=f"lab {self.id}: both replicas handle Tenant {TENANT}")

    def check(self) -> Iterator[Check]:
        yield (running := self._both_run())
        if not running.passed:
            return
        one, active = self._one_replica_works()
        yield one
        if active is None:
            yield Check("the other replica takes over when the working one is SIGKILLed (not run)", False,
                        "not run: it needs exactly one working replica")
            return
        yield self._the_other_takes_over(active)
        yield probes.settled(lambda: checks.tenant_reconciled(self.api, TENANT), budget=BUDGET)

    def solve(self) -> None:
        self.create_peering(PEERING)
        self._launch(peered=True)

    def reset(self) -> None:
        """Also delete the peering objects the replicas announced themselves in (whatever the learner named them)."""
        if self.state.exists:
            for name in self._peerings():
                self.track("kopf.dev/v1", "ClusterKopfPeering", name)
        super().reset()

    # -- the replicas -------------------------------------------------------------------

    def _launch(self, *, peered: bool) -> None:
        """Write both replicas' environment files and (re)start them: peered 100 and 50, or standalone."""
        for priority, (role, pod) in zip((100, 50), REPLICAS.items(), strict=True):
            how = (f"KOPF_RUN_PEERING={PEERING}\nKOPF_RUN_PRIORITY={priority}\n" if peered
                   else "KOPF_RUN_STANDALONE=true\n")
            self.remember_file(self.env_file(role))
            self.env_file(role).write_text(ENV_HEADER.format(role=role, pod=pod) + how)
        for role, pod in REPLICAS.items():
            self.run_operator(self.learner_copy, role, env={"POD_ID": pod}, env_file=self.env_file(role),
                              standalone=False)

    def create_peering(self, name: str) -> None:
        if checks.get_or_none(lambda: self.custom.get_cluster_custom_object(*PEERINGS, name)) is None:
            self.custom.create_cluster_custom_object(*PEERINGS, {
                "apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}})

    def _peerings(self) -> dict[str, dict]:
        """The ClusterKopfPeerings a replica of this lab announced itself in: name -> its status (POD_ID -> record)."""
        found = checks.get_or_none(lambda: self.custom.list_cluster_custom_object(*PEERINGS)) or {"items": []}
        return {p["metadata"]["name"]: p.get("status") or {} for p in found["items"]
                if set(REPLICAS.values()) & set(p.get("status") or {})}

    def _met(self) -> bool:
        """Whether both replicas have a live record in one peering object: each can see the other."""
        now = datetime.now(UTC)

        def alive(record: dict) -> bool:
            try:
                seen = datetime.fromisoformat(str(record["lastseen"]))
                return seen + timedelta(seconds=int(record.get("lifetime", 60))) > now
            except (KeyError, TypeError, ValueError):
                return False

        return any(all(alive(status.get(pod) or {}) for pod in REPLICAS.values())
                   for status in self._peerings().values())

    def _mentions(self, role: str, name: str) -> int:
        """How many lines of the replica's log are about Tenant ``name``: any work on it, not only a handler's success.

        kopf's verbose log names the object on every step it takes (adding its finalizer, a
        patch that conflicted, "not interested"): a replica that acts on an event says so; a
        paused one receives none.
        """
        try:
            return self.operator(role).log().count(f"[{name}] ")
        except LabNotStarted:
            return 0

    def _peering_lines(self, role: str) -> str:
        """The replica's last words about its peers since it last started (paused, resumed, no peering object)."""
        try:
            since_start = self.operator(role).log().rsplit("\n=== start ", 1)[-1]
            lines = [line for line in since_start.splitlines() if PEERING_LINE.search(line)]
        except LabNotStarted:
            return "no log"
        return lines[-1][:200] if lines else "nothing about peering (it runs standalone)"

    # -- checks -------------------------------------------------------------------------

    def _both_run(self) -> Check:
        """Both replicas the lab started are alive: the point is running two, safely."""
        label = "both replicas of the lab's operator are running"
        for role in REPLICAS:
            if not (running := probes.lab_operator_runs(self, role)).passed:
                return Check(label, False, f"{role}: {running.message}. Two replicas must run (`operatorlab lab "
                                           f"restart {self.id}` starts them again)")
        return Check(label, True, ", ".join(f"{role} pid {self.operator(role).pid}" for role in REPLICAS))

    def _one_replica_works(self) -> tuple[Check, str | None]:
        """A fresh Tenant converges, handled by one replica, while the other does not touch it at all."""
        label = "a new Tenant is handled by exactly one replica, and the other leaves it alone"
        # Peered replicas that have just started may not have met yet: until each sees the other's
        # record, both work. The probe is for replicas in their steady state, so it waits for them
        # to meet (peered ones only: a standalone replica never announces itself).
        if self._peerings():
            probes.wait(self._met, LIFETIME)
        with reactions.probe_tenant(self, "lab-tr-one") as name:
            if not probes.wait(lambda: checks.tenant_reconciled(self.api, name).passed
                               and any(probes.handled(self, name, role=role) for role in REPLICAS), BUDGET):
                return Check(label, False, f"Tenant {name} did not converge within {BUDGET:g} s: "
                                           f"{checks.tenant_reconciled(self.api, name).message}. What the replicas "
                                           f"last said about their peers: {self._peering_evidence()}"), None
            probes.wait(lambda: all(self._mentions(role, name) for role in REPLICAS), QUIET)
            working = [role for role in REPLICAS if self._mentions(role, name)]
        if len(working) > 1:
            counts = ", ".join(f"{role} {self._mentions(role, name)}" for role in REPLICAS)
            return Check(label, False, f"both replicas worked on Tenant {name} (lines about it in their logs: "
                                       f"{counts}; operatorlab lab logs {self.id}). What they last said about their "
                                       f"peers: {self._peering_evidence()}"), None
        return Check(label, True, f"Tenant {name}: handled by {working[0]}; the other never touched it"), working[0]

    def _the_other_takes_over(self, active: str) -> Check:
        """SIGKILL the working replica (no goodbye in the peering object): the other handles a fresh Tenant in time.

        The budget is the lifetime the dead replica announced (how long its peers must
        presume it alive) plus slack; the killed replica is started again afterwards, as a
        Deployment would replace its Pod.
        """
        label = "when the working replica is SIGKILLed, the other takes over and handles a new Tenant"
        standby = next(role for role in REPLICAS if role != active)
        lifetimes = [record.get("lifetime") for status in self._peerings().values()
                     for pod, record in status.items() if pod == REPLICAS[active]]
        lifetime = max((int(t) for t in lifetimes if t is not None), default=None)
        if lifetime is None:
            return Check(label, False, f"not run: {active} ({REPLICAS[active]}) announces itself in no "
                                       f"ClusterKopfPeering (kubectl get clusterkopfpeerings -o yaml), so its peer "
                                       f"could not know when it dies")
        if lifetime > MAX_LIFETIME:
            return Check(label, False, f"not run: {active} announces a peering lifetime of {lifetime} s: after a "
                                       f"crash, Tenants would wait that long (kopf's default is {MAX_LIFETIME} s)")
        budget = lifetime + TAKEOVER_SLACK
        self.operator(active).kill()
        try:
            with reactions.probe_tenant(self, "lab-tr-over") as name:
                took = reactions.gone_within(lambda: not (checks.tenant_reconciled(self.api, name).passed
                                                          and probes.handled(self, name, role=standby)), budget)
                if took is None:
                    return Check(label, False, f"{active} was SIGKILLed; {budget:g} s later (its lifetime {lifetime} "
                                               f"s and {TAKEOVER_SLACK:g}) Tenant {name} was not handled by {standby}: "
                                               f"{checks.tenant_reconciled(self.api, name).message}. {standby} last "
                                               f"said: {self._peering_lines(standby)}")
        finally:
            failed = probes.start_again(self, active)
        if failed:
            return Check(label, False, f"{standby} took over, but {active}: {failed}")
        return Check(label, True, f"{active} SIGKILLed; {standby} handled Tenant {name} {took:.1f} s later "
                                  f"(budget {budget:g} s: the lifetime {lifetime} s and {TAKEOVER_SLACK:g})")

    def _peering_evidence(self) -> str:
        return "; ".join(f"{role}: {self._peering_lines(role)}" for role in REPLICAS)

