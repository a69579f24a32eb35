"""watch-expiry: every Tenant watch is answered with 410 Gone; the operator must relist and miss nothing."""

from __future__ import annotations

import time

from operatorlab.labs import Check, checks
from operatorlab.labs.tenantlab import TenantLab
from operatorlab.wait import eventually

BEFORE, DURING = "lab-we-before", "lab-we-during"
RULE = {"action": "gone", "path": "/apis/hedronite.io/v1/tenants$", "watch": True, "name": "410 on tenants watch"}
QUIET = 3.0


class WatchExpiry(TenantLab):
    title = "410 Gone: relist, miss nothing"
    summary = "the Tenant watch keeps expiring (410 Gone): see the relist catch every change, then end the storm"
    settle = 30.0
    hints = (
        "Was the Tenant created during the storm reconciled? How can that be if no watch stream stayed open?",
        "A 410 (reason Expired) means the resourceVersion the watch resumes from is no longer kept: the client "
        "must LIST again and watch from the list's resourceVersion. `operatorlab lab check watch-expiry` shows "
        "the 410s the proxy answered; the operator's log shows each 'Restarting the watch-stream'.",
        "The relist itself is the cure for a missed event; a storm of them is the cost. End it with "
        "`operatorlab lab solve watch-expiry` (in a real cluster: a client resuming from a resourceVersion "
        "that is far too old, or a broken cache in front of the apiserver).",
    )

    def setup(self) -> None:
        proxy = self.proxy().start()
        self.start_operator(kubeconfig=proxy.kubeconfig)
        self.create_tenant(BEFORE, "1")

    def inject(self) -> None:
        proxy = self.proxy()
        proxy.set_rules([RULE])
        eventually(lambda: len(proxy.stats()["hits"].get(RULE["name"], [])) >= 2, timeout=30,
                   message="the operator's Tenant watch answered with 410")
        self.create_tenant(DURING, "1", wait=False)

    def check(self) -> list[Check]:
        names = [BEFORE] + ([DURING] if self.made_tenant(DURING) else [])
        results = [checks.tenant_reconciled(self.api, n) for n in names]
        hits = self.proxy().stats()["hits"].get(RULE["name"], [])
        recent = [t for t in hits if t > time.time() - QUIET]
        results.append(Check(f"the Tenant watch stays open (no 410 in the last {QUIET:g} s)", not recent,
                             f"{len(hits)} Tenant watches answered 410 Gone so far, {len(recent)} in the last "
                             f"{QUIET:g} s: each one costs a full LIST" if recent
                             else f"{len(hits)} 410s in all, none lately"))
        return results

    def solve(self) -> None:
        self.proxy().clear()
