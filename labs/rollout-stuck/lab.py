"""rollout-stuck: a new release asks for more CPU than any node has; the rollout never finishes.

kwok plays the kubelet with stages that make every Pod bound to a node Running and Ready
(``pod-ready``, whatever its image or readiness probe says), so a bad image or probe cannot
stall a rollout here. What the scheduler refuses can: a Pod requesting more CPU than any
Node's allocatable.
"""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab.labs import Check, Lab
from operatorlab.labs import workloads as w
from operatorlab.wait import eventually

NAMESPACE, APP = "lab-rollout", "api"
REPLICAS = 3
GOOD = {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}}
BAD_CPU = "250"  # the release notes said "250m"
RUNNING = f"Deployment {NAMESPACE}/{APP} runs {REPLICAS} up-to-date ready replicas"
ROLLS = f"a fresh rollout of {APP} finishes"
PLACED = f"a fresh Pod of {APP}'s template is placed on a node by the scheduler"


class RolloutStuck(Lab):
    title = "The rollout that never ends"
    summary = (f"the latest rollout of Deployment {NAMESPACE}/{APP} never finishes (kubectl rollout status "
               f"gives up): make it finish, with {REPLICAS} replicas, and keep rollouts working")
    drill = True
    xdist_group = "drill-rollout-stuck"  # its bypass tests run the same lab: not at the same time
    settle = 0.0  # each check run starts a fresh rollout and a fresh Pod and waits for them itself
    hints = (
        f"kubectl rollout status deployment/{APP} -n {NAMESPACE}; kubectl get rs,pods -n {NAMESPACE}: which Pods "
        "are new, and what state are they in? kubectl describe one of them.",
        "The scheduler says no node has room. Compare what the new Pod template requests "
        "(kubectl get deploy -o yaml: resources) with a node's allocatable (kubectl describe node).",
        f"The new release asks for {BAD_CPU} CPUs where {GOOD['requests']['cpu']} was meant. Roll back "
        f"(kubectl rollout undo deployment/{APP} -n {NAMESPACE}) or set the request right. Pinning the Pods to a node "
        "(nodeName) skips the scheduler, not the shortage. labs/rollout-stuck/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        w.create_namespace(self, NAMESPACE)
        w.apps(self).create_namespaced_deployment(NAMESPACE, w.deployment(APP, replicas=REPLICAS, resources=GOOD,
                                                                          progress_deadline=30))
        eventually(lambda: w.deployment_ready(self, NAMESPACE, APP, REPLICAS).passed, timeout=120,
                   message=f"Deployment {NAMESPACE}/{APP} ready")

    def inject(self) -> None:
        _set_cpu(self, BAD_CPU)

    def check(self) -> Iterator[Check]:
        placed = w.pod_placed(self, NAMESPACE, w.template_spec(self, NAMESPACE, APP), label=PLACED)
        yield placed
        # While the template's Pods find no node, the rollout cannot finish: nothing to wait for.
        running = w.deployment_ready(self, NAMESPACE, APP, REPLICAS, label=RUNNING,
                                     budget=w.BUDGET if placed.passed else 0)
        yield running
        if not running.passed:  # a rollout on top of a stuck one would only bury the revision to go back to
            yield Check(ROLLS, False, "not tried: the current rollout has not finished")
        else:
            yield w.rollout_completes(self, NAMESPACE, APP, replicas=REPLICAS, label=ROLLS)

    def solve(self) -> None:
        _set_cpu(self, GOOD["requests"]["cpu"])


def _set_cpu(lab: Lab, cpu: str) -> None:
    """A new release: the container's CPU request becomes ``cpu`` (a strategic merge patch, by container name)."""
    w.apps(lab).patch_namespaced_deployment(APP, NAMESPACE, {"spec": {"template": {"spec": {"containers": [
        {"name": APP, "resources": {"requests": {"cpu": cpu}}}]}}}})
