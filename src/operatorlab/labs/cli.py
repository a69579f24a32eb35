"""``operatorlab lab ...`` and ``operatorlab drill ...`` (added to the parser in ``operatorlab.cli``).

::

    operatorlab lab list                 every lab with a one-line summary (D: also a drill)
    operatorlab lab start ID             set up a known good state, then inject the fault
    operatorlab lab check ID [--wait S]  run the checks (re-run up to S s until they pass; default: the lab's own)
    operatorlab lab restart ID           start the lab's operator again (as a Deployment replaces a crashed Pod)
    operatorlab lab hint ID [--all]      the next hint (vague first)
    operatorlab lab solve ID             apply the reference fix, then check
    operatorlab lab reset ID             remove everything the lab made
    operatorlab lab logs ID [--lines N]  the log of each process the lab runs (its operator, a proxy)
    operatorlab drill list | start ID | check | hint
    operatorlab drill exam [--minutes N] [--count K] | --skip | --stop | --history
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from operatorlab import progress
from operatorlab.faults.components import ComponentUnavailable
from operatorlab.faults.variants import VariantError
from operatorlab.labs import exam, registry, runner
from operatorlab.labs.base import Check
from operatorlab.labs.errors import LabError, LabNotStarted
from operatorlab.terminal import color as _c


def _lab(lab_id: str):
    return runner.create(registry.get(lab_id), runner.context())


def _print_checks(results: list[Check]) -> bool:
    for c in results:
        mark = _c("PASS", "32") if c.passed else _c("FAIL", "31")
        print(f"  {mark}  {c.name}")
        if not c.passed and c.message:
            print(textwrap.indent(textwrap.fill(c.message, 96), "        "))
    ok = all(c.passed for c in results)
    passed = sum(c.passed for c in results)
    print(_c(f"  {passed}/{len(results)} checks pass", "32" if ok else "33"))
    return ok


def lab_list(_: argparse.Namespace) -> int:
    ctx = runner.context()
    done = progress.load().items
    for lab_id, cls in registry.discover().items():
        drill = _c("D", "36") if cls.drill else " "
        line = f"  {lab_id:<26} {drill} {cls.summary}"
        if (item := done.get(f"lab:{lab_id}")) is not None:
            summary = item.summary()
            line += "  [" + (_c(summary, "32") if item.passed else summary) + "]"
        if runner.unavailable(cls, ctx):
            line += _c("  (unavailable on this cluster: needs the local cluster)", "33")
        print(line)
    print("\n  D: also a timed drill (operatorlab drill start ID). Each lab's story: labs/ID/README.md")
    return 0


def lab_start(args: argparse.Namespace) -> int:
    lab = _lab(args.id)
    print(f"{_c(lab.title, '1')}: setting up a known good state, then injecting the fault...")
    runner.start(lab)
    progress.started("lab", lab.id)
    print(f"fault injected. Read labs/{lab.id}/README.md; then `operatorlab lab check {lab.id}`"
          f" (hints: `operatorlab lab hint {lab.id}`).")
    for role, rec in lab.record.processes.items():
        print(f"  the lab's {role} logs to {rec.log}  (operatorlab lab logs {lab.id})")
    return 0


def lab_logs(args: argparse.Namespace) -> int:
    lab = _lab(args.id)
    processes = lab.record.processes
    if not processes:
        print(f"lab {lab.id} runs no process of its own (its subject is the cluster)")
        return 0
    for role, rec in processes.items():
        path = Path(rec.log)
        print(_c(f"== {role} ({rec.kind}, pid {rec.pid}, {'running' if rec.identity.alive else 'stopped'}): "
                 f"{path}", "1"))
        lines = path.read_text(errors="replace").splitlines() if path.is_file() else ["(no log yet)"]
        print("\n".join(lines[-args.lines:]))
    return 0


def lab_check(args: argparse.Namespace) -> int:
    lab = _lab(args.id)
    print(_c(f"{lab.id}: checks", "1"))
    ok = _print_checks(runner.check(lab, settle=args.wait))
    if not ok:
        _print_kopf_retries(lab)
    progress.attempted("lab", lab.id, ok)
    return 0 if ok else 1


def _print_kopf_retries(lab) -> None:
    """After failing checks: any retry kopf has put off on one of the lab's Tenants, and how to make it now."""
    for note in runner.kopf_retries(lab):
        print(textwrap.fill(f"note: {note}", 100, initial_indent="  ", subsequent_indent="        "))


