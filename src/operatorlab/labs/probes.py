"""What an honest lab check does to the world before it grades: probes.

A lab's check must not be passed by making the cluster *look* fixed (objects made by hand,
a stopped operator, broader permissions). So a check makes something happen and grades what
the lab's operator does about it, within a budget:

:func:`lab_operator_runs`     the process the lab started is the one running, from the learner's
                              file as saved (not an operator started elsewhere, not a stale one);
:func:`tenant_lifecycle`      a fresh Tenant of a fresh name is created, changed to a fresh value
                              and deleted: namespace and quota follow, nothing is left Terminating,
                              and the lab's operator's own log says it did the work;
:func:`status_follows`      a fresh Tenant's status says Ready about its spec (condition and
                              observedGeneration), follows a change of it, and the lab's operator
                              ran its handler once per change, no more;
:func:`gap_closed_on_restart` the lab's operator is stopped, a fresh Tenant's namespace deleted
                              meanwhile, the operator started again: the namespace comes back;
:func:`handled`               the lab's operator's log says a handler succeeded for a Tenant (so
                              not an operator started elsewhere did the work);
:func:`restart`               stop and start the lab's running operator, as a rollout would
                              (:func:`start_again` after a probe stopped or killed it);
:func:`settled`               a state check re-run until it passes or its budget runs out;
:func:`wait`                  a condition within a budget, True or False (never raises).

The probes return a :class:`~operatorlab.grading.Check` whose message names evidence: what
was still wrong when the budget ran out, and the operator's log to read. A probe that stops
the operator starts it again before it returns; one that finds it not running says so and
leaves it: a check must not repair what it grades.
"""

from __future__ import annotations

import secrets
import time
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
#: Seconds a state check waits for what the operator does at startup (:func:`settled`).
SETTLE_BUDGET = 5.0
#: Seconds the namespace controller gets to delete an emptied namespace.
NAMESPACE_GONE_BUDGET = 30.0
#: The ids of the Tenant operator's handlers (``operators/tenant/tenant_operator.py``).
RECONCILE_HANDLER, DELETE_HANDLER = "reconcile", "delete-namespace"


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
                     delete: bool = True, label: str | None = None,
                     before_update: Callable[[], str | None] | None = None) -> Check:
    """A fresh Tenant converges: created, changed to a fresh ``cpuQuota``, deleted with its namespace.

    The quota values are fresh too (random millicores), so a quota written in advance cannot
    match. Each step must be done by the lab's own operator (:func:`handled`): an operator
    started elsewhere converges the Tenant just as well, while the lab's stays broken.
    ``before_update`` perturbs the world between create and update (e.g. :func:`restart`);
    it returns what went wrong, or None. The probe removes its Tenant whatever happens
    (stripping the finalizer only if the operator did not honour it within the budget).
    """
    label = label or ("a new Tenant converges (created, changed, deleted)" if update and delete
                      else "a new Tenant converges")
    if not (running := lab_operator_runs(lab)).passed:
        return Check(label, False, f"not probed: {running.message}")
    name = probe_name(prefix)
    lab.track(f"{tenants.GROUP}/{tenants.VERSION}", "Tenant", name)
    lab.track("v1", "Namespace", tenants.namespace_of(name))
    first, second = f"{secrets.randbelow(900) + 100}m", f"{secrets.randbelow(900) + 1100}m"
    log = _log_hint(lab)
    try:
        if failed := _step(lab, name, lambda: lab.tenants.create(name, first, f"lab {lab.id} probe"),
                           f"created {budget:g} s ago", budget):
            return Check(label, False, failed)
        if update:
            if before_update is not None and (failed := before_update()):
                return Check(label, False, f"Tenant {name} converged; then {failed}")
            if failed := _step(lab, name, lambda: lab.tenants.patch_spec(name, cpuQuota=second),
                               f"changed to cpuQuota {second} {budget:g} s ago", budget):
                return Check(label, False, failed)
        if delete:
            if not delete_tenant(lab, name, budget=budget):
                return Check(label, False, f"Tenant {name} deleted {budget:g} s ago is still there: "
                                           f"{checks.tenant_not_stuck(lab.api, name).message}. {log}")
            orphan = checks.no_orphan_namespace(lab.api, name)
            if not orphan.passed:
                return Check(label, False, f"Tenant {name} deleted: {orphan.message}")
            if not wait(lambda: handled(lab, name, DELETE_HANDLER), budget):
                return Check(label, False, f"Tenant {name} went, but not through the lab's operator: its log never "
                                           f"says \"[{name}] Handler '{DELETE_HANDLER}' succeeded\". {log}")
    finally:
        delete_tenant(lab, name, force=True)
    steps = "created, changed and deleted" if update and delete else "created"
    return Check(label, True, f"Tenant {name}: {steps} by the lab's operator, each within {budget:g} s")


