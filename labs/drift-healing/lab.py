"""drift-healing: a policy deleted by hand stays deleted until the operator's timer resyncs.

The check grades behaviour, twice: it deletes a baseline policy itself, in a fresh
labelled namespace, and times its return against a budget (a policy put back by hand
proves nothing); and it counts, at the lab's fault proxy, how often the operator
reconciles while nothing changes (a resync of a hundredth of a second would heal drift
at once and hammer the API server all day).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

from kubernetes import client

from operatorlab.grading import Check, converges
from operatorlab.labs import Lab, checks, probes
from operatorlab.labs.api_traffic import count_during
from operatorlab.operators import operator_path
from operatorlab.wait import eventually

BASELINE, NAMESPACE, LABEL = "lab-drift", "lab-drift-app", "lab-drift=yes"
BASELINES = ("hedronite.io", "v1alpha1", "namespacebaselines")
POLICIES = ("baseline-allow-dns", "baseline-default-deny")
BASELINE_LABEL = "hedronite.io/namespacebaseline"  # the operator's mark on its own policies
HEAL_BUDGET = 32.0  # the README's 30 s, plus a timer run's own time
QUIET_WINDOW = 6.0  # seconds of nothing happening in which the operator's reconciles are counted
MIN_INTERVAL = 4.0  # a resync more often than this, every baseline listing every namespace, is a load, not a net
# reconcile_baseline starts by listing the namespaces that carry the label: one LIST per baseline per reconcile.
RECONCILE_REQUEST = ("GET", r"^/api/v1/namespaces$")


class DriftHealing(Lab):
    title = "Drift: level-triggered healing"
    summary = "a NetworkPolicy deleted by hand in a baselined namespace never comes back"
    drill = True
    xdist_group = "nsb-operator"
    settle = 0.0  # each check run probes the operator itself, waiting as it goes
    hints = (
        "No event reaches the operator when someone deletes an object it made but does not react to. "
        "What in the NamespaceBaseline operator runs without an event, and how often?",
        "Its resync timer re-runs the reconcile every NSB_RESYNC_SECONDS; the operator logs its interval at start "
        "(operatorlab lab logs drift-healing). The lab's operator takes its environment from "
        "labs/drift-healing/operator.env. `lab check` also counts how often the operator reconciles while nothing "
        "changes: healing at once by resyncing constantly is not a fix.",
        "Set NSB_RESYNC_SECONDS in labs/drift-healing/operator.env to a value between about 5 and 30 (the lab used "
        "10); `operatorlab lab check drift-healing` restarts the operator with it. labs/drift-healing/SOLUTION.md "
        "(shown by `operatorlab lab solve drift-healing`) explains it, and the event-driven alternative.",
    )

    @property
    def env_file(self):
        return self.workdir / "operator.env"

    def setup(self) -> None:
        self.env_file.write_text("# The lab operator's environment (KEY=VALUE), read at every start.\n"
                                 "NSB_RESYNC_SECONDS=10\n")
        self.remember_file(self.env_file)
        proxy = self.proxy().start()
        self.run_operator(operator_path("namespacebaseline"), env_file=self.env_file, kubeconfig=proxy.kubeconfig)
        self.track("hedronite.io/v1alpha1", "NamespaceBaseline", BASELINE)
        self.track("v1", "Namespace", NAMESPACE)
        self.custom.create_cluster_custom_object(*BASELINES, {
            "apiVersion": "hedronite.io/v1alpha1", "kind": "NamespaceBaseline", "metadata": {"name": BASELINE},
            "spec": {"namespaceLabel": LABEL}})
        self._labelled_namespace(NAMESPACE)
        eventually(lambda: self._policies(NAMESPACE) == set(POLICIES), timeout=30, message="baseline policies applied")

    def inject(self) -> None:
        # A "tidy-up" of the deployment config sets the resync to an hour and rolls the operator...
        self.env_file.write_text(self.env_file.read_text().replace("NSB_RESYNC_SECONDS=10", "NSB_RESYNC_SECONDS=3600"))
        self.restart_operator()
        self._wait_resumed()  # its startup reconcile would put the policy back
        # ...and later someone deletes a policy by hand.
        client.NetworkingV1Api(self.api).delete_namespaced_network_policy("baseline-default-deny", NAMESPACE)

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield self._quiet_when_nothing_changes()
        yield self._heals_drift()
        yield self._lab_namespace_whole()

    def solve(self) -> None:
        self.env_file.write_text(self.env_file.read_text().replace("NSB_RESYNC_SECONDS=3600", "NSB_RESYNC_SECONDS=10"))
        self.restart_operator()

    # -- checks -------------------------------------------------------------------------

    def _quiet_when_nothing_changes(self) -> Check:
        """While nothing changes, each baseline is reconciled at most every MIN_INTERVAL s."""
        label = f"the operator reconciles at most every {MIN_INTERVAL:g} s while nothing changes"
        baselines = len(self.custom.list_cluster_custom_object(*BASELINES)["items"]) or 1
        method, path = RECONCILE_REQUEST
        seen = count_during(self.proxy(), QUIET_WINDOW, method=method, path=path)
        # The window's edges may each catch one more, and a restart's resume reconcile one more again.
        allowed = baselines * int(QUIET_WINDOW / MIN_INTERVAL + 2)
        evidence = (f"{seen} LISTs of namespaces (one per NamespaceBaseline per reconcile) in {QUIET_WINDOW:g} s "
                    f"with {baselines} NamespaceBaseline(s) and nothing changing")
        if seen > allowed:
            every = QUIET_WINDOW * baselines / seen
            return Check(label, False, f"{evidence}: about one reconcile every {every:.2g} s, "
                                       f"each a round of API requests for nothing. The operator's log says its "
                                       f"interval: operatorlab lab logs {self.id}")
        return Check(label, True, evidence)

    def _heals_drift(self) -> Check:
        """A policy deleted in a fresh labelled namespace comes back, as the operator's, within the budget."""
        label = f"a baseline policy deleted by someone comes back within {HEAL_BUDGET - 2:g} s"
        namespace = f"lab-drift-probe-{secrets.token_hex(3)}"
        victim = secrets.choice(POLICIES)
        networking = client.NetworkingV1Api(self.api)
        self.track("v1", "Namespace", namespace)
        self._labelled_namespace(namespace)
        try:
            if not probes.wait(lambda: self._policies(namespace) == set(POLICIES)):
                return Check(label, False, f"fresh namespace {namespace}, labelled {LABEL}, got no baseline "
                                           f"policies within {probes.STEP_BUDGET:g} s (has: "
                                           f"{sorted(self._policies(namespace))}). {self._log_hint()}")
            networking.delete_namespaced_network_policy(victim, namespace)
            deleted = time.monotonic()
            back = converges(lambda: self._is_ours(namespace, victim), budget=HEAL_BUDGET, interval=0.3)
        finally:
            checks.get_or_none(lambda: self.core.delete_namespace(namespace))
        if not back.ok:
            return Check(label, False, f"NetworkPolicy {namespace}/{victim}, deleted by the check "
                                       f"{time.monotonic() - deleted:.0f} s ago, has not come back "
                                       f"(kubectl get netpol -n {namespace}). {self._log_hint()}")
        return Check(label, True, f"{namespace}/{victim} back after {back.seconds:.1f} s")

    def _lab_namespace_whole(self) -> Check:
        have = self._policies(NAMESPACE)
        missing = sorted(set(POLICIES) - have)
        return Check(f"namespace {NAMESPACE} holds its baseline policies", not missing,
                     f"missing NetworkPolicy {', '.join(missing)} in {NAMESPACE} "
                     f"(kubectl get netpol -n {NAMESPACE}); present: {sorted(have)}" if missing else "all present")

    # -- helpers ------------------------------------------------------------------------

    def _labelled_namespace(self, name: str) -> None:
        key, value = LABEL.split("=")
        self.core.create_namespace({"metadata": {"name": name, "labels": {key: value}}})

    def _policies(self, namespace: str) -> set[str]:
        items = client.NetworkingV1Api(self.api).list_namespaced_network_policy(namespace).items
        return {p.metadata.name for p in items}

    def _is_ours(self, namespace: str, name: str) -> bool:
        policy = checks.get_or_none(lambda: client.NetworkingV1Api(self.api).read_namespaced_network_policy(
            name, namespace))
        return policy is not None and (policy.metadata.labels or {}).get(BASELINE_LABEL) == BASELINE

    def _wait_resumed(self) -> None:
        """Until the operator, since its last start, ran its reconcile (kopf's on.resume at startup)."""
        eventually(lambda: "'reconcile' succeeded" in self.operator().log().rsplit("=== start", 1)[-1],
                   timeout=30, message=f"lab {self.id}: the restarted operator's resume reconcile")

    def _log_hint(self) -> str:
        return f"The operator's log: operatorlab lab logs {self.id}"