def lab_restart(args: argparse.Namespace) -> int:
    lab = _lab(args.id)
    for role in runner.restart(lab):
        rec = lab.record.processes[role]
        what = "the lab's operator" if role == "operator" else f"the lab's {role}"
        print(f"{lab.id}: {what} started again (pid {rec.pid}); its log: {rec.log}")
    return 0


def lab_hint(args: argparse.Namespace) -> int:
    lab = _lab(args.id)
    hints = runner.hint(lab, all_hints=args.all)
    if len(hints) == len(lab.hints):  # the last hint shows the fix
        progress.solution_shown("lab", lab.id)
    for i, hint in enumerate(hints, 1):
        print(textwrap.fill(f"hint {i}/{len(lab.hints)}: {hint}", 100, subsequent_indent="    "))
    return 0


def lab_solve(args: argparse.Namespace) -> int:
    lab = _lab(args.id)
    print(f"{lab.id}: applying the reference fix...")
    progress.solution_shown("lab", lab.id)
    runner.solve(lab)
    ok = _print_checks(runner.check(lab, settle=lab.settle))
    if solution := lab.solution():
        print("\n" + solution)
    return 0 if ok else 1


def lab_reset(args: argparse.Namespace) -> int:
    lab = _lab(args.id)
    runner.reset(lab)
    print(f"{lab.id}: reset (its processes stopped, its objects and files deleted)")
    return 0


def drill_list(_: argparse.Namespace) -> int:
    for lab_id, cls in registry.drills().items():
        print(f"  {lab_id:<26} {cls.summary}")
    return 0


def drill_start(args: argparse.Namespace) -> int:
    lab = _lab(args.id)
    if not lab.drill:
        print(_c(f"error: {lab.id} is not a drill; choose one of: {', '.join(registry.drills())}", "31"),
              file=sys.stderr)
        return 2
    print(f"drill {_c(lab.id, '1')}: breaking the cluster...")
    runner.drill_start(lab)
    progress.started("drill", lab.id)
    print(f"the clock runs. Task: {lab.summary}.\nWhen done: operatorlab drill check   (no hints unless you ask: "
          f"operatorlab drill hint)")
    return 0


def _drill_lab():
    ctx = runner.context()
    drill = runner.drill_current(ctx)
    if drill is None:
        raise LabNotStarted("no drill running: operatorlab drill start ID (operatorlab drill list)")
    return runner.create(registry.get(drill.lab), ctx)


def drill_check(_: argparse.Namespace) -> int:
    lab = _drill_lab()
    results, drill = runner.drill_check(lab)
    if not _print_checks(results):
        _print_kopf_retries(lab)
    progress.attempted("drill", lab.id, drill.finished is not None)
    minutes, seconds = divmod(int(drill.elapsed()), 60)
    hints = lab.record.hints_shown
    if drill.finished:
        print(_c(f"drill {lab.id} solved in {minutes}:{seconds:02d}", "32") + f" ({hints} hint(s) used); the drill "
              f"is over. Clean up: operatorlab lab reset {lab.id}")
        return 0
    print(f"not yet: {minutes}:{seconds:02d} elapsed")
    return 1


def drill_hint(args: argparse.Namespace) -> int:
    lab = _drill_lab()
    args.id, args.all = lab.id, False
    return lab_hint(args)


def _guard(func):
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except (LabError, ComponentUnavailable, VariantError) as e:
            print(_c(f"error: {e}", "31"), file=sys.stderr)
            return 2
    return run


