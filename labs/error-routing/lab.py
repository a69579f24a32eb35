"""error-routing: an outage is given up on for good, and a refusal is retried for ever."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

from kubernetes import client

from operatorlab import tenants
from operatorlab.faults.variants import ReplaceFunction
from operatorlab.labs import Check, checks, probes, reactions
from operatorlab.labs.tenantlab import VariantLab
from operatorlab.wait import eventually

FINE = "lab-er-fine"  # a Tenant like any other: the known good state
BLIP = "lab-er-blip"  # created during a one-request outage
HUGE = "lab-er-huge"  # asks for more CPU than the cluster's policy allows
CAP = 64  # CPUs: the most a tenant quota may hold, by the cluster's admission policy
POLICY = "lab-er-tenant-quota-cap"
BUDGET = 25.0  # seconds to converge after a one-request outage (the operator's default retry delay is 10 s)
REPORT = 20.0  # seconds the operator gets to report a refused spec
WINDOW = 6.0  # seconds the attempts at a refused spec are counted, once it was reported
NAMESPACES = r"^/api/v1/namespaces$"

# The release "simplifies" the error routing: a server error means the server is broken (give
# up), a refusal may pass next time (a webhook, a policy): try again soon.
BROKEN_ROUTING = '''\
def _route_api_error(e: ApiException) -> kopf.PermanentError | kopf.TemporaryError | None:
    """Map an API error to what a retry can achieve; None: leave it as it is."""
    status = e.status or 0
    message = _server_message(e)
    if status == 422:
        # A webhook or a policy may let it through on the next try.
        return kopf.TemporaryError(f"the API refused an object (422): {message}; retrying", delay=CONFLICT_RETRY_DELAY)
    if status == 409:
        return kopf.TemporaryError(
            f"an object changed while we wrote it (409): {message}; retrying",
            delay=CONFLICT_RETRY_DELAY,
        )
    if status == 403 and "being terminated" in message:
        # The NamespaceLifecycle admission plugin, not RBAC: the namespace
        # is being deleted while we work in it.
        return kopf.TemporaryError(
            f"the namespace is being deleted (403): {message}; retrying",
            delay=DEFAULT_RETRY_DELAY,
        )
    if status == 403:
        return kopf.TemporaryError(
            f"forbidden (403): {message}; grant the verb in the ClusterRole "
            f"'{OPERATOR}' (deploy/clusterrole.yaml); the operator retries by itself",
            delay=DEFAULT_RETRY_DELAY,
        )
    if status == 429 or status >= 500:
        # The API server is broken: hammering it will not help.
        return kopf.PermanentError(f"the API server is overloaded or failing ({status}): {message}")
    return None
'''


class ErrorRouting(VariantLab):
    title = "Retry what can heal, report what cannot"
    summary = ("a Tenant created during a short API outage stays Failed for good, while one the cluster refuses "
               "is retried every second")
    settle = 0.0  # each check run forces its own outage and feeds its own unusable spec
    edits = (ReplaceFunction("_route_api_error", BROKEN_ROUTING),)
    hints = (
        f"Compare Tenants {BLIP} and {HUGE} (kubectl get tenants; kubectl get tenant NAME -o yaml): what happened "
        "to each, and would a retry have helped it? Count the operator's attempts in its log: operatorlab lab logs "
        "error-routing.",
        "Every API error the operator meets goes through one function that decides between kopf.TemporaryError "
        "(kopf retries after its delay) and kopf.PermanentError (kopf stops; the operator reports it). Which "
        "errors can a retry fix: a 503 from an overloaded server, or a 422 for an object the API refuses?",
        "In labs/error-routing/tenant_operator.py, _route_api_error() must route 422 to PermanentError (reported "
        "once in status and a Warning Event) and 429/5xx to TemporaryError with the server's Retry-After, as "
        "operators/tenant/tenant_operator.py does; labs/error-routing/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        self.apply_policy()
        proxy = self.proxy().start([])
        self.start_operator(kubeconfig=proxy.kubeconfig)
        self.create_tenant(FINE, "1")
        eventually(self._policy_enforced, timeout=30, message=f"lab {self.id}: the policy {POLICY} is enforced")

    def inject(self) -> None:
        self.write_variant()
        self.start_variant(kubeconfig=self.proxy().kubeconfig)
        # The API server blips for one request while a Tenant is created...
        self.proxy().set_rules([_outage(f"inject {BLIP}")])
        self.create_tenant(BLIP, "1", wait=False)
        eventually(lambda: self.tenants.phase(BLIP) == "Failed", timeout=30, message=f"lab {self.id}: {BLIP} Failed")
        # ...and then (not at once: the outage must meet the first Tenant) someone asks for more
        # CPU than the cluster allows.
        self.create_tenant(HUGE, str(CAP * 4), wait=False)
        eventually(lambda: self.tenants.phase(HUGE) == "Retrying", timeout=30,
                   message=f"lab {self.id}: Tenant {HUGE} Retrying")

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield self._outage_is_retried()
        yield self._refusal_is_reported_once()

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant(kubeconfig=self.proxy().kubeconfig)

    # -- the cluster's policy -------------------------------------------------------------

    def apply_policy(self) -> None:
        """The admins' cap on tenant quotas: a ValidatingAdmissionPolicy the API enforces with a 422."""
        admission = client.AdmissionregistrationV1Api(self.api)
        for kind, create, body in (
                ("ValidatingAdmissionPolicy", admission.create_validating_admission_policy, _policy()),
                ("ValidatingAdmissionPolicyBinding", admission.create_validating_admission_policy_binding,
                 _binding())):
            self.track("admissionregistration.k8s.io/v1", kind, POLICY)
            try:
                create(body)
            except client.ApiException as e:
                if e.status != 409:
                    raise

    def _policy_enforced(self) -> bool:
        """Whether the API refuses an over-cap quota now (a server-side dry run in a tenant namespace).

        A new policy takes a moment to reach the API server's admission (it is read through an
        informer); a Tenant's namespace carries the label the policy's binding selects.
        """
        labelled = self.core.list_namespace(label_selector=tenants.TENANT_LABEL).items
        if not labelled:
            return True  # nowhere to try (the learner deleted every Tenant): the probe's own will be the first
        quota = {"metadata": {"name": "lab-er-dry-run"}, "spec": {"hard": {"limits.cpu": str(CAP + 1)}}}
        try:
            self.core.create_namespaced_resource_quota(labelled[0].metadata.name, quota, dry_run="All")
        except client.ApiException as e:
            return e.status == 422
        return False

    # -- checks ---------------------------------------------------------------------------

    def _outage_is_retried(self) -> Check:
        """A fresh Tenant created while the API answers one request with 503 converges once it clears."""
        label = "a Tenant created during a one-request API outage (503) converges once it clears"
        proxy = self.proxy()
        rule = _outage(f"check {secrets.token_hex(4)}")  # its own name: hits of earlier runs do not count
        proxy.set_rules([rule])  # before the Tenant exists: its namespace's creation is the next POST
        try:
            with reactions.probe_tenant(self, "lab-er-outage") as name:
                converged = probes.wait(lambda: checks.tenant_reconciled(self.api, name).passed, BUDGET)
                evidence = checks.tenant_reconciled(self.api, name).message
        finally:
            met = len(proxy.stats()["hits"].get(rule["name"], []))
            proxy.clear()
        if not met:
            return Check(label, False, f"the operator never met the outage the check forced on "
                                       f"POST /api/v1/namespaces for Tenant {name}: is the lab's operator the "
                                       f"one reconciling Tenants, through the lab's proxy ({proxy.kubeconfig})?")
        if not converged:
            return Check(label, False, f"Tenant {name}, whose namespace's creation got one 503, did not "
                                       f"converge within {BUDGET:g} s: {evidence}. "
                                       f"The operator's log: operatorlab lab logs {self.id}")
        return Check(label, True, f"Tenant {name}: one 503, then converged within {BUDGET:g} s")

    def _refusal_is_reported_once(self) -> Check:
        """A fresh Tenant the API refuses (422, the cluster's quota cap) is reported, and not retried."""
        label = "a Tenant the API refuses (422) is reported once, not retried"
        self.apply_policy()  # the cluster's policy, whatever happened to it
        probes.wait(self._policy_enforced, 30.0)
        proxy = self.proxy()
        cpu = str(CAP + 1 + secrets.randbelow(900))  # fresh, above the cap
        with reactions.probe_tenant(self, "lab-er-refused", cpu) as name:
            quotas = rf"^/api/v1/namespaces/{tenants.namespace_of(name)}/resourcequotas$"
            reported = probes.wait(lambda: _ready_false(self.tenants.get(name)), REPORT)
            if not reported:
                return Check(label, False, f"Tenant {name} (spec.cpuQuota {cpu}, above the cluster's cap of {CAP}) "
                                           f"has no Ready=False condition after {REPORT:g} s: "
                                           f"{checks.tenant_evidence(self.tenants.get(name))}")
            since = time.time()
            warned = probes.wait(lambda: reactions.warning_events(self, "Tenant", name), 3.0)
            time.sleep(max(0.0, since + WINDOW - time.time()))  # the window attempts are counted over
            attempts = reactions.requests_to(proxy, "POST", quotas, since)
            events = reactions.warning_events(self, "Tenant", name)
            condition = _ready_false(self.tenants.get(name))
        if len(attempts) > 1:
            return Check(label, False, f"Tenant {name} (spec.cpuQuota {cpu}, refused by the cluster's policy "
                                       f"{POLICY}) was attempted {len(attempts)} more times in {WINDOW:g} s after "
                                       f"it was reported (POST {quotas[1:-1]}, answered 422); its Ready condition: "
                                       f"{_said(condition)}. The operator's log: operatorlab lab logs {self.id}")
        if not warned:
            return Check(label, False, f"Tenant {name} (spec.cpuQuota {cpu}, refused by the cluster's policy) got no "
                                       f"Warning Event (kubectl get events -A --field-selector "
                                       f"involvedObject.name={name}); its Ready condition: {_said(condition)}")
        return Check(label, True, f"Tenant {name}: Ready=False ({condition.get('reason')}), {len(events)} Warning "
                                  f"Event(s), no retry in {WINDOW:g} s")


