"""Drive a lab: start (setup + inject), check (with time to converge), hints, solve, reset, drills.

The CLI, the notebook panel and the tests all go through these functions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from operatorlab.labs.base import Check, Lab, LabContext, LabNotStarted, LabUnavailable
from operatorlab.labs.faults import LabOperator


def context(cluster=None, **kwargs) -> LabContext:
    """A :class:`LabContext` for ``cluster`` (default: the one ``$KUBECONFIG`` points at)."""
    if cluster is None:
        from operatorlab.cluster import current

        cluster = current()
    return LabContext(cluster, **kwargs)


def unavailable(cls: type[Lab], ctx: LabContext) -> str | None:
    """Why ``cls`` cannot run on ``ctx``'s cluster, or None if it can."""
    if "local" in cls.requires and ctx.provider != "local":
        from operatorlab.cluster.existing import UNAVAILABLE_INJECTIONS

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
    _require_started(lab)
    lab.inject()
    lab.state.data["injected"] = time.time()
    lab.state.save()


def solve(lab: Lab) -> None:
    _require_started(lab)
    lab.solve()
    lab.state.data["solved"] = True
    lab.state.save()


def check(lab: Lab, *, settle: float | None = 0.0, interval: float = 0.5) -> list[Check]:
    """Run the lab's checks; with ``settle`` > 0, re-run them until all pass or ``settle`` s pass.

    First restarts any lab operator whose source or env file a learner edited, as a
    Deployment rollout would.

    Raises:
        LabNotStarted: the lab was not set up.
    """
    _require_started(lab)
    for role, info in lab.state.data.get("processes", {}).items():
        if info.get("kind") == "operator":
            LabOperator(lab, role).restart_if_changed()
    settle = lab.settle if settle is None else settle
    deadline = time.monotonic() + settle
    while True:
        results = lab.check()
        if all(c.passed for c in results) or time.monotonic() >= deadline:
            return results
        time.sleep(interval)


def hint(lab: Lab, *, all_hints: bool = False) -> list[str]:
    """The hints shown so far plus the next one (or all); counted in the state (drills report it)."""
    _require_started(lab)
    shown = lab.state.data.get("hints_shown", 0)
    shown = len(lab.hints) if all_hints else min(shown + 1, len(lab.hints))
    lab.state.data["hints_shown"] = shown
    lab.state.save()
    return list(lab.hints[:shown])


def reset(lab: Lab) -> None:
    lab.reset()


def _require_started(lab: Lab) -> None:
    if not lab.state.exists:
        raise LabNotStarted(f"lab {lab.id!r} is not started: run `operatorlab lab start {lab.id}` first")


# -- drills ------------------------------------------------------------------------------


def drill_file(ctx: LabContext) -> Path:
    return ctx.state_dir / "drill.json"


def drill_start(lab: Lab) -> dict:
    """Break the cluster for a drill and start its timer; returns the drill record."""
    if not lab.drill:
        raise ValueError(f"lab {lab.id!r} is not offered as a drill (operatorlab drill list)")
    start(lab)
    record = {"lab": lab.id, "started": time.time()}
    path = drill_file(lab.ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return record


def drill_current(ctx: LabContext) -> dict | None:
    try:
        return json.loads(drill_file(ctx).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def drill_check(lab: Lab) -> tuple[list[Check], float, bool]:
    """Grade the running drill: (checks, seconds since start, solved). Solved stops the clock."""
    record = drill_current(lab.ctx) or {}
    results = check(lab, settle=5.0)
    solved = all(c.passed for c in results)
    if solved and "finished" not in record:
        record["finished"] = time.time()
        drill_file(lab.ctx).write_text(json.dumps(record))
    elapsed = record.get("finished", time.time()) - record.get("started", time.time())
    return results, elapsed, solved


def drill_end(ctx: LabContext) -> None:
    drill_file(ctx).unlink(missing_ok=True)
