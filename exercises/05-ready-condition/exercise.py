"""Lesson 05: a Ready condition a user can wait on, graded on the real cluster with kwok's Pods.

The learner's ``sync_ready(custom, apps, namespace, name)`` is called as a controller would
call it, again and again (no operator runs): the check owns a Website in a namespace of
its own, applies its children with the Website operator's own ``reconcile_website``, and
holds the Deployment back with a ResourceQuota on Pods, so "not available" lasts as long as
the check wants; lifting the quota lets kwok run the Pods. Every write the learner's code
sends is counted on its API client.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from kubernetes import client, config

from operatorlab.exercises import Exercise
from operatorlab.grading import Check
from operatorlab.operators import load_module

GROUP, VERSION, PLURAL = "example.com", "v1", "websites"
NAME = "site"
QUOTA = "pods"
#: How often the check calls sync_ready: a controller's resync, made frequent.
PERIOD = 0.2
#: Seconds a state is held still: every call in it must agree, and write nothing after the first.
HOLD = 1.2
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class ReadyCondition(Exercise):
    lesson = "05"
    title = "sync_ready: Ready means the Pods serve, with observedGeneration, and no write when nothing changed"
    subject = "sync_ready"
    budget = 30.0
    hints = (
        "Ready is a promise to whoever runs `kubectl wait --for=condition=Ready`: what must be true of the "
        "Deployment before you make it? And which spec is the condition about?",
        "Ready=True only when the Deployment controller has seen the latest Deployment spec and every wanted Pod "
        "(spec.replicas, not status.replicas) is updated and ready; otherwise False with a reason and a message. "
        "observedGeneration is the Website's metadata.generation. Build the new conditions from the previous ones "
        "(lastTransitionTime moves only on a flip) and patch status only if they differ.",
        "Shape: read the Website and the Deployment (404: not ready); website_operator.rollout_status(deployment) "
        "says Complete or not; website_operator.ready_conditions(previous, ready=..., reason=..., message=..., "
        "generation=website['metadata']['generation'], now=...); if conditions != previous: "
        "custom.patch_namespaced_custom_object_status(..., {'status': {'conditions': conditions}}).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        website_operator = load_module("website")
        core, apps, custom = client.CoreV1Api(self.api), client.AppsV1Api(self.api), client.CustomObjectsApi(self.api)
        writes: list[str] = []
        theirs = _counting_client(self.kubeconfig_path, writes)
        namespace = f"ex05r-{uuid.uuid4().hex[:6]}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        try:
            def sync() -> dict[str, Any]:
                """One call of the learner's code; the Ready condition as it left it."""
                learner.sync_ready(client.CustomObjectsApi(theirs), client.AppsV1Api(theirs), namespace, NAME)
                website = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, NAME)
                return _ready(website) | {"rv": website["metadata"]["resourceVersion"]}

            def apply_children() -> None:
                website = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, NAME)
                website_operator.reconcile_website(NAME, namespace, website["spec"], uid=website["metadata"]["uid"],
                                                   apps=apps, core=core)

            def set_spec(replicas: int) -> None:
                custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, NAME,
                                                      {"spec": {"replicas": replicas}})

            _limit_pods(core, namespace, 0)
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "Website", "metadata": {"name": NAME},
                "spec": {"replicas": 1}})
            set_spec(2)  # generation 2 for the Website, 1 for the Deployment it gets: two different counters
            apply_children()

            held = _hold(sync, writes, want=lambda c: c.get("status") == "False" and c.get("observedGeneration") == 2)
            yield Check("no Pod can run: Ready=False, observedGeneration 2, with a reason and a message",
                        held.ok and bool(held.last.get("reason")) and bool(held.last.get("message")),
                        held.evidence)
            if not held.ok:
                yield _gave_up("the rest of the check: Ready=False was not right first")
                return
            if quiet := _quiet([held]):
                yield quiet
                yield _gave_up("the rest of the check: it wrote while nothing changed")
                return

            _limit_pods(core, namespace, None)
            came = _until(sync, lambda c: c.get("status") == "True", budget=self.budget)
            available = _available(apps, namespace)
            yield Check("the quota lifted, kwok runs both Pods: Ready=True, and only then",
                        came.ok and available, came.evidence + ("" if available or not came.ok else
                                                                "; but the Deployment is not available"))
            if not came.ok:
                yield _gave_up("the rest of the check: Ready never became True")
                return
            holds = [held, _hold(sync, writes, want=lambda c: c.get("status") == "True")]

            _limit_pods(core, namespace, 2)
            set_spec(3)  # generation 3; the Deployment wants 3, the quota lets 2 run
            apply_children()
            flipped = _until(sync, lambda c: c.get("status") == "False" and c.get("observedGeneration") == 3,
                             budget=5)
            held = _hold(sync, writes, want=lambda c: c.get("status") == "False" and c.get("observedGeneration") == 3)
            yield Check("the spec asks 3 Pods, 2 can run: Ready=False with observedGeneration 3",
                        flipped.ok and held.ok, flipped.evidence if not flipped.ok else held.evidence)
            holds.append(held)
            _limit_pods(core, namespace, None)
            back = _until(sync, lambda c: c.get("status") == "True" and c.get("observedGeneration") == 3,
                          budget=self.budget)
            available = _available(apps, namespace)
            yield Check("all 3 Pods ready: Ready=True again, observedGeneration 3, and only then",
                        back.ok and available, back.evidence + ("" if available or not back.ok else
                                                                "; but the Deployment is not available"))
            yield _quiet(holds) or Check(QUIET, True, f"{sum(h.calls for h in holds)} calls while nothing "
                                                             "changed, no write")
        finally:
            core.delete_namespace(namespace)


