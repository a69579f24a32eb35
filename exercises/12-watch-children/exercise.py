"""Lesson 12: watch what you own, graded by running your watcher inside a copy of the Website operator.

The learner writes ``watch_children``: a kopf handler, decorator included, on the Website
operator's own Deployments. The check drops the operator's own Deployment watcher (its
``@kopf.on.event``), puts the learner's in, runs that copy as ``kopf run`` in a namespace
of its own behind the fault proxy (which records every request) and perturbs the world:
it scales the Website's Deployment to zero by hand, then deletes it, and times each heal
while the operator runs; it scales a hand-made Deployment of the same namespace, which the
watcher must not be called for; and over a quiet window the operator must send nothing
but its watches (a timer that re-reads every second heals too, and is not watching).
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from kubernetes import client

from operatorlab.exercises import Exercise
from operatorlab.faults import variants
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check, within
from operatorlab.operators import OperatorProcess, operator_path

SUBJECT = "watch_children"
WEBSITES = ("example.com", "v1", "websites")
REPLICAS = 2
QUIET = 4.0  # seconds of steady state in which only the watches may run
FOREIGN = "hand-made"  # a Deployment of the check's namespace that no Website owns


class WatchChildren(Exercise):
    lesson = "12"
    title = "watch_children: heal an owned Deployment scaled or deleted by hand, without a timer"
    subject = SUBJECT
    xdist_group = "website-operator"  # it runs a Website operator (in a namespace of its own)
    budget = 10.0  # a heal: a watch event, a reconcile, on a busy machine
    hints = (
        "Nothing about the Website changed when someone scaled its Deployment: which object's events does "
        "the operator have to receive, and which of those objects are its own?",
        "Decorate watch_children with @kopf.on.event on apps/v1 deployments, filtered with labels= to the "
        "operator's managed-by label. For each event find the owning Website (owning_website(body)) and its "
        "spec in the `websites` index (no GET), and re-apply it when the Deployment was DELETED or drifted.",
        "known = next(iter(websites.get((namespace, website), [])), None); heal when type == 'DELETED' or "
        "deployment_drift(body, website_spec(website, known['spec'])): _heal(namespace, website, known, why, logger).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        source = variant_source(Path(learner.__file__ or "").read_text())
        suffix = uuid.uuid4().hex[:6]
        namespace = f"ex12w-{suffix}"
        name = "site"
        workdir = Path(tempfile.mkdtemp(prefix="ex12w-"))
        (workdir / "website_operator.py").write_text(source)
        core, apps = client.CoreV1Api(self.api), client.AppsV1Api(self.api)
        custom = client.CustomObjectsApi(self.api)
        core.create_namespace({"metadata": {"name": namespace}})
        proxy = FaultProxy(self.kubeconfig_path, workdir, name="ex12w").start()
        operator = None
        try:
            operator = OperatorProcess(workdir / "website_operator.py", kubeconfig=proxy.kubeconfig,
                                       namespaces=[namespace]).start()
            stopped = lambda: not operator.running  # noqa: E731 - nothing changes once it exited
            custom.create_namespaced_custom_object(*WEBSITES[:2], namespace, WEBSITES[2], {
                "apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": name},
                "spec": {"image": "nginx:1.27", "replicas": REPLICAS}})
            apps.create_namespaced_deployment(namespace, _foreign(namespace))
            ready = within("the operator with your watcher starts and applies the Website's Deployment",
                           lambda: _replicas(apps, namespace, name) == REPLICAS
                           and _phase(custom, namespace, name) == "Applied", budget=20.0, give_up=stopped,
                           evidence=lambda last: f"replicas {last}; the operator's log ends: "
                                                 f"{operator.log_tail(3) if operator else ''}")
            yield ready
            if not ready.passed:
                return
            since = time.time()
            apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": 0}})
            scaled = within(f"a Deployment scaled to 0 by hand is back at {REPLICAS} replicas while the operator runs",
                            lambda: _replicas(apps, namespace, name) == REPLICAS
                            and _wrote(proxy, f"/namespaces/{namespace}/deployments/{name}", since),
                            budget=self.budget, give_up=stopped,
                            evidence=lambda last: f"spec.replicas {_replicas(apps, namespace, name)}")
            yield scaled
            if not scaled.passed:
                yield Check("a Deployment deleted by hand comes back (not run)", False,
                            "not run: a scaled Deployment was not put back")
                return
            uid = apps.read_namespaced_deployment(name, namespace).metadata.uid
            since = time.time()
            apps.delete_namespaced_deployment(name, namespace)
            yield within("a Deployment deleted by hand comes back (a new one) while the operator runs",
                         lambda: _uid(apps, namespace, name) not in (None, uid)
                         and _wrote(proxy, f"/namespaces/{namespace}/deployments", since),
                         budget=self.budget, give_up=stopped,
                         evidence=lambda _: "no Deployment" if _uid(apps, namespace, name) is None
                         else "the same Deployment: its delete has not gone through")
            yield _leaves_foreign(apps, operator, namespace)
            yield _quiet(proxy, namespace)
        finally:
            if operator is not None:
                operator.stop()
            proxy.stop()
            _cleanup(core, namespace)


def variant_source(learner_source: str) -> str:
    """The Website operator without its own Deployment watcher, with the learner's code appended."""
    operator = operator_path("website").read_text()
    without = variants.apply(operator, [variants.DropDecorator("deployment_status", "kopf.on.event")])
    lines = [line for line in learner_source.splitlines(keepends=True) if not line.startswith("from __future__")]
    if f"def {SUBJECT}(" not in learner_source:
        raise ValueError(f"define {SUBJECT} (a module-level function with its kopf decorator)")
    return without + "\n\n# --- your watcher ---\n" + "".join(lines)


