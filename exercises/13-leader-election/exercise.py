"""Lesson 13: one active copy under ``kubernetes.leaderelection``; the standby takes over when the leader dies.

The learner's ``run(namespace, identity, act)`` blocks, and calls ``act()`` (again and again) only
while its copy leads. The check starts two copies as processes of their own, on a namespace of its
own; each copy's ``act()`` writes a line to a file of the check's. Then:

- within :data:`FIRST_LEADER` s one copy acts, and over the next :data:`WINDOW` s the other does not;
- the Lease in the namespace names the acting copy as its holder;
- the check SIGKILLs the acting copy: the other acts within :data:`TAKEOVER` s (a lease of a
  few seconds, plus a retry period; an absurd lease duration misses it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from kubernetes import client

from operatorlab.exercises import Exercise
from operatorlab.exercises.watching import quiet_namespace
from operatorlab.grading import Check, converges

FIRST_LEADER = 20.0  # seconds until one copy acts (two Python processes start on a busy machine)
WINDOW = 4.0  # seconds over which only one may act
TAKEOVER = 20.0  # seconds from the SIGKILL to the other copy acting

# Each copy: the learner's file loaded as a module, run(namespace, identity, act) with act writing a line.
COPY = """
import importlib.util, sys, time
path, namespace, identity, out = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("learner", path)
learner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(learner)
def act():
    with open(out, "a") as f:
        f.write(f"{time.time()}\\n")
learner.run(namespace, identity, act)
"""


class LeaderElection(Exercise):
    lesson = "13"
    title = "run: one active copy under kubernetes.leaderelection, taken over when the leader dies"
    subject = "run"
    budget = TAKEOVER
    hints = (
        "Two copies of the same loop run at once. Which one may act, and how does the other learn that the "
        "first is gone when it cannot say so (SIGKILL)?",
        "kubernetes.leaderelection: LeaderElection(electionconfig.Config(LeaseLock(name, namespace, identity), "
        "lease_duration, renew_deadline, retry_period, onstarted_leading, onstopped_leading)).run(). Act only "
        "inside onstarted_leading; a standby takes over once the lease has not been renewed for lease_duration.",
        "Shape: config.load_kube_config(); a threading.Event lost; onstarted_leading: while not lost: act(), "
        "lost.wait(0.5); onstopped_leading=lost.set; lease_duration a few seconds (Config wants lease_duration > "
        "renew_deadline > 1.2 x retry_period, each >= 1).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        path = Path(learner.__file__ or "")
        namespace = f"ex13l-{uuid.uuid4().hex[:6]}"
        core = client.CoreV1Api(self.api)
        quiet_namespace(core, namespace)
        workdir = Path(tempfile.mkdtemp(prefix="ex13l-"))
        copies: dict[str, subprocess.Popen[bytes]] = {}
        try:
            env = {**os.environ, "KUBECONFIG": str(self.kubeconfig_path)}
            for identity in ("copy-a", "copy-b"):
                log = (workdir / f"{identity}.log").open("wb")
                copies[identity] = subprocess.Popen(
                    [sys.executable, "-c", COPY, str(path), namespace, identity, str(workdir / f"{identity}.acts")],
                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

            def acting() -> list[str]:
                return [i for i in copies if _acts(workdir, i)]

            def all_dead() -> bool:
                return all(p.poll() is not None for p in copies.values())

            first = converges(acting, budget=FIRST_LEADER, give_up=all_dead)
            if not first.ok:
                yield Check("one copy acts", False, _why_not(workdir, copies)
                            or f"neither copy called act() within {FIRST_LEADER:g} s")
                return
            leader = first.last[0]
            other = next(i for i in copies if i != leader)
            started = time.monotonic()
            while time.monotonic() - started < WINDOW and copies[leader].poll() is None:
                time.sleep(0.2)
            both = bool(_acts(workdir, other))
            yield Check(f"one copy acts, the other waits ({WINDOW:g} s watched)",
                        not both and copies[leader].poll() is None,
                        f"both copies called act(): {len(_acts(workdir, leader))} and {len(_acts(workdir, other))} "
                        "times" if both else _why_not(workdir, copies) or f"{leader} acts, {other} waits")
            holder = _holder(self.api, namespace)
            yield Check("a Lease in the namespace names the acting copy as its holder", holder == [leader],
                        f"Leases and their holders: {holder or 'none'}; acting: {leader}")
            copies[leader].send_signal(signal.SIGKILL)
            copies[leader].wait(5)
            killed = time.monotonic()
            seen = len(_acts(workdir, other))
            takeover = converges(lambda: len(_acts(workdir, other)) > seen, budget=TAKEOVER,
                                 give_up=lambda: copies[other].poll() is not None)
            yield Check(f"after a SIGKILL of the leader the other copy acts within {TAKEOVER:g} s", takeover.ok,
                        f"{other} acted {time.monotonic() - killed:.1f} s after the SIGKILL" if takeover.ok
                        else _why_not(workdir, {other: copies[other]})
                        or f"{other} had not acted {TAKEOVER:g} s after the SIGKILL (is the lease that long?)")
        finally:
            for process in copies.values():
                if process.poll() is None:
                    process.kill()
                process.wait(5)
            core.delete_namespace(namespace)


def _acts(workdir: Path, identity: str) -> list[str]:
    try:
        return (workdir / f"{identity}.acts").read_text().split()
    except FileNotFoundError:
        return []


def _why_not(workdir: Path, copies: dict[str, subprocess.Popen[bytes]]) -> str:
    """A copy that exited: its exit code and its last line (the learner's error)."""
    for identity, process in copies.items():
        if process.poll() is not None:
            lines = (workdir / f"{identity}.log").read_text(errors="replace").strip().splitlines()
            return f"{identity} exited ({process.returncode}): {lines[-1] if lines else 'no output'}"
    return ""


def _holder(api: client.ApiClient, namespace: str) -> list[str]:
    leases = client.CoordinationV1Api(api).list_namespaced_lease(namespace).items
    return [lease.spec.holder_identity for lease in leases if lease.spec and lease.spec.holder_identity]