class _Run:
    """What repeated calls saw: the last condition, the resourceVersions, the writes sent."""

    def __init__(self) -> None:
        self.ok = False
        self.last: dict[str, Any] = {}
        self.calls = 0
        self.seen_rvs: set[str] = set()
        self.writes = 0
        self.changes = 0  # calls whose condition said something new (the ReplicaSet's message names each Pod)
        self.seconds = 0.0
        self.evidence = ""

    @property
    def rvs(self) -> int:
        return len(self.seen_rvs)

    @property
    def noisy(self) -> bool:
        """More writes, or new resourceVersions, than the condition had news to tell."""
        return self.writes > self.changes or self.rvs - 1 > self.changes

    @property
    def noise(self) -> str:
        news = f", {self.changes} of them with news" if self.changes else ""
        return (f"{self.writes} write(s) sent and {self.rvs - 1} new resourceVersion(s) in {self.calls} calls"
                f"{news}, while the state held still (last condition: {_shown(self.last)})")


def _until(sync: Callable[[], dict[str, Any]], want: Callable[[dict[str, Any]], bool], *, budget: float) -> _Run:
    """Call ``sync`` every PERIOD until the Ready condition is what ``want`` says, or ``budget`` passes."""
    run, started = _Run(), time.monotonic()
    while True:
        run.last = sync()
        run.calls += 1
        run.seconds = time.monotonic() - started
        if want(run.last):
            run.ok = True
            run.evidence = f"after {run.seconds:.1f} s: {_shown(run.last)}"
            return run
        if run.seconds >= budget:
            run.evidence = f"not within {budget:.0f} s; Ready is {_shown(run.last)}"
            return run
        time.sleep(PERIOD)


def _hold(sync: Callable[[], dict[str, Any]], writes: list[str], *, want: Callable[[dict[str, Any]], bool]) -> _Run:
    """Call ``sync`` for HOLD seconds of a world that does not change: every call must leave what ``want``
    says, and only the first may write."""
    run, started = _Run(), time.monotonic()
    run.last = sync()  # the one call allowed to write
    run.calls, run.ok = 1, want(run.last)
    sent = len(writes)
    while time.monotonic() - started < HOLD and run.ok:
        time.sleep(PERIOD)
        before, run.last = run.last, sync()
        run.calls += 1
        # The Pods' controller may still say something new while the spec holds still: a ReplicaSet
        # that retries a create the quota refuses names a fresh Pod in each FailedCreate message.
        # A condition that passes that news on may write it; one that says nothing new may not.
        run.changes += _content(run.last) != _content(before)
        run.seen_rvs.add(run.last["rv"])
        run.ok = want(run.last)
    run.writes = len(writes) - sent
    run.seen_rvs.add(run.last["rv"])
    run.evidence = f"{run.calls} calls; Ready is {_shown(run.last)}"
    return run


def _ready(website: dict[str, Any]) -> dict[str, Any]:
    conditions = (website.get("status") or {}).get("conditions") or []
    return dict(next((c for c in conditions if c.get("type") == "Ready"), {}))


def _content(condition: dict[str, Any]) -> tuple[Any, ...]:
    """What a Ready condition says, without when it last flipped or the object's resourceVersion."""
    return tuple(condition.get(k) for k in ("status", "observedGeneration", "reason", "message"))


def _shown(condition: dict[str, Any]) -> str:
    if not condition.get("type"):
        return "absent (no Ready condition in status.conditions)"
    keys = ("status", "observedGeneration", "reason", "message")
    return ", ".join(f"{k}={condition.get(k)!r}" for k in keys)


QUIET = "nothing changed, nothing written: no status write while the state held still"


def _quiet(holds: list[_Run]) -> Check | None:
    """A failing check if any of ``holds`` sent a write or moved the resourceVersion with nothing new to say."""
    noisy = [h for h in holds if h.noisy]
    return Check(QUIET, False, "; ".join(h.noise for h in noisy)) if noisy else None


def _gave_up(what: str) -> Check:
    return Check(what, False, "not graded: the check stopped at the first property that did not hold")


def _limit_pods(core: client.CoreV1Api, namespace: str, pods: int | None) -> None:
    """A ResourceQuota on the number of Pods (None: none), so the ReplicaSet can make only that many."""
    if pods is None:
        core.delete_namespaced_resource_quota(QUOTA, namespace)
        return
    body = {"metadata": {"name": QUOTA}, "spec": {"hard": {"pods": str(pods)}}}
    try:
        core.create_namespaced_resource_quota(namespace, body)
    except client.ApiException as e:
        if e.status != 409:
            raise
        core.replace_namespaced_resource_quota(QUOTA, namespace, body)


def _available(apps: client.AppsV1Api, namespace: str) -> bool:
    d = apps.read_namespaced_deployment(NAME, namespace)
    return (d.status.observed_generation or 0) >= d.metadata.generation and \
        (d.status.ready_replicas or 0) == d.spec.replicas


def _counting_client(kubeconfig: Any, writes: list[str]) -> client.ApiClient:
    """An API client for the learner's code that notes each write it sends (to the real API server)."""
    api = config.new_client_from_config(config_file=str(kubeconfig))
    send = api.call_api

    def call_api(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method.upper() in WRITES:
            writes.append(f"{method} {url}")
        return send(method, url, *args, **kwargs)

    api.call_api = call_api  # type: ignore[method-assign]
    return api
