"""Drive a lab: start (setup + inject), check (with time to converge), hints, solve, reset, drills.

The CLI, the notebook panel and the tests all go through these functions.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

from operatorlab.cluster import current
from operatorlab.cluster.existing import UNAVAILABLE_INJECTIONS
from operatorlab.labs.base import Check, Lab, LabContext
from operatorlab.labs.errors import BadState, LabUnavailable
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
