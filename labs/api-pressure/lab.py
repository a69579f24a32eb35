"""api-pressure: the apiserver answers 429 Too Many Requests; the operator must back off, not hot-loop."""

from __future__ import annotations

import itertools

from operatorlab.labs import Check, checks
from operatorlab.labs.tenantlab import TenantLab

OK, NEW = "lab-ap-calm", "lab-ap-rush"
RETRY_AFTER = 3
RULE = {"action": "status", "status": 429, "retry_after": RETRY_AFTER, "method": "POST",
        "path": "/resourcequotas$", "name": "429 on quota create"}


class ApiPressure(TenantLab):
    title = "429: back off, don't hammer"
    summary = "the apiserver throttles quota creation (429 + Retry-After): watch TemporaryError back off, no hot loop"
    settle = 30.0
    hints = (
        "Tenant lab-ap-rush is not Ready. What do its status.message and the operator's log say about each attempt, "
        "and how far apart are the attempts?",
        "The operator routes 429 and 5xx to kopf.TemporaryError(delay=Retry-After): kopf retries after that delay "
        "instead of at once. `operatorlab lab check api-pressure` counts the refused requests and their spacing.",
        "Nothing to fix in code: when the pressure ends (`operatorlab lab solve api-pressure` lifts it), the next "
        "retry succeeds by itself. A handler that retried in a tight loop would have made the pressure worse.",
    )

    def setup(self) -> None:
        proxy = self.proxy().start()
        self.start_operator(kubeconfig=proxy.kubeconfig)
        self.create_tenant(OK, "1")

    def inject(self) -> None:
        self.proxy().set_rules([RULE])
        self.create_tenant(NEW, "1", wait=False)

    def check(self) -> list[Check]:
        names = [OK] + ([NEW] if self.made_tenant(NEW) else [])
        results = [checks.tenant_reconciled(self.api, n) for n in names]
        hits = sorted(self.proxy().stats()["hits"].get(RULE["name"], []))
        gaps = [b - a for a, b in itertools.pairwise(hits)]
        hot = [g for g in gaps if g < RETRY_AFTER * 0.8]
        results.append(Check(
            "the operator backs off under 429 (no hot loop)", not hot,
            f"{len(hits)} requests refused with 429 (Retry-After: {RETRY_AFTER}); "
            + (f"{len(hot)} retries came sooner than that, the fastest after {min(hot):.2f}s" if hot
               else f"retries at least {min(gaps):.1f}s apart" if gaps else "no retries yet")))
        return results

    def solve(self) -> None:
        self.proxy().clear()  # the pressure lifts; the operator's next retry succeeds