def _ready_false(tenant: dict) -> dict[str, Any]:
    """The Tenant's Ready condition if it is False, else an empty dict."""
    conditions = (tenant.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), {})
    return ready if ready.get("status") == "False" else {}


def _said(condition: dict[str, Any]) -> str:
    """A Ready condition in a line: its reason and the start of its message."""
    return f"reason {condition.get('reason')!r}, message {str(condition.get('message'))[:160]!r}"


def _outage(name: str) -> dict[str, Any]:
    """A fault proxy rule: the next POST of a namespace is answered 503, without Retry-After, once.

    urllib3 2.8.0, under the kubernetes client, retries by itself only the methods of
    ``Retry.DEFAULT_ALLOWED_METHODS`` (not POST), and a 503 only when it carries Retry-After
    (``Retry.is_retry``): this one reaches the operator's own error routing.
    """
    return {"action": "status", "status": 503, "method": "POST", "path": NAMESPACES, "times": 1, "name": name}


def _policy() -> dict[str, Any]:
    cpu = "object.spec.hard['limits.cpu']"
    return {"metadata": {"name": POLICY}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE", "UPDATE"],
                                                "resources": ["resourcequotas"]}]},
        "validations": [{
            "expression": f"!has(object.spec.hard) || !('limits.cpu' in object.spec.hard) || "
                          f"quantity({cpu}).compareTo(quantity('{CAP}')) <= 0",
            "messageExpression": f"'a tenant quota may hold at most {CAP} CPUs, not ' + string({cpu})"}]}}


def _binding() -> dict[str, Any]:
    return {"metadata": {"name": POLICY}, "spec": {
        "policyName": POLICY, "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchExpressions": [
            {"key": tenants.TENANT_LABEL, "operator": "Exists"}]}}}}