def add_parsers(sub) -> None:
    """Add ``lab`` and ``drill`` to the ``operatorlab`` parser's subcommands."""
    lab = sub.add_parser("lab", help="guided fault-injection labs")
    lsub = lab.add_subparsers(dest="action", required=True)
    lsub.add_parser("list", help="list the labs").set_defaults(func=_guard(lab_list))
    for action, func, help_ in (
        ("start", lab_start, "set up and inject the fault"),
        ("check", lab_check, "run the lab's checks"),
        ("hint", lab_hint, "show the next hint"),
        ("solve", lab_solve, "apply the reference fix"),
        ("reset", lab_reset, "remove everything the lab made"),
        ("restart", lab_restart, "start the lab's operator again, as a Deployment replaces a crashed Pod"),
        ("logs", lab_logs, "show the log of each process the lab runs"),
    ):
        p = lsub.add_parser(action, help=help_)
        p.add_argument("id")
        p.set_defaults(func=_guard(func))
        if action == "check":
            p.add_argument("--wait", type=float, default=None,
                           help="seconds to re-run the checks until they pass (default: the lab's own settle time)")
        if action == "hint":
            p.add_argument("--all", action="store_true", help="all hints at once")
        if action == "logs":
            p.add_argument("--lines", type=int, default=60, help="the last N lines of each log (default 60)")
    drill = sub.add_parser("drill", help="timed CKA-style drills")
    dsub = drill.add_subparsers(dest="action", required=True)
    dsub.add_parser("list", help="list the drills").set_defaults(func=_guard(drill_list))
    p = dsub.add_parser("start", help="break the cluster and start the clock")
    p.add_argument("id")
    p.set_defaults(func=_guard(drill_start))
    dsub.add_parser("check", help="grade the running drill").set_defaults(func=_guard(drill_check))
    dsub.add_parser("hint", help="a hint (counted)").set_defaults(func=_guard(drill_hint))
    _add_exam_parser(dsub)


# -- operatorlab drill exam: drills back to back under one time budget (labs/exam.py) --------------


def _print_task(lab, remaining: float) -> None:
    minutes, seconds = divmod(int(remaining), 60)
    print(f"drill {_c(lab.id, '1')} ({minutes}:{seconds:02d} left). Task: {lab.summary}.\n"
          f"When done: operatorlab drill exam   (hints: operatorlab drill hint; give up on it: --skip)")


def drill_exam(args: argparse.Namespace) -> int:
    """Start an exam, or grade the drill in front of the learner and move on; or show the history."""
    if args.history:
        results = exam.load_history()
        print("\n".join(r.line() for r in results) if results else exam.NO_HISTORY)
        return 0
    ctx = runner.context()
    if exam.current(ctx) is None:
        if args.skip or args.stop:
            raise LabNotStarted("no exam running: operatorlab drill exam [--minutes N] [--count K]")
        started, lab = exam.start(ctx, minutes=args.minutes, count=args.count)
        progress.started("drill", lab.id)
        print(_c(f"exam: {len(started.tasks)} drill(s) in {args.minutes:g} min; the clock runs.", "1"))
        _print_task(lab, started.remaining())
        return 0
    grading = exam.grade(ctx, skip=args.skip, stop=args.stop)
    if grading.task is not None and grading.checks:
        _print_checks(grading.checks)
        progress.attempted("drill", grading.task.lab, grading.task.solved)
    if grading.result is not None:
        print(_c(f"exam over: {grading.result.line()}", "32" if grading.result.solved else "33"))
        return 0
    if grading.next_lab is not None:
        progress.started("drill", grading.next_lab.id)
        _print_task(grading.next_lab, grading.exam.remaining())
        return 0
    minutes, seconds = divmod(int(grading.exam.remaining()), 60)
    print(f"not yet: {minutes}:{seconds:02d} left for the exam")
    return 1


def _add_exam_parser(dsub) -> None:
    p = dsub.add_parser("exam", help="drills back to back under one time budget, scored")
    p.add_argument("--minutes", type=float, default=30.0, help="the exam's time budget (default 30)")
    p.add_argument("--count", type=int, default=3, help="how many drills, picked at random (default 3)")
    p.add_argument("--skip", action="store_true", help="leave the current drill unsolved and go on")
    p.add_argument("--stop", action="store_true", help="end the exam now")
    p.add_argument("--history", action="store_true", help="the scores of past exams")
    p.set_defaults(func=_guard(drill_exam))
