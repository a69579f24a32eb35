"""drift-healing: a policy deleted by hand stays deleted until the operator's timer resyncs."""

from __future__ import annotations

import re

from operatorlab.labs import Check, Lab
from operatorlab.operators import operator_path
from operatorlab.wait import eventually

BASELINE, NAMESPACE, LABEL = "lab-drift", "lab-drift-app", "lab-drift=yes"
BASELINES = ("hedronite.io", "v1alpha1", "namespacebaselines")
POLICIES = ("baseline-allow-dns", "baseline-default-deny")
RESYNC_LIMIT = 30.0


class DriftHealing(Lab):
    title = "Drift: level-triggered healing"
    summary = "someone deleted a NetworkPolicy by hand and nothing puts it back: make the operator heal drift"
    drill = True
    xdist_group = "nsb-operator"
    hints = (
        "No event reaches the operator when someone deletes an object it made but does not watch. "
        "What in the NamespaceBaseline operator runs without an event?",
        "Its resync timer re-runs the reconcile every NSB_RESYNC_SECONDS. The operator logs its interval at start; "
        "the lab's operator takes its environment from labs/drift-healing/operator.env.",
        f"Set NSB_RESYNC_SECONDS to at most {RESYNC_LIMIT:g} in labs/drift-healing/operator.env; "
        "`operatorlab lab check drift-healing` restarts the operator with it.",
    )

    @property
    def env_file(self):
        return self.workdir / "operator.env"

    def setup(self) -> None:
        self.env_file.write_text("# The lab operator's environment (KEY=VALUE), read at every start.\n"
                                 "NSB_RESYNC_SECONDS=10\n")
        self.remember_file(self.env_file)
        self.run_operator(operator_path("namespacebaseline"), env_file=self.env_file)
        self.track("hedronite.io/v1alpha1", "NamespaceBaseline", BASELINE)
        self.track("v1", "Namespace", NAMESPACE)
        self.custom.create_cluster_custom_object(*BASELINES, {
            "apiVersion": "hedronite.io/v1alpha1", "kind": "NamespaceBaseline", "metadata": {"name": BASELINE},
            "spec": {"namespaceLabel": LABEL}})
        key, value = LABEL.split("=")
        self.core.create_namespace({"metadata": {"name": NAMESPACE, "labels": {key: value}}})
        eventually(lambda: self._policies() == set(POLICIES), timeout=30, message="baseline policies applied")

    def inject(self) -> None:
        from kubernetes import client

        # A "tidy-up" of the deployment config sets the resync to an hour and rolls the operator...
        self.env_file.write_text(self.env_file.read_text().replace("NSB_RESYNC_SECONDS=10", "NSB_RESYNC_SECONDS=3600"))
        self.restart_operator()
        # ...and later someone deletes a policy by hand.
        client.NetworkingV1Api(self.api).delete_namespaced_network_policy("baseline-default-deny", NAMESPACE)

    def check(self) -> list[Check]:
        have = self._policies()
        missing = sorted(set(POLICIES) - have)
        results = [Check(f"namespace {NAMESPACE} holds its baseline policies", not missing,
                         f"missing NetworkPolicy {', '.join(missing)} in {NAMESPACE} "
                         f"(kubectl get netpol -n {NAMESPACE}); present: {sorted(have)}" if missing else "all present")]
        seconds = self._resync_seconds()
        results.append(Check(f"the operator resyncs at least every {RESYNC_LIMIT:g} s", seconds is not None
                             and seconds <= RESYNC_LIMIT,
                             f"the operator's log says: resync every {seconds:g}s" if seconds is not None
                             else "the lab's operator logged no resync interval (is it running?)"))
        return results

    def solve(self) -> None:
        self.env_file.write_text(self.env_file.read_text().replace("NSB_RESYNC_SECONDS=3600", "NSB_RESYNC_SECONDS=10"))
        self.restart_operator()

    def _policies(self) -> set[str]:
        from kubernetes import client

        items = client.NetworkingV1Api(self.api).list_namespaced_network_policy(NAMESPACE).items
        return {p.metadata.name for p in items}

    def _resync_seconds(self) -> float | None:
        found = re.findall(r"resync every ([0-9.]+)s", self.operator().log())
        return float(found[-1]) if found else None