def _foreign(namespace: str) -> dict:
    """A Deployment someone made by hand, beside the Website's: the operator has no business with it."""
    labels = {"app": FOREIGN}
    return {"metadata": {"name": FOREIGN, "namespace": namespace, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}


def _leaves_foreign(apps: client.AppsV1Api, operator: OperatorProcess, namespace: str) -> Check:
    """Scale the hand-made Deployment: the watcher must not be called for it, nor change it."""
    apps.patch_namespaced_deployment_scale(FOREIGN, namespace, {"spec": {"replicas": 3}})
    time.sleep(1.0)  # the window in which a handler on every Deployment would run for it
    ran = [line.strip() for line in operator.log().splitlines()
           if f"[{namespace}/{FOREIGN}]" in line and SUBJECT in line]
    replicas = _replicas(apps, namespace, FOREIGN)
    ok = not ran and replicas == 3
    return Check("a Deployment the operator does not own: your watcher is not called for it and leaves it as it is",
                 ok, f"hand-made Deployment at {replicas} replicas; " + (
                     f"your handler ran for it ({len(ran)}x): {ran[0][-120:]}; filter on the operator's label"
                     if ran else "no handler ran for it"))


def _wrote(proxy: FaultProxy, path: str, since: float) -> bool:
    """Whether the check's own operator (behind the proxy) wrote to ``path`` since ``since``."""
    return any(r["method"] in ("POST", "PUT", "PATCH") and r["t"] >= since and path in r["path"]
               for r in proxy.stats()["requests"])


def _quiet(proxy: FaultProxy, namespace: str) -> Check:
    """Steady state: a watcher waits on its watches; a timer would read (or write) every interval."""
    since = time.time() + 1.0  # let the heal's own writes (status, Events) land first
    time.sleep(QUIET + 1.0)
    sent = [f"{r['method']} {r['path']}" for r in proxy.stats()["requests"]
            if r["t"] >= since and not r["watch"] and f"/namespaces/{namespace}/" in r["path"]]
    return Check(f"steady state: over {QUIET:g} s the operator sends nothing but its watches", not sent,
                 f"{len(sent)} requests" + (f", e.g. {sent[:3]}: a timer or a GET per event, not a watch"
                                            if sent else ""))


def _deployment(apps: client.AppsV1Api, namespace: str, name: str) -> client.V1Deployment | None:
    try:
        return apps.read_namespaced_deployment(name, namespace)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def _replicas(apps: client.AppsV1Api, namespace: str, name: str) -> int | None:
    found = _deployment(apps, namespace, name)
    return found.spec.replicas if found else None


def _phase(custom: client.CustomObjectsApi, namespace: str, name: str) -> str | None:
    """The Website's status.phase: Applied once its reconcile handler is done (so it is not what heals)."""
    website = custom.get_namespaced_custom_object(*WEBSITES[:2], namespace, WEBSITES[2], name)
    return (website.get("status") or {}).get("phase")


def _uid(apps: client.AppsV1Api, namespace: str, name: str) -> str | None:
    found = _deployment(apps, namespace, name)
    return found.metadata.uid if found else None


def _cleanup(core: client.CoreV1Api, namespace: str) -> None:
    """The operator is stopped (a Website has no finalizer): the namespace takes the Website and its children."""
    try:
        core.delete_namespace(namespace)
    except client.ApiException as e:
        if e.status != 404:
            raise