def status_follows(lab: Lab, prefix: str, *, budget: float = STEP_BUDGET, quiet: float = 3.0,
                   label: str = "a new Tenant's status follows its spec (Ready condition, observedGeneration), "
                                "one handler run per change") -> Check:
    """A fresh Tenant's status reports Ready about its spec, then about a changed spec: what clients read.

    :func:`tenant_lifecycle` grades the children; this grades what the operator *says*, as
    ``kubectl wait --for=condition=Ready`` and a client comparing ``observedGeneration`` with
    ``metadata.generation`` read it (:func:`checks.tenant_status_current`). Each step must be
    the lab's own operator's work (its log says the handler succeeded once more, and none of
    kopf's requests about the Tenant failed: a handler succeeds *before* kopf writes its
    status, so an operator elsewhere could write what the lab's own could not), and after
    ``quiet`` s with nothing changing the handler must have run once per change (create,
    update): a status written by hand cannot pass, and neither can an operator that repeats
    its handler because what it keeps about its progress is lost.
    """
    if not (running := lab_operator_runs(lab)).passed:
        return Check(label, False, f"not probed: {running.message}")
    name = probe_name(prefix)
    lab.track(f"{tenants.GROUP}/{tenants.VERSION}", "Tenant", name)
    lab.track("v1", "Namespace", tenants.namespace_of(name))
    first, second = f"{secrets.randbelow(900) + 100}m", f"{secrets.randbelow(900) + 1100}m"
    steps = ((lambda: lab.tenants.create(name, first, f"lab {lab.id} probe"), f"created {budget:g} s ago"),
             (lambda: lab.tenants.patch_spec(name, cpuQuota=second), f"changed to cpuQuota {second} {budget:g} s ago"))
    try:
        for runs, (action, since) in enumerate(steps, start=1):
            if failed := _status_step(lab, name, action, since, runs, budget):
                return Check(label, False, failed)
        time.sleep(quiet)  # a handler that repeats by itself does so within seconds
        if refused := _refused_requests(lab, name):
            return Check(label, False, f"Tenant {name} reports Ready, but the lab's operator's own writes about it "
                                       f"failed ({len(refused)} time(s)), so something else wrote what it reports: "
                                       f"{refused[0][:300]}. {_log_hint(lab)}")
        if (ran := _successes(lab, name, RECONCILE_HANDLER)) > len(steps):
            return Check(label, False, f"Tenant {name}: the handler '{RECONCILE_HANDLER}' succeeded {ran} times for "
                                       f"{len(steps)} changes (created, changed), so it runs again for changes already "
                                       f"handled: kubectl get tenant {name} -o yaml shows what kopf keeps about it. "
                                       f"{_log_hint(lab)}")
    finally:
        delete_tenant(lab, name, force=True)
        checks.get_or_none(lambda: lab.core.delete_namespace(tenants.namespace_of(name)))
    return Check(label, True, f"Tenant {name}: Ready about generation 1, then 2, within {budget:g} s each; "
                              f"the handler ran once per change")


def _status_step(lab: Lab, name: str, action: Callable[[], Any], since: str, runs: int, budget: float) -> str | None:
    """Do ``action``; why Tenant ``name``'s status then did not report it within ``budget`` s, or None.

    Reported: :func:`checks.tenant_status_current` passes, and the lab's operator's log says
    the handler succeeded ``runs`` times for it by now (so the status is its work).
    """
    action()
    if not wait(lambda: checks.tenant_status_current(lab.api, name).passed, budget):
        return f"Tenant {name} {since}: {checks.tenant_status_current(lab.api, name).message}. {_log_hint(lab)}"
    if not wait(lambda: _successes(lab, name, RECONCILE_HANDLER) >= runs, budget):
        return (f"Tenant {name} {since} reports Ready, but not through the lab's operator: its log has "
                f"{_successes(lab, name, RECONCILE_HANDLER)} \"[{name}] Handler '{RECONCILE_HANDLER}' succeeded\" "
                f"for {runs} change(s). {_log_hint(lab)}")
    return None


def _refused_requests(lab: Lab, name: str, role: str = "operator") -> list[str]:
    """The lab's operator's log lines saying one of kopf's own requests about object ``name`` failed.

    kopf logs each failed attempt of its API requests (a patch of the object or of its
    status) as ``[<name>] Request attempt #n/m failed; ...`` (ERROR, ``kopf/_cogs/clients/api.py``).
    """
    try:
        log = lab.operator(role).log()
    except LabNotStarted:
        return []
    return [line for line in log.splitlines() if f"[{name}] Request attempt" in line and " failed" in line]


