"""``operatorlab verify OPERATOR.py --crd CRD.yaml --example CR.yaml [--unusable CR.yaml]``.

Added to the parser in ``operatorlab.cli``.

One line per property, PASS or FAIL in words, with its evidence and the time it took;
the exit code is 1 on any FAIL. The verdict is the exercise engine's
(:class:`~operatorlab.exercises.runner.Verdict`), printed as ``operatorlab exercise
check`` prints one, so a capstone and a self-graded operator read the same.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from operatorlab.exercises.cli import print_verdict
from operatorlab.exercises.runner import Verdict
from operatorlab.verify.suite import PROPERTIES, Inputs, verify


def verify_run(args: argparse.Namespace) -> int:
    operator = Path(args.operator)
    folder = operator.parent
    inputs = Inputs(
        operator=operator,
        crd=Path(args.crd) if args.crd else folder / "crd.yaml",
        example=Path(args.example) if args.example else folder / "example.yaml",
        unusable=Path(args.unusable) if args.unusable else None,
        bad=Path(args.bad) if args.bad else None,
        child_selector=args.child_selector,
        children_outlive=args.children_outlive,
    )
    only = [p.strip() for p in args.only.split(",")] if args.only else list(PROPERTIES)
    if inputs.unusable is None and "unusable" in only:
        if (folder / "unusable.yaml").is_file():
            inputs.unusable = folder / "unusable.yaml"
        elif not args.only:
            only.remove("unusable")
            print("  (no --unusable given: the unusable-spec property is not graded)")
    first = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    kubeconfig = Path(args.kubeconfig or first or "~/.kube/config").expanduser()
    print(f"verifying {operator} on the cluster of {kubeconfig} ...")
    started = time.monotonic()
    checks = verify(inputs, kubeconfig, only=only, log=print if args.verbose else lambda _: None)
    return print_verdict(Verdict(None, checks, time.monotonic() - started, name=f"verify {operator.name}"))


def add_parsers(sub: argparse._SubParsersAction) -> None:
    keys = ", ".join(PROPERTIES)
    parser = sub.add_parser(
        "verify", help="grade any operator with the behavioural suite (non-zero on a FAIL)",
        description="Run OPERATOR (kopf run) through the fault proxy and grade seven properties: " + keys)
    parser.add_argument("operator", help="the operator's file (its kopf handlers)")
    parser.add_argument("--crd", help="its CustomResourceDefinition (default: crd.yaml beside it)")
    parser.add_argument("--example", help="a custom resource that must converge, after any objects it needs "
                                          "(default: example.yaml beside it)")
    parser.add_argument("--unusable", help="one that passes the schema but cannot work, after any objects it needs "
                                           "(default: unusable.yaml beside it, if there is one)")
    parser.add_argument("--bad", help="one the API server must refuse (default: the example with a spec field "
                                      "of the wrong type)")
    parser.add_argument("--child-selector", help="find the children by this label selector instead of owner "
                                                 "references ({name} is the resource's name)")
    parser.add_argument("--children-outlive", action="store_true",
                        help="the children are meant to stay when the resource is deleted (fail-closed)")
    parser.add_argument("--only", help=f"grade only these properties, comma-separated: {keys}")
    parser.add_argument("--kubeconfig", help="the cluster (default: the first of $KUBECONFIG)")
    parser.add_argument("-v", "--verbose", action="store_true", help="say which property runs")
    parser.set_defaults(func=verify_run)
