"""Drive a lab: start (setup + inject), check (with time to converge), hints, solve, reset, drills.

The CLI, the notebook panel and the tests all go through these functions.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from operatorlab.cluster import current
from operatorlab.cluster.existing import UNAVAILABLE_INJECTIONS
from operatorlab.labs import checks as lab_checks
from operatorlab.labs.base import Check, Lab, LabContext
from operatorlab.labs.errors import BadState, LabNotStarted, LabUnavailable
from operatorlab.labs.state import Drill, read_json, write_json


def context(cluster=None, **kwargs) -> LabContext:
    """A :class:`LabContext` for ``cluster`` (default: the one ``$KUBECONFIG`` points at)."""
    return LabContext(current() if cluster is None else cluster, **kwargs)


def unavailable(cls: type[Lab], ctx: LabContext) -> str | None:
    """Why ``cls`` cannot run on ``ctx``'s cluster, or None if it can."""
    if "local" in cls.requires and ctx.provider != "local":
        return (f"lab {cls.id!r} is unavailable on this {ctx.provider} cluster: it stops control-plane "
                f"components, which only the built-in local cluster lets Operator Lab do "
                f"(unavailable here: {', '.join(UNAVAILABLE_INJECTIONS)})")
    return None


def create(cls: type[Lab], ctx: LabContext) -> Lab:
    """An instance of ``cls`` on ``ctx``.

    Raises:
        LabUnavailable: the lab needs what this cluster cannot give.
    """
    if reason := unavailable(cls, ctx):
        raise LabUnavailable(reason)
    return cls(ctx)


def setup(lab: Lab) -> None:
    """Reset whatever an earlier run left, then build the known good state."""
    if lab.state.exists:
        lab.reset()
    lab.begin()
    lab.setup()


def start(lab: Lab) -> None:
    """``setup`` then ``inject``: what ``operatorlab lab start`` does."""
    setup(lab)
    inject(lab)


def inject(lab: Lab) -> None:
    lab.inject()
    lab.record.injected = time.time()
    lab.state.save()


def solve(lab: Lab) -> None:
    lab.solve()
    lab.record.solved = True
    lab.state.save()


def check(lab: Lab, *, settle: float | None = 0.0, interval: float = 0.5,
          first_failure: bool = False) -> list[Check]:
    """Run the lab's checks; with ``settle`` > 0, re-run them until all pass or ``settle`` s pass.

    First restarts any lab operator whose source or env file a learner edited, as a
    Deployment rollout would. With ``first_failure``, stop at the first failing check (the
    tests of a lab's bypasses need only that one; the check's clean-up still runs).

    Raises:
        LabNotStarted: the lab was not set up.
    """
    lab.restart_changed_operators()
    settle = lab.settle if settle is None else settle
    deadline = time.monotonic() + settle
    while True:
        results = _collect(lab.check(), first_failure)
        if all(c.passed for c in results) or time.monotonic() >= deadline:
            return results
        time.sleep(interval)


def _collect(checks: Iterable[Check], first_failure: bool) -> list[Check]:
    """The checks as a list, up to the first failing one with ``first_failure``; a generator is closed."""
    results: list[Check] = []
    iterator = iter(checks)
    try:
        for c in iterator:
            results.append(c)
            if first_failure and not c.passed:
                break
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
    return results


def kopf_retries(lab: Lab, now: datetime | None = None) -> list[str]:
    """In words: each handler kopf is backing off on one of the lab's Tenants, when it retries, how to retry now.

    A check that fails right after a fix may only be waiting for kopf: it recorded the
    failed attempt's retry time on the object (:func:`kopfstate.backing_off`), and neither
    the fixed code nor a restart makes it retry sooner. Removing the record does.
    """
    from operatorlab.diagnose import kopfstate  # imports kopf: not at the CLI's start, only when a check failed

    now = now or datetime.now(UTC)
    said = []
    for obj in lab.record.objects:
        if obj.kind != "Tenant":
            continue
        annotations = _annotations_of_tenant(lab, obj.name)
        for record in kopfstate.backing_off(annotations, now):
            assert record.delayed is not None
            # kopf may keep one record under two keys (its v1 and v2 key formats): both must go.
            keys = sorted(k for k, v in annotations.items() if v == annotations[record.annotation])
            last = f": {textwrap.shorten(record.message, 200, placeholder=' ...')}" if record.message else ""
            said.append(f"kopf waits before it retries handler '{record.handler}' of Tenant {obj.name}: attempt "
                        f"{record.retries} of its {record.purpose or 'handling'} failed{last}. It retries at "
                        f"{record.delayed:%H:%M:%S} UTC (in {(record.delayed - now).total_seconds():.0f} s), not "
                        f"sooner, whatever you fix meanwhile: the retry time is kept on the Tenant, in annotation "
                        f"{record.annotation}. To retry now, remove it: "
                        f"kubectl annotate tenant {obj.name} {' '.join(f'{k}-' for k in keys)}")
    return said