def _step(lab: Lab, name: str, action: Callable[[], Any], since: str, budget: float) -> str | None:
    """Do ``action`` to Tenant ``name``; why it did not then converge within ``budget`` s, or None.

    Converged: its namespace and quota match its spec (:func:`checks.tenant_reconciled`), and
    the lab's operator's log says the reconcile succeeded for it once more than before the
    action. (A quota already right before the step would pass the first half alone.)
    """
    done = _successes(lab, name, RECONCILE_HANDLER)
    try:
        action()
    except (RuntimeError, LabNotStarted) as e:  # the operator did not start again
        return f"Tenant {name}: {e}"
    if not wait(lambda: checks.tenant_reconciled(lab.api, name).passed, budget):
        return f"Tenant {name} {since}: {checks.tenant_reconciled(lab.api, name).message}. {_log_hint(lab)}"
    if not wait(lambda: _successes(lab, name, RECONCILE_HANDLER) > done, budget):
        return (f"Tenant {name} {since} matches its spec, but not by the lab's operator: its log has no new "
                f"\"[{name}] Handler '{RECONCILE_HANDLER}' succeeded\" (is another operator at work?). "
                f"{_log_hint(lab)}")
    return None


def handled(lab: Lab, name: str, handler: str = RECONCILE_HANDLER, role: str = "operator") -> bool:
    """Whether the lab's operator's log says ``handler`` succeeded for the object ``name``.

    kopf logs ``[<name>] Handler '<id>' succeeded.`` (INFO, ``kopf/_core/actions/execution.py``)
    each time a handler returns for an object. The lab's operator logs to a file of the
    lab's own; an operator started elsewhere does not write there. Only an operator the lab
    started can pass (an object named afresh by a probe cannot be in an old log).
    """
    return _successes(lab, name, handler, role) > 0


def _successes(lab: Lab, name: str, handler: str, role: str = "operator") -> int:
    try:
        log = lab.operator(role).log()
    except LabNotStarted:
        return 0
    return log.count(f"[{name}] Handler '{handler}' succeeded.")


def restart(lab: Lab, role: str = "operator") -> str | None:
    """Stop the lab's running operator gracefully and start it again from its file; what went wrong, or None.

    As a rollout or a rescheduled Pod does: the same file, kubeconfig and settings, a new
    process that knows only what the cluster remembers. An operator that is not running is
    left alone (that is for the learner to notice): a check must not repair what it grades.
    """
    try:
        operator = lab.operator(role)
    except LabNotStarted as e:
        return str(e)
    if not operator.running:
        return f"the lab's operator (pid {operator.pid}) is not running, so there was nothing to restart"
    operator.stop()
    return start_again(lab, role)


def start_again(lab: Lab, role: str = "operator") -> str | None:
    """Start the lab's operator after a probe stopped or killed it; what went wrong, or None."""
    try:
        lab.restart_operator(role)
    except (RuntimeError, LabNotStarted) as e:
        return f"the lab's operator did not start again: {e}"
    return None


def gap_closed_on_restart(lab: Lab, prefix: str, *, budget: float = STEP_BUDGET,
                          label: str = "a namespace deleted while the operator is down comes back when it starts"
                          ) -> Check:
    """What changed while the operator was down is repaired when it starts again.

    A fresh Tenant converges; the lab's operator is stopped; the Tenant's namespace is
    deleted (and waited out: the namespace controller empties it first); the operator is
    started again and must re-create the namespace within ``budget``. No spec changed, so
    only a handler that runs for every existing object at startup (kopf's ``on.resume``)
    can see it: nothing else tells the operator.
    """
    if not (running := lab_operator_runs(lab)).passed:
        return Check(label, False, f"not probed: {running.message}")
    name = probe_name(prefix)
    namespace = tenants.namespace_of(name)
    lab.track(f"{tenants.GROUP}/{tenants.VERSION}", "Tenant", name)
    lab.track("v1", "Namespace", namespace)
    stopped = False
    try:
        if failed := _step(lab, name, lambda: lab.tenants.create(name, f"{secrets.randbelow(900) + 100}m",
                                                                 f"lab {lab.id} probe"),
                           f"created {budget:g} s ago", budget):
            return Check(label, False, failed)
        lab.operator().stop()
        stopped = True
        checks.get_or_none(lambda: lab.core.delete_namespace(namespace))
        if not wait(lambda: namespace not in lab.tenants.namespaces(), NAMESPACE_GONE_BUDGET):
            return Check(label, False, f"namespace {namespace}, deleted while the operator was down, was not gone "
                                       f"after {NAMESPACE_GONE_BUDGET:g} s: is the namespace controller running?")
        started = time.monotonic()
        if failed := _step(lab, name, lambda: lab.restart_operator(), f"lost its namespace while the operator "
                           f"was down; the operator started again {budget:g} s ago", budget):
            return Check(label, False, failed)
        stopped = False
        took = time.monotonic() - started
    finally:
        if stopped:
            start_again(lab)
        delete_tenant(lab, name, force=True)
    return Check(label, True, f"namespace {namespace} back {took:.1f} s after the operator started (budget "
                              f"{budget:g} s)")


def settled(check: Callable[[], Check], budget: float = SETTLE_BUDGET) -> Check:
    """``check()`` re-run until it passes or ``budget`` s pass; its last result.

    For a check of the lab's own objects placed after a probe restarted the operator:
    what the operator does at startup takes a moment.
    """
    outcome = converges(lambda: (c := check()).passed and c, budget=budget, interval=0.3)
    return outcome.last if outcome.ok else check()


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
