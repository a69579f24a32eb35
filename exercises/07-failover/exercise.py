"""Lesson 07: replicas that fail over, graded by SIGKILLing the one that works.

The learner's startup handler runs inside two replicas of the real Website operator (kopf
loads the operator's file and theirs), peered through a KopfPeering object of the check's
own, each with its own Pod name ($HOSTNAME), as a Deployment's replicas are. The check
reads what each replica announced in the peering object, proves that exactly one of them
reconciles, then SIGKILLs that one (no goodbye in the peering object, as when a node is
lost) and times how long the other takes to handle a new Website.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import kopf
from kubernetes import client

from operatorlab.exercises import Exercise
from operatorlab.grading import Check, converges, within
from operatorlab.operators import OperatorProcess, operator_path

WEBSITES = ("example.com", "v1", "websites")
PEERINGS = ("kopf.dev", "v1", "kopfpeerings")
LIFETIME = (10, 20)  # seconds: the lifetimes that fail over fast enough without a renewal every second
HANDLED = "Handler 'reconcile' succeeded"
# kopf 1.45 logs this each time a replica sees a peer of its own priority (and stays paused).
PAUSED = "Possibly conflicting operators with the same priority"
# ... and this once, when a replica first sees a live peer of a higher priority and pauses.
YIELDED = "Pausing operations in favour of"


class Failover(Exercise):
    lesson = "07"
    title = "configure_peering: two replicas, one works, the other takes over after a SIGKILL"
    subject = "configure_peering"
    budget = float(LIFETIME[1] + 5)
    hints = (
        "Two replicas of one Deployment run the very same code. What differs between them, and what does kopf "
        "do when a peer disappears without saying goodbye?",
        "settings.peering.priority: the replica with the highest works, equal ones all pause. "
        "settings.peering.lifetime: how long a silent peer still counts (kopf's default is 60 s); kopf renews "
        f"it every lifetime minus 5-10 s, at least every second. Between {LIFETIME[0]} and {LIFETIME[1]} s is sane.",
        "Shape: a @kopf.on.startup() handler setting settings.peering.priority from $HOSTNAME (e.g. the first "
        "8 hex digits of its sha256, as an int) and settings.peering.lifetime = 10.",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        learner.configure_peering(settings=kopf.OperatorSettings(), logger=logging.getLogger("ex07f"), memo=None)
        suffix = uuid.uuid4().hex[:6]
        namespace = peering = f"ex07f-{suffix}"
        core, custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)
        core.create_namespace({"metadata": {"name": namespace}})
        replicas: dict[str, OperatorProcess] = {}
        try:
            custom.create_namespaced_custom_object(*PEERINGS[:2], namespace, PEERINGS[2], {
                "apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": peering}})
            for pod in (f"website-operator-{suffix}-a", f"website-operator-{suffix}-b"):
                replicas[pod] = OperatorProcess(operator_path("website"), kubeconfig=self.kubeconfig_path,
                                                namespaces=[namespace], peering=peering,
                                                extra_args=[str(Path(learner.__file__).resolve())],
                                                env={"HOSTNAME": pod})
            _start_all(list(replicas.values()))
            peers = converges(lambda: _peers(custom, namespace, peering) if len(
                _peers(custom, namespace, peering)) == 2 else None, budget=15.0).last or {}
            priorities = sorted(p.get("priority") for p in peers.values())
            lifetimes = sorted(p.get("lifetime") for p in peers.values())
            distinct = len(peers) == 2 and len(set(priorities)) == 2
            sane = len(peers) == 2 and all(LIFETIME[0] <= (t or 0) <= LIFETIME[1] for t in lifetimes)
            yield Check("the two replicas announce different priorities in the peering", distinct,
                        f"priorities {priorities}" + ("" if distinct else ": equal priorities all pause"))
            yield Check(f"... and a lifetime between {LIFETIME[0]} and {LIFETIME[1]} s", sane,
                        f"lifetimes {lifetimes} s" + ("" if sane else " (kopf's default is 60 s: a minute without an "
                                                     "operator after a SIGKILL; below 10 s kopf renews every second)"))
            if not sane:
                yield Check("exactly one replica reconciles, and the other takes over after a SIGKILL "
                            "(not run)", False, "not run: with that lifetime the take-over cannot be "
                                                "timed against a sane budget; fix the lifetime first")
                return
            paused = lambda: all(PAUSED in r.log() for r in replicas.values())  # noqa: E731 - equal priorities
            # A replica pauses only once its own watch of the peering object shows the higher peer:
            # until then (a moment after start, longer on a busy machine) both replicas work, in a real
            # Deployment too. Wait for that moment, as a rollout's readiness would, before grading.
            converges(lambda: any(YIELDED in r.log() for r in replicas.values()), budget=15.0, give_up=paused)
            _website(custom, namespace, "first")
            one = converges(lambda: [p for p, r in replicas.items() if _handled(r, "first")], budget=10.0,
                            give_up=paused).last or []
            time.sleep(1.0)  # time for a second replica to handle it too, if it is going to
            both = [p for p, r in replicas.items() if _handled(r, "first")]
            yield Check("exactly one replica reconciles a new Website", len(both) == 1,
                        f"handled by {len(both)} replica(s)" + ("" if both else ": every replica paused; "
                        "the logs say 'Pausing' (kubectl get kopfpeering -o yaml shows the peers)"))
            if len(both) != 1:
                yield Check("the other replica takes over after a SIGKILL (not run)", False,
                            "not run: it needs exactly one working replica")
                return
            active, standby = replicas[one[0]], next(r for p, r in replicas.items() if p != one[0])
            active.kill()
            _website(custom, namespace, "second")
            yield within(f"after the working replica is SIGKILLed, the other handles a new Website within "
                         f"its lifetime ({max(lifetimes)} s) and a few seconds",
                         lambda: _handled(standby, "second"), budget=max(lifetimes) + 5.0,
                         give_up=lambda: not standby.running,
                         evidence=lambda _: f"not handled; the standby's log ends: {standby.log_tail(2)}")
        finally:
            for replica in replicas.values():
                replica.kill()  # no goodbye needed: the namespace and its peering object go
            core.delete_namespace(namespace)


def _start_all(replicas: list[OperatorProcess]) -> None:
    """Start the replicas side by side, as a Deployment does (each waits for its probe)."""
    errors: list[BaseException] = []

    def start(replica: OperatorProcess) -> None:
        try:
            replica.start()
        except BaseException as e:  # noqa: BLE001 - raised below, in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=start, args=(r,)) for r in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _peers(custom: client.CustomObjectsApi, namespace: str, peering: str) -> dict:
    """The peers the KopfPeering lists (its status: identity -> priority, lifetime, lastseen)."""
    body = custom.get_namespaced_custom_object(*PEERINGS[:2], namespace, PEERINGS[2], peering)
    return {k: v for k, v in (body.get("status") or {}).items() if isinstance(v, dict)}


def _website(custom: client.CustomObjectsApi, namespace: str, name: str) -> None:
    custom.create_namespaced_custom_object(*WEBSITES[:2], namespace, WEBSITES[2], {
        "apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": name}, "spec": {}})


def _handled(replica: OperatorProcess, website: str) -> bool:
    """Whether the replica's log shows the reconcile of ``website`` succeeding."""
    return re.search(rf"\[[^\]]*/{website}\] {re.escape(HANDLED)}", replica.log()) is not None