def _annotations_of_tenant(lab: Lab, name: str) -> dict[str, str]:
    """Tenant ``name``'s annotations ({} if it is gone)."""
    tenant = lab_checks.get_or_none(lambda: lab.custom.get_cluster_custom_object(*lab_checks.TENANTS, name))
    return dict(((tenant or {}).get("metadata") or {}).get("annotations") or {})


def restart(lab: Lab, role: str | None = None) -> list[str]:
    """Start the lab's operator of ``role`` again, stopped first if it runs: what ``operatorlab lab restart`` does.

    As a Deployment brings back a crashed Pod: the same file, kubeconfig and settings. This
    is the lab's own operator, the one its checks grade, not a second one started elsewhere.
    With no ``role``, every operator the lab runs (a lab may run several replicas). Returns
    the roles restarted.

    Raises:
        LabNotStarted: the lab runs no operator (of that role).
    """
    roles = [role] if role else [r for r, rec in lab.record.processes.items() if rec.kind == "operator"]
    if not roles:
        raise LabNotStarted(f"lab {lab.id!r} runs no operator of its own: there is nothing to restart")
    for each in roles:
        lab.restart_operator(each)
    return roles


def hint(lab: Lab, *, all_hints: bool = False) -> list[str]:
    """The hints shown so far plus the next one (or all); counted in the state (drills report it)."""
    record = lab.record
    record.hints_shown = len(lab.hints) if all_hints else min(record.hints_shown + 1, len(lab.hints))
    lab.state.save()
    return list(lab.hints[:record.hints_shown])


def reset(lab: Lab) -> None:
    """Remove everything the lab made; a drill of this lab ends with it."""
    lab.reset()
    if (drill := drill_current(lab.ctx)) is not None and drill.lab == lab.id:
        drill_end(lab.ctx)


# -- drills ------------------------------------------------------------------------------


def drill_file(ctx: LabContext) -> Path:
    return ctx.state_dir / "drill.json"


def drill_start(lab: Lab) -> Drill:
    """Break the cluster for a drill and start its clock."""
    if not lab.drill:
        raise ValueError(f"lab {lab.id!r} is not offered as a drill (operatorlab drill list)")
    start(lab)
    drill = Drill(lab.id)
    write_json(drill_file(lab.ctx), asdict(drill))
    return drill


def drill_current(ctx: LabContext) -> Drill | None:
    """The drill running on ``ctx``'s cluster, if any.

    Raises:
        BadState: its file is not a drill record.
    """
    path = drill_file(ctx)
    data = read_json(path, "drill record")
    if data is None:
        return None
    try:
        return Drill(**data)
    except TypeError as e:
        raise BadState(f"drill record {path} is not one this version reads ({e}): rm {path}") from e


def drill_check(lab: Lab) -> tuple[list[Check], Drill]:
    """Grade the running drill. All checks passing stops the clock and ends the drill.

    Returns the checks and the drill (``finished`` set if this check solved it). The lab
    itself stays as it is, for a look around, until ``operatorlab lab reset``.
    """
    drill = drill_current(lab.ctx) or Drill(lab.id)
    results = check(lab, settle=5.0)
    if all(c.passed for c in results):
        drill.finished = time.time()
        drill_end(lab.ctx)
    return results, drill


def drill_end(ctx: LabContext) -> None:
    """Forget the running drill (solved, or its lab reset)."""
    drill_file(ctx).unlink(missing_ok=True)
