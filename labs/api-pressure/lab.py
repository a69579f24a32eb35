"""api-pressure: the learner's copy of the Tenant operator answers a 429 by retrying at once, in a loop.

The broken variant's ``_get_or_create`` re-sends a create the API server refused with
``429 Too Many Requests`` straight away, ignoring ``Retry-After``, until one gets through:
under overload it multiplies the load that caused the overload. The check forces the fault
itself: it answers every quota create of a fresh Tenant with 429 (Retry-After 2 s) for a
few seconds, counts the refused creates and their spacing at the proxy, lifts the pressure
and times the Tenant's convergence.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

from operatorlab import tenants
from operatorlab.faults.variants import ReplaceFunction
from operatorlab.grading import Check, converges
from operatorlab.labs import checks, probes
from operatorlab.labs.api_traffic import gaps
from operatorlab.labs.tenantlab import TENANT_API_VERSION, VariantLab
from operatorlab.wait import eventually

OK, NEW = "lab-ap-calm", "lab-ap-rush"
# What the check's 429s ask for, taken in turn: a short wait, then a long one. A client that
# reads Retry-After waits each out; no fixed pause can, as it would have to be at least the
# long one and, so as not to dawdle, close to the short one at once. Short first, so that
# even a client that pauses for the long one sends a second create within the window.
RETRY_AFTERS = (1, 5)
LATE = 2.5  # seconds past Retry-After a retry may come (kopf's own round trip, a busy machine)
SOON = 0.8  # a retry earlier than this share of Retry-After did not wait for it
PRESSURE = 7.0  # seconds the check keeps refusing a probe Tenant's quota create
STORM = 300  # refusals inject answers before the "overload" passes
# The quota of one Tenant: what the fault proxy refuses.
QUOTA_CREATE = "^/api/v1/namespaces/{namespace}/resourcequotas$"

# "The API server is busy: send it again until it takes it." Re-sends a refused create at
# once, ignoring Retry-After.
BROKEN_GET_OR_CREATE = '''\
def _get_or_create(read: Callable[[], Any], create: Callable[[], Any]) -> tuple[Any, bool]:
    """GET an object, or create it if it is missing; return (object, created).

    A 409 on create means someone else created it between our GET and POST
    (another controller, or our own previous life): read theirs, carry on.
    A busy API server (429) is asked again until it takes the create:
    a Tenant should not wait for the next retry.
    """
    try:
        return read(), False
    except ApiException as e:
        if e.status != 404:
            raise
    while True:
        try:
            return create(), True
        except ApiException as e:
            if e.status == 409:
                return read(), False
            if e.status != 429:
                raise
'''


def pressure_rule(namespace: str, retry_after: float | list[float], *, times: int | None = None) -> dict:
    """The fault proxy's rule: every quota create in ``namespace`` answered 429 with ``Retry-After``
    (a list: the answers take its values in turn)."""
    return {"action": "status", "status": 429, "retry_after": retry_after, "method": "POST",
            "path": QUOTA_CREATE.format(namespace=namespace), "times": times,
            "name": f"429 on {namespace} quota create"}


class ApiPressure(VariantLab):
    title = "429: back off, don't hammer"
    summary = "during a short API overload the operator sent hundreds of quota creates, one right after another"
    settle = 0.0  # each check run forces the fault on a fresh Tenant and waits as it goes
    edits = (ReplaceFunction("_get_or_create", BROKEN_GET_OR_CREATE),)
    hints = (
        f"Tenant {NEW} was created during a short overload. `operatorlab lab check api-pressure` counts what the "
        "operator sent the API server meanwhile: how many quota creates, how far apart? What did the server ask for "
        "in its Retry-After header?",
        "A 429 Too Many Requests says: not now, try again after Retry-After seconds. Find where your copy, "
        "labs/api-pressure/tenant_operator.py, handles an ApiException with status 429 on a create, and what the "
        "operator's error routing (_route_api_error, retry_delay) would do with it if it were let through.",
        "_get_or_create must not retry a refused create itself: only a 409 is its business; any other error goes "
        "up to the handler, where _route_api_error turns a 429 into kopf.TemporaryError(delay=Retry-After), and "
        "kopf retries the whole reconcile after that delay. labs/api-pressure/SOLUTION.md "
        "(`operatorlab lab solve api-pressure`) explains it.",
    )

    def setup(self) -> None:
        proxy = self.proxy().start()
        self.start_operator(kubeconfig=proxy.kubeconfig)
        self.create_tenant(OK, "1")

    def inject(self) -> None:
        # A "faster" release rolls out, then the API server is overloaded for a while.
        proxy = self.proxy()
        self.write_variant()
        self.start_variant(kubeconfig=proxy.kubeconfig)
        rule = pressure_rule(tenants.namespace_of(NEW), RETRY_AFTERS[0], times=STORM)
        proxy.set_rules([rule])
        self.create_tenant(NEW, "1", wait=False)
        eventually(lambda: len(proxy.stats()["hits"].get(rule["name"], [])) >= STORM, timeout=60,
                   message=f"lab {self.id}: the variant's storm of quota creates")
        proxy.clear()
        self.wait_reconciled(NEW)

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield from self._under_pressure()
        for name in [OK] + ([NEW] if self.made_tenant(NEW) else []):
            yield checks.tenant_reconciled(self.api, name)

    def solve(self) -> None:
        self.write_fixed()
        self.start_variant(kubeconfig=self.proxy().kubeconfig)

    # -- the probe ----------------------------------------------------------------------

    def _under_pressure(self) -> Iterator[Check]:
        """A fresh Tenant's quota creates are refused for PRESSURE s: the operator waits Retry-After
        between them; once the pressure lifts, the Tenant converges."""
        polite = "the operator waits Retry-After before retrying a refused create"
        converged = "a Tenant created under pressure converges once it lifts"
        name = probes.probe_name("lab-ap-probe")
        asked = list(RETRY_AFTERS)
        rule = pressure_rule(tenants.namespace_of(name), asked)
        allowed = _polite_count(asked, PRESSURE)
        proxy = self.proxy()
        self.track(TENANT_API_VERSION, "Tenant", name)
        self.track("v1", "Namespace", tenants.namespace_of(name))
        proxy.set_rules([rule])
        try:
            self.tenants.create(name, f"{secrets.randbelow(900) + 100}m", f"lab {self.id} probe")

            def refused() -> list[float]:
                return proxy.stats()["hits"].get(rule["name"], [])

            # The whole window, unless the operator has sent more than a polite client would in all of it.
            converges(lambda: len(refused()) > allowed, budget=PRESSURE, interval=0.2)
            hits = refused()
            proxy.clear()
            yield self._spacing(polite, name, hits, asked, allowed)
            reconciled = converges(lambda: checks.tenant_reconciled(self.api, name).passed,
                                   budget=probes.STEP_BUDGET, interval=0.3)
            yield Check(converged, reconciled.ok,
                        f"Tenant {name} reconciled {reconciled.seconds:.1f} s after the pressure lifted"
                        if reconciled.ok else
                        f"Tenant {name}, {probes.STEP_BUDGET:g} s after the pressure lifted: "
                        f"{checks.tenant_reconciled(self.api, name).message}. "
                        f"The operator's log: operatorlab lab logs {self.id}")
        finally:
            proxy.clear()
            probes.delete_tenant(self, name, force=True)

    def _spacing(self, label: str, name: str, hits: list[float], asked: list[float], allowed: int) -> Check:
        """Each refused create came after the Retry-After of the one before it, and not much later."""
        namespace = tenants.namespace_of(name)
        if not hits:
            return Check(label, False, f"no quota create for Tenant {name} reached the API in {PRESSURE:g} s "
                                       f"(POST .../namespaces/{namespace}/resourcequotas): is the operator "
                                       f"reconciling? operatorlab lab logs {self.id}")
        seen = f"{len(hits)} creates of ResourceQuota {namespace}/{tenants.QUOTA_NAME} refused with 429"
        waits = [(gap, asked[n % len(asked)]) for n, gap in enumerate(gaps(hits))]
        spacing = ", ".join(f"{gap:.1f} s after Retry-After {wanted:g}" for gap, wanted in waits)
        if len(hits) > allowed or any(gap < wanted * SOON for gap, wanted in waits):
            fastest = min((gap for gap, _ in waits), default=0.0)
            return Check(label, False, f"{seen} in {hits[-1] - hits[0]:.1f} s, the fastest retry after "
                                       f"{fastest * 1000:.0f} ms ({spacing or 'one refusal'}): each one more "
                                       f"load on an overloaded API server")
        if late := [(gap, wanted) for gap, wanted in waits if gap > wanted + LATE]:
            gap, wanted = late[0]
            return Check(label, False, f"{seen}; one retry came {gap:.1f} s after the server said "
                                       f"Retry-After: {wanted:g} ({spacing}). The server's answers ask for "
                                       f"different waits: a fixed pause is not the server's Retry-After")
        return Check(label, True, f"{seen}, each retry when the server's Retry-After said ({spacing})")


def _polite_count(asked: list[float], window: float) -> int:
    """How many creates a client that waits out each Retry-After can send in ``window`` seconds, plus one."""
    sent, t = 1, 0.0
    while (t := t + asked[(sent - 1) % len(asked)] * SOON) <= window:
        sent += 1
    return sent + 1
