"""Lesson 12: a test of an operator that catches a broken copy, graded by running it on both.

The learner writes ``test_heals_its_deployment(operator, namespace)``: a test that runs the
operator file ``operator`` with ``kopf.testing.KopfRunner`` against the real API server
(the ``KUBECONFIG`` it is given), in ``namespace``, and asserts the behaviour. The check
runs that test three times, each in a fresh Python process and namespace of its own (kopf's
registry is global to a process): on the Website operator as shipped, where it must pass;
on a copy whose Deployment watcher is gone (``faults.variants``), and on a copy whose
reconcile applies nothing, where it must fail with an AssertionError.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from kubernetes import client

from operatorlab.exercises import Exercise
from operatorlab.faults import variants
from operatorlab.grading import Check
from operatorlab.operators import operator_path

SUBJECT = "test_heals_its_deployment"
TIMEOUT = 60.0  # one run of the learner's test, operator start included

#: The broken copies the test must catch, each one edit of the Website operator.
BROKEN = {
    "its Deployment watcher is gone (a Deployment scaled or deleted by hand stays so)":
        [variants.DropDecorator("deployment_status", "kopf.on.event")],
    "its reconcile applies nothing (the Website never gets a Deployment)":
        [variants.PrependToFunction("reconcile_website",
                                    'return {"deployment": name, "service": name, "phase": "Applied"}\n')],
}


@dataclass(frozen=True)
class Run:
    """One run of the learner's test: how it ended, and the tail of what it printed."""

    passed: bool
    assertion: bool  # it failed with an AssertionError (a test's own verdict), not a crash
    tail: str


class KopfRunnerTest(Exercise):
    lesson = "12"
    title = "test_heals_its_deployment: a KopfRunner test that passes on the operator and catches broken copies"
    subject = SUBJECT
    budget = TIMEOUT
    hints = (
        "A test that passes on the operator proves little until it fails on a broken one: what must your test "
        "do to the world, and wait for, to tell the two apart?",
        "Inside `with KopfRunner(['run', '--standalone', '--namespace', namespace, str(operator)], "
        "timeout=30) as runner:` create a Website, wait (eventually) for its Deployment and for its "
        "status.phase to be Applied (a reconcile still running would heal it too), scale it to 0, "
        "and wait for spec.replicas to come back; after the block, assert runner.exception is None.",
        "Wait with operatorlab.wait.eventually(condition, timeout=30, message=...): it raises an AssertionError "
        "when the time is up. apps.patch_namespaced_deployment_scale(name, namespace, {'spec': {'replicas': 0}}).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        if not callable(getattr(learner, SUBJECT, None)):
            yield Check(f"your code defines {SUBJECT}(operator, namespace)", False, f"define {SUBJECT}")
            return
        workdir = Path(tempfile.mkdtemp(prefix="ex12k-"))
        test_file = Path(learner.__file__ or "").resolve()
        real = self._run(test_file, operator_path("website"), workdir)
        yield Check("your test passes on the Website operator as shipped", real.passed,
                    "passed" if real.passed else f"it failed on the real operator: {real.tail}")
        if not real.passed:
            yield Check("your test fails on broken copies (not run)", False,
                        "not run: a test that fails on the real operator tells nothing about a broken one")
            return
        original = operator_path("website").read_text()
        copies = []
        for number, edits in enumerate(BROKEN.values()):
            copy = workdir / f"broken-{number}" / "website_operator.py"
            copy.parent.mkdir()
            copy.write_text(variants.apply(original, edits))
            copies.append(copy)
        with ThreadPoolExecutor(len(copies)) as pool:  # both at once: each waits out the test's own timeouts
            runs = list(pool.map(lambda copy: self._run(test_file, copy, workdir), copies))
        for fault, run in zip(BROKEN, runs, strict=True):
            caught = not run.passed and run.assertion
            yield Check(f"your test fails on a copy where {fault}", caught,
                        "failed with an AssertionError" if caught else
                        ("it passed: it does not look at what this copy gets wrong" if run.passed
                         else f"it crashed instead of failing an assertion: {run.tail}"))

    def _run(self, test_file: Path, operator: Path, workdir: Path) -> Run:
        """The learner's test in a fresh interpreter, on a fresh namespace, against the check's cluster."""
        namespace = f"ex12k-{uuid.uuid4().hex[:6]}"
        core = client.CoreV1Api(self.api)
        core.create_namespace({"metadata": {"name": namespace}})
        script = textwrap.dedent(f"""
            import importlib.util, sys, traceback
            from pathlib import Path
            spec = importlib.util.spec_from_file_location("learner_test", {str(test_file)!r})
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            try:
                module.{SUBJECT}(Path({str(operator)!r}), {namespace!r})
            except AssertionError as e:
                print("ASSERTION:", str(e)[-300:] or "AssertionError"); sys.exit(3)
            except BaseException as e:
                print("ERROR:", "".join(traceback.format_exception_only(e)).strip()[-300:]); sys.exit(4)
            print("PASSED")
        """)
        env = {"KUBECONFIG": str(self.kubeconfig_path), "PATH": "/usr/bin:/bin"}
        try:
            done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=workdir,
                                  timeout=TIMEOUT, env=env, check=False)
            out = (done.stdout + done.stderr).strip().splitlines()
            verdict = next((line for line in reversed(out) if line.startswith(("ASSERTION:", "ERROR:", "PASSED"))),
                           out[-1] if out else f"exit code {done.returncode}")
            return Run(done.returncode == 0, done.returncode == 3, verdict)
        except subprocess.TimeoutExpired:
            return Run(False, False, f"it ran for more than {TIMEOUT:g} s (a wait without a timeout?)")
        finally:
            try:
                core.delete_namespace(namespace)
            except client.ApiException as e:
                if e.status != 404:
                    raise
