"""website-drift: a Website's Deployment deleted or scaled by hand, and the operator never notices."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

from kubernetes import client

from operatorlab.faults.variants import ReplaceFunction
from operatorlab.labs import Check, checks, probes
from operatorlab.labs.tenantlab import VariantLab
from operatorlab.operators import operator_path

NAMESPACE = "lab-website-drift"
SITE = "shop"
REPLICAS = 2
WEBSITES = ("example.com", "v1", "websites")
BUDGET = 20.0  # seconds the operator gets to put a probe Website's Deployment back, or to make it ready
RESUMED = f"[{NAMESPACE}/{SITE}] Handler 'reconcile' succeeded."  # kopf's log line for each reconcile of shop

# A "simplification" in the release: drift is only logged, on the theory that the next reconcile
# repairs it. Nothing runs one between two changes of the Website but the operator's next start.
LOG_ONLY = '''\
def _heal(namespace: str, website: str, known: Mapping[str, Any], why: str, logger: kopf.Logger) -> None:
    """Note the drift; the next reconcile of the Website (on update, or on resume) applies it again."""
    logger.info(f"Website {namespace}/{website}: {why}; left to the next reconcile")
'''


class WebsiteDrift(VariantLab):
    title = "The site that is down while its Website says Complete"
    summary = "a Website's Pods are gone, yet it reports a complete rollout, and nothing brings them back"
    variant_of = "website"
    # Its operator watches the lab's namespace only, so it runs on the shared cluster beside other
    # Website operators; its tests share one group, as they share the lab's namespace.
    xdist_group = "labs-website-drift"
    settle = 0.0  # each check run perturbs a fresh Website itself, waiting as it goes
    edits = (ReplaceFunction("_heal", LOG_ONLY),)
    hints = (
        f"Compare what Website {SITE} (kubectl get website {SITE} -n {NAMESPACE} -o yaml) says with what runs "
        f"(kubectl get deploy,pods -n {NAMESPACE}). Who is supposed to notice the difference, and when?",
        "Read the lab's operator log (operatorlab lab logs website-drift) after deleting or scaling a Deployment: "
        "the operator sees the change. Follow what deployment_status() in labs/website-drift/website_operator.py "
        "does with it, and which reconcile would ever run next.",
        "_heal() only logs: the next reconcile it counts on runs on an update of the Website or the operator's "
        "next start, not on a change of the Deployment. Make _heal() run reconcile_website() for the Website (its "
        "uid and spec are in `known`, from the websites index) and post a DriftDetected Event; "
        "labs/website-drift/SOLUTION.md (`operatorlab lab solve website-drift`) explains.",
    )

    def setup(self) -> None:
        self.track("v1", "Namespace", NAMESPACE)
        self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        self.run_operator(operator_path(self.variant_of), namespaces=[NAMESPACE])
        self.custom.create_namespaced_custom_object(*WEBSITES[:2], NAMESPACE, WEBSITES[2], _website(SITE))
        if not probes.wait(lambda: _serving(self.custom, self.apps, SITE), 60):
            raise RuntimeError(f"lab {self.id}: Website {SITE} not ready within 60 s:\n{self.operator().log_tail()}")

    def inject(self) -> None:
        # The previous release rolls out; later someone "tidies up" a Deployment by hand.
        self.write_variant()
        resumed = self.operator().log().count(RESUMED)
        self.start_variant(namespaces=[NAMESPACE])
        # Its resume of shop first (kopf resumes existing objects just after it reports live):
        # a delete before that would be undone by the resume itself.
        probes.wait(lambda: self.operator().log().count(RESUMED) > resumed, 30)
        self.apps.delete_namespaced_deployment(SITE, NAMESPACE)
        probes.wait(lambda: checks.get_or_none(lambda: self.apps.read_namespaced_deployment(SITE, NAMESPACE))
                    is None, 30)

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield self._site_serves()
        yield self._probe_drift()

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant(namespaces=[NAMESPACE])

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    # -- checks -------------------------------------------------------------------------

    def _site_serves(self) -> Check:
        label = f"Website {SITE} serves: its Deployment exists with {REPLICAS} ready Pods, and its status says so"
        if probes.wait(lambda: _serving(self.custom, self.apps, SITE), BUDGET):  # a repair's Pods take a moment
            return Check(label, True, f"{REPLICAS} ready Pods")
        deployment = checks.get_or_none(lambda: self.apps.read_namespaced_deployment(SITE, NAMESPACE))
        status = _status(self.custom, SITE)
        if deployment is None:
            return Check(label, False, f"no Deployment {NAMESPACE}/{SITE}, while the Website's status says "
                                       f"rollout={status.get('rollout')!r}, readyReplicas="
                                       f"{status.get('readyReplicas')!r} (kubectl get deploy -n {NAMESPACE})")
        return Check(label, False, f"Deployment {NAMESPACE}/{SITE}: spec.replicas={deployment.spec.replicas}, "
                                   f"readyReplicas={deployment.status.ready_replicas} after {BUDGET:g} s; the "
                                   f"Website's status: rollout={status.get('rollout')!r}")

    def _probe_drift(self) -> Check:
        """A fresh Website: its Deployment scaled by hand, then deleted by hand, comes back each time, unrestarted."""
        label = (f"a Deployment scaled or deleted by hand comes back within {BUDGET:g} s while the operator runs "
                 f"(no restart)")
        name = f"probe-{secrets.token_hex(3)}"
        log = f"The operator's log: operatorlab lab logs {self.id}"
        pid = self.operator().pid
        self.custom.create_namespaced_custom_object(*WEBSITES[:2], NAMESPACE, WEBSITES[2], _website(name))
        try:
            if not probes.wait(lambda: _serving(self.custom, self.apps, name), BUDGET):
                return Check(label, False, f"Website {name} created {BUDGET:g} s ago is not serving yet: "
                                           f"{_status(self.custom, name)}. {log}")
            self.apps.patch_namespaced_deployment_scale(name, NAMESPACE, {"spec": {"replicas": 0}})
            if not probes.wait(lambda: self.apps.read_namespaced_deployment(name, NAMESPACE).spec.replicas
                               == REPLICAS, BUDGET):
                return Check(label, False, f"Deployment {NAMESPACE}/{name} scaled to 0 by hand {BUDGET:g} s ago "
                                           f"still has spec.replicas="
                                           f"{self.apps.read_namespaced_deployment(name, NAMESPACE).spec.replicas}; "
                                           f"the Website asks for {REPLICAS}. {log}")
            uid = self.apps.read_namespaced_deployment(name, NAMESPACE).metadata.uid
            self.apps.delete_namespaced_deployment(name, NAMESPACE)
            if not probes.wait(lambda: _serving(self.custom, self.apps, name, not_uid=uid), BUDGET):
                state = "not re-created" if _deployment(self.apps, name) is None else "not ready"
                return Check(label, False, f"Deployment {NAMESPACE}/{name} deleted by hand {BUDGET:g} s ago: {state}; "
                                           f"the Website's status says {_status(self.custom, name)}. {log}")
            if self.operator().pid != pid:
                return Check(label, False, "the operator was restarted meanwhile: on.resume put it back, not the "
                                           "running operator")
        finally:
            checks.get_or_none(lambda: self.custom.delete_namespaced_custom_object(*WEBSITES[:2], NAMESPACE,
                                                                                  WEBSITES[2], name))
        return Check(label, True, f"Website {name}: scaled to 0 and deleted by hand, put back each time")


def _website(name: str) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": name},
            "spec": {"replicas": REPLICAS}}


def _status(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    site = checks.get_or_none(lambda: custom.get_namespaced_custom_object(*WEBSITES[:2], NAMESPACE, WEBSITES[2], name))
    return dict((site or {}).get("status") or {})


def _deployment(apps: client.AppsV1Api, name: str) -> client.V1Deployment | None:
    return checks.get_or_none(lambda: apps.read_namespaced_deployment(name, NAMESPACE))


def _serving(custom: client.CustomObjectsApi, apps: client.AppsV1Api, name: str, not_uid: str | None = None) -> bool:
    """The Website's Deployment (another than ``not_uid``) has its Pods ready, and the Website's status says so."""
    deployment = _deployment(apps, name)
    if deployment is None or deployment.metadata.uid == not_uid or deployment.status is None:
        return False
    status = _status(custom, name)
    return bool(deployment.spec.replicas == REPLICAS and deployment.status.ready_replicas == REPLICAS
                and status.get("rollout") == "Complete" and status.get("readyReplicas") == REPLICAS)
