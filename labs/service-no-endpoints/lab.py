"""service-no-endpoints: a Service's selector was changed to match no Pod; it has no endpoints."""

from __future__ import annotations

from collections.abc import Iterator

from operatorlab.labs import Check, Lab
from operatorlab.labs import workloads as w
from operatorlab.wait import eventually

NAMESPACE, APP = "lab-svc", "web"
REPLICAS = 2
WRONG = {"app": "web-frontend"}  # what the inject "aligns" the selector to
JOINS = f"a fresh Pod of {APP} becomes a ready endpoint of Service {APP}"


def _service(selector: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": APP, "labels": {"app": APP}},
            "spec": {"selector": selector, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


class ServiceNoEndpoints(Lab):
    title = "A Service that sends traffic nowhere"
    summary = (f"Service {NAMESPACE}/{APP} lists no endpoints though the Pods of Deployment {APP} are Running and "
               f"Ready: make the Service send to the app's Pods, today's and tomorrow's")
    drill = True
    xdist_group = "drill-service-no-endpoints"  # its bypass tests run the same lab: not at the same time
    settle = 0.0  # each check run makes a fresh Pod of the app and waits for it in the Service itself
    hints = (
        f"kubectl get endpointslices -n {NAMESPACE} -l kubernetes.io/service-name={APP}: what does the Service's "
        f"EndpointSlice list? And kubectl get pods -n {NAMESPACE} --show-labels.",
        "The EndpointSlice controller lists the Ready Pods whose labels match the Service's spec.selector. Compare "
        "the selector (kubectl describe svc) with the labels the Deployment's Pod template gives its Pods.",
        f"Set the Service's selector back to the app's Pod labels: kubectl patch svc {APP} -n {NAMESPACE} --type merge "
        f"-p '{{\"spec\":{{\"selector\":{{\"app\":\"{APP}\"}}}}}}'. An EndpointSlice written by hand, or Pods "
        f"relabelled to match, are not the repair. labs/service-no-endpoints/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        w.create_namespace(self, NAMESPACE)
        w.apps(self).create_namespaced_deployment(NAMESPACE, w.deployment(APP, replicas=REPLICAS))
        self.core.create_namespaced_service(NAMESPACE, _service({"app": APP}))
        eventually(lambda: w.deployment_ready(self, NAMESPACE, APP, REPLICAS).passed, timeout=120,
                   message=f"Deployment {NAMESPACE}/{APP} ready")

    def inject(self) -> None:
        # A "naming clean-up" re-applies the Service with the app's new name; the Pods keep the old one.
        self.core.patch_namespaced_service(APP, NAMESPACE, {"spec": {"selector": WRONG}})

    def check(self) -> Iterator[Check]:
        template = w.apps(self).read_namespaced_deployment(APP, NAMESPACE).spec.template
        yield w.pod_joins_service(self, NAMESPACE, APP, dict(template.metadata.labels or {}),
                                  w.template_spec(self, NAMESPACE, APP), label=JOINS)

    def solve(self) -> None:
        self.core.replace_namespaced_service(APP, NAMESPACE, _with_selector(self, {"app": APP}))


def _with_selector(lab: Lab, selector: dict[str, str]):
    """The Service as it is, with ``selector`` (a replace: a merge patch would keep the wrong keys)."""
    svc = lab.core.read_namespaced_service(APP, NAMESPACE)
    svc.spec.selector = selector
    return svc
