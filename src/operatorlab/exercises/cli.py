"""``operatorlab exercise ...`` (added to the parser in ``operatorlab.cli``).

::

    operatorlab exercise list               every exercise, its lesson, and your progress on it
    operatorlab exercise check ID [--file F]  grade notebooks/work/ID.py (or F) on the cluster
    operatorlab exercise hint ID [--number N] the next hint (vague first)
    operatorlab exercise solution ID        the reference solution (a later pass says so)
    operatorlab exercise reset ID           remove what a check left on the cluster; your file stays
    operatorlab exercise scaffold ID        copy an exercise's starter files (the capstone's) to your work folder
"""

from __future__ import annotations

import argparse
from pathlib import Path

from operatorlab import progress
from operatorlab.exercises import registry, runner
from operatorlab.terminal import GREEN, RED, color


def exercise_list(_: argparse.Namespace) -> int:
    done = progress.load().items
    for exercise_id, cls in registry.discover().items():
        item = done.get(f"exercise:{exercise_id}")
        state = item.summary() if item else "-"
        shown = color(state, GREEN) if item and item.passed else state
        print(f"  {exercise_id:<34} lesson {cls.lesson}  {cls.title}  [{shown}]")
    print("\n  Each exercise's starter is a cell tagged 'exercise' in its lesson; "
          "your code is in notebooks/work/ID.py.")
    return 0


def print_verdict(verdict: runner.Verdict) -> int:
    """A verdict in the terminal, PASS and FAIL coloured; the exit code (1 on any FAIL)."""
    for line in verdict.text().splitlines():
        line = line.replace("  PASS  ", "  " + color("PASS", GREEN) + "  ", 1)
        print(line.replace("  FAIL  ", "  " + color("FAIL", RED) + "  ", 1))
    return 0 if verdict.passed else 1


def exercise_check(args: argparse.Namespace) -> int:
    return print_verdict(runner.grade(args.id, path=Path(args.file) if args.file else None))


def exercise_scaffold(args: argparse.Namespace) -> int:
    print(runner.scaffold(args.id))
    return 0


def exercise_hint(args: argparse.Namespace) -> int:
    print(runner.hint(args.id, args.number))
    return 0


def exercise_solution(args: argparse.Namespace) -> int:
    print(runner.solution(args.id))
    return 0


def exercise_reset(args: argparse.Namespace) -> int:
    cls = registry.get(args.id)
    cls(None).reset()
    print(f"{cls.id}: what a check may have left is removed; your file {cls(None).work_path()} is untouched")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("exercise", help="graded exercises: list, check, hint, solution, reset")
    esub = parser.add_subparsers(dest="action", required=True)
    esub.add_parser("list", help="every exercise and your progress").set_defaults(func=exercise_list)
    check = esub.add_parser("check", help="grade your code on the cluster")
    check.add_argument("id")
    check.add_argument("--file", help="grade this file instead of notebooks/work/ID.py")
    check.set_defaults(func=exercise_check)
    hint = esub.add_parser("hint", help="the next hint")
    hint.add_argument("id")
    hint.add_argument("--number", type=int, default=None, help="hint N (1 is the vaguest)")
    hint.set_defaults(func=exercise_hint)
    for action, func, help_ in (("solution", exercise_solution, "the reference solution"),
                                ("scaffold", exercise_scaffold, "copy an exercise's starter files (the capstone's)"),
                                ("reset", exercise_reset, "remove what a check left on the cluster")):
        p = esub.add_parser(action, help=help_)
        p.add_argument("id")
        p.set_defaults(func=func)
