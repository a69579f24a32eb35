"""What an honest lab check does to the world before it grades: probes.

A lab's check must not be passed by making the cluster *look* fixed (objects made by hand,
a stopped operator, broader permissions). So a check makes something happen and grades what
the lab's operator does about it, within a budget:

:func:`lab_operator_runs`     the process the lab started is the one running, from the learner's
                              file as saved (not an operator started elsewhere, not a stale one);
:func:`tenant_lifecycle`      a fresh Tenant of a fresh name is created, changed to a fresh value
                              and deleted: namespace and quota follow, nothing is left Terminating;
:func:`wait`                  a condition within a budget, True or False (never raises).

Each returns a :class:`~operatorlab.grading.Check` whose message names evidence: what was
still wrong when the budget ran out, and the operator's log to read.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from operatorlab import tenants
from operatorlab.grading import Check, converges
from operatorlab.labs import checks
from operatorlab.labs.errors import LabNotStarted

if TYPE_CHECKING:
    from operatorlab.labs.base import Lab

#: Seconds a probe gives the operator for each step (create, update, delete) on an idle cluster.
STEP_BUDGET = 20.0


def wait(condition: Callable[[], Any], budget: float = STEP_BUDGET, interval: float = 0.3) -> bool:
    """Whether ``condition`` holds within ``budget`` seconds (an exception counts as "not yet")."""
    return converges(condition, budget=budget, interval=interval).ok


def lab_operator_runs(lab: Lab, role: str = "operator") -> Check:
    """The operator the lab started as ``role`` is alive and runs the file as it is now.

    ``operatorlab lab check`` restarts an operator whose file changed before it grades; this
    says so if the process is gone (killed, or stopped), which no other check would notice
    while objects made by hand make the cluster look right.
    """
    label = "the lab's operator is running"
    try:
        operator = lab.operator(role)
    except LabNotStarted as e:
        return Check(label, False, str(e))
    if not operator.running:
        return Check(label, False, f"the process the lab started (pid {operator.pid}) is not running; its log: "
                                   f"{operator.log_path} (operatorlab lab logs {lab.id})")
    return Check(label, True, f"pid {operator.pid}, from {operator.path}")


def probe_name(prefix: str) -> str:
    """A Tenant name no one has used: a probe cannot be answered by an object made in advance."""
    return f"{prefix}-{secrets.token_hex(3)}"


def tenant_lifecycle(lab: Lab, prefix: str, *, budget: float = STEP_BUDGET, update: bool = True,
                     delete: bool = True, label: str | None = None) -> Check:
    """A fresh Tenant converges: created, changed to a fresh ``cpuQuota``, deleted with its namespace.

    The quota values are fresh too (random millicores), so a quota written in advance cannot
    match. The probe removes its Tenant whatever happens (stripping the finalizer only if the
    operator did not honour it within the budget).
    """
    name = probe_name(prefix)
    label = label or ("a new Tenant converges (created, changed, deleted)" if update and delete
                      else "a new Tenant converges")
    lab.track(f"{tenants.GROUP}/{tenants.VERSION}", "Tenant", name)
    lab.track("v1", "Namespace", tenants.namespace_of(name))
    first, second = f"{secrets.randbelow(900) + 100}m", f"{secrets.randbelow(900) + 1100}m"
    log = _log_hint(lab)
    lab.tenants.create(name, first, f"lab {lab.id} probe")
    try:
        if not wait(lambda: checks.tenant_reconciled(lab.api, name).passed, budget):
            return Check(label, False, f"Tenant {name} created {budget:g} s ago: "
                                       f"{checks.tenant_reconciled(lab.api, name).message}. {log}")
        if update:
            lab.tenants.patch_spec(name, cpuQuota=second)
            if not wait(lambda: checks.tenant_reconciled(lab.api, name).passed, budget):
                return Check(label, False, f"Tenant {name} changed to cpuQuota {second} {budget:g} s ago: "
                                           f"{checks.tenant_reconciled(lab.api, name).message}. {log}")
        if delete:
            if not delete_tenant(lab, name, budget=budget):
                return Check(label, False, f"Tenant {name} deleted {budget:g} s ago is still there: "
                                           f"{checks.tenant_not_stuck(lab.api, name).message}. {log}")
            orphan = checks.no_orphan_namespace(lab.api, name)
            if not orphan.passed:
                return Check(label, False, f"Tenant {name} deleted: {orphan.message}")
    finally:
        delete_tenant(lab, name, force=True)
    steps = "created, changed and deleted" if update and delete else "created"
    return Check(label, True, f"Tenant {name}: {steps}, each within {budget:g} s")


def delete_tenant(lab: Lab, name: str, *, budget: float = STEP_BUDGET, force: bool = False) -> bool:
    """Delete Tenant ``name``; whether it went (its finalizer honoured) within ``budget`` s.

    ``force`` strips the finalizer first and does not wait: a probe's own clean-up.
    """
    if force:
        checks.get_or_none(lambda: lab.custom.patch_cluster_custom_object(
            *checks.TENANTS, name, {"metadata": {"finalizers": None}}))
    checks.get_or_none(lambda: lab.custom.delete_cluster_custom_object(*checks.TENANTS, name))
    return force or wait(lambda: name not in lab.tenants.names(), budget)


def _log_hint(lab: Lab) -> str:
    return f"The operator's log: operatorlab lab logs {lab.id}"
