"""watch-expiry: the learner's list-watch controller answers 410 Gone by watching again, never relisting.

The controller is lesson 02's (``operatorlab.controllers.listwatch.ListWatchController``),
run as a process whose reflector follows the ``decide()`` in the learner's copy of
``reflector_policy.py``. The broken variant answers a ``410 Gone`` ERROR event (row 8 of
the module's table) with another WATCH from the same, expired, resourceVersion, instead
of a relist: against a server that no longer holds that history it asks forever and sees
nothing new. The check forces the fault itself: it restarts the controller, has the fault
proxy answer every Tenant watch with 410, creates a fresh Tenant and times its
reconcile (only a LIST can show it), and counts the watches the controller sent meanwhile
(a relist at once, with no backoff, would loop hot).
"""

from __future__ import annotations

import ast
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

from operatorlab import tenants
from operatorlab.controllers import reflector_policy
from operatorlab.faults import variants
from operatorlab.grading import Check, converges
from operatorlab.labs import checks, probes
from operatorlab.labs.tenantlab import TENANT_API_VERSION, TenantLab
from operatorlab.wait import eventually

BEFORE, DURING = "lab-we-before", "lab-we-during"
STORM = {"action": "gone", "path": "^/apis/hedronite.io/v1/tenants$", "watch": True, "name": "410 on tenants watch"}
# Seconds for a Tenant created during the storm to be reconciled. client-go's backoff waits [0.8, 1.6) s,
# then [1.6, 3.2) s, doubling: the fifth wait may reach 25.6 s, and on a busy machine the probe may be
# created only that late in the storm; a reflector that relists still gets there within 30 s.
BUDGET = 30.0
CALM_WINDOW = 8.0  # seconds of the storm in which the controller's watches are counted, at least
WATCHES_ALLOWED = 10  # a backing-off reflector sends 3 or 4 in CALM_WINDOW s (waits from 0.8 s, doubling)

# Row 8 of reflector_policy's table, as the lesson has it, and as the broken variant has it.
RELIST_ON_410 = 'return Decision(Next.LIST, True, 8, "410: history gone: back off, relist")'
REWATCH_ON_410 = 'return Decision(Next.WATCH, True, 8, "410: history gone: back off, watch again")'

HOST = '''

# --- The lab's host, not part of the lesson's module ------------------------------------
# Lesson 02's list-watch Tenant controller, run with the rules above: its reflector asks
# decide() in this file what to do after every LIST and WATCH. kopf only hosts it here (the
# process's startup, liveness probe and log); no kopf handler watches Tenants.

import kopf  # noqa: E402
from kubernetes import config  # noqa: E402

from operatorlab.controllers import listwatch  # noqa: E402
from operatorlab.operators import load_module  # noqa: E402

# The controller drives the Tenant operator's own reconcile, loaded from its file; loading it
# registers its kopf handlers too. They go into a registry kopf never runs (kopf 1.45 runs the
# default registry as it is when it starts), so that only the reflector below watches Tenants.
_host = kopf.get_default_registry()
kopf.set_default_registry(kopf.OperatorRegistry())
load_module("tenant")
kopf.set_default_registry(_host)


@kopf.on.startup()
def start_controller(memo: kopf.Memo, logger: kopf.Logger, **_: object) -> None:
    """Start the list-watch controller, its reflector following this file's decide()."""
    listwatch.decide = decide  # the reflector looks decide up in its module at every step
    memo["controller"] = listwatch.ListWatchController(config.new_client_from_config()).start()
    logger.info("list-watch controller started: LIST + WATCH of tenants, decide() from this file")


@kopf.on.cleanup()
def stop_controller(memo: kopf.Memo, **_: object) -> None:
    memo["controller"].stop()
'''


def _parts(source: str) -> tuple[str, str]:
    """The module docstring (with its table of rows) and the text of ``decide()``, from reflector_policy's source."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    doc = tree.body[0]
    decide = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "decide")
    return "".join(lines[doc.lineno - 1:doc.end_lineno]), "".join(lines[decide.lineno - 1:decide.end_lineno])


def lesson_copy(source: str) -> str:
    """The learner's module as the lesson has it: reflector_policy's table and ``decide()``, the types
    imported from the lesson (the reflector compares its decisions with them), then the host."""
    doc, decide = _parts(source)
    return (f"{doc}\nfrom __future__ import annotations\n\n"
            f"from operatorlab.controllers.reflector_policy import (  # the lesson's types: the reflector uses them\n"
            f"    VERY_SHORT_WATCH,\n    Attempt,\n    Decision,\n    Interrupt,\n    Next,\n    Outcome,\n)\n\n\n"
            f"{decide}{HOST}")


def broken_decide(source: str) -> str:
    """The lesson's ``decide()`` with row 8 turned into a re-watch from the expired resourceVersion.

    Raises:
        VariantError: the lesson's row 8 is no longer written as this lab expects.
    """
    decide = _parts(source)[1]
    if decide.count(RELIST_ON_410) != 1:
        raise variants.VariantError(f"reflector_policy.decide() no longer says {RELIST_ON_410!r}: update the lab")
    return decide.replace(RELIST_ON_410, REWATCH_ON_410)


class WatchExpiry(TenantLab):
    title = "410 Gone: relist, miss nothing"
    summary = "while every Tenant watch expires, a new Tenant gets no namespace, however long you wait"
    settle = 0.0  # each check run restarts the controller, forces the fault and waits as it goes
    xdist_group = "tenant-operator"
    hints = (
        f"Tenant {DURING} was created while the proxy answered every Tenant watch with 410 Gone. The controller "
        "runs and its log shows it trying again and again. What does it ask the API server for after each 410?",
        "A 410 (reason Expired) means the history a watch would resume from is gone: watching again from the same "
        "resourceVersion gets the same answer. Only a LIST shows what changed meanwhile. Find row 8 of the table "
        "in labs/watch-expiry/listwatch_operator.py and the code of decide() that takes it.",
        "decide() must answer a 410 ERROR event with Decision(Next.LIST, True, 8, ...): back off one step, then "
        "relist (and watch from the list's resourceVersion), as client-go's reflector does; not WATCH, and not a "
        "LIST without the backoff. labs/watch-expiry/SOLUTION.md (`operatorlab lab solve watch-expiry`) explains it.",
    )

    # -- the learner's copy -------------------------------------------------------------

    @property
    def learner_copy(self) -> Path:
        return self.workdir / "listwatch_operator.py"

    def original(self) -> str:
        """The learner's module as the lesson has it (made from the lesson's reflector_policy.py)."""
        return lesson_copy(self.lesson())

    @staticmethod
    def lesson() -> str:
        return Path(reflector_policy.__file__).read_text()

    @property
    def edits(self) -> tuple[variants.ReplaceFunction, ...]:
        return (variants.ReplaceFunction("decide", broken_decide(self.lesson())),)

    def header(self) -> str:
        return (f"# Your list-watch Tenant controller for the lab {self.id!r} (labs/{self.id}/README.md): the retry\n"
                f"# rules of operatorlab/controllers/reflector_policy.py, and at the end what runs them. Written by\n"
                f"# `operatorlab lab start {self.id}`; `operatorlab lab check {self.id}` restarts the controller\n"
                f"# from this file whenever you save it. Reset deletes it.\n")

    def write_copy(self, decide_edits: tuple[variants.ReplaceFunction, ...]) -> Path:
        self.remember_file(self.learner_copy)
        self.learner_copy.write_text(self.header() + variants.apply(self.original(), decide_edits))
        return self.learner_copy

    def write_fixed(self) -> None:
        """The reference fix: decide() put back as in the lesson, the rest of the learner's copy kept."""
        text = self.learner_copy.read_text() if self.learner_copy.is_file() else ""
        try:
            fixed = variants.restore(text, self.original(), self.edits)
        except variants.VariantError:  # changed beyond recognition: start from the lesson's module
            fixed = self.header() + self.original()
        self.learner_copy.write_text(fixed)

    # -- the protocol -------------------------------------------------------------------

    def setup(self) -> None:
        proxy = self.proxy().start()
        self.write_copy(())  # the lesson's rules, unchanged: setup's controller works
        self.run_operator(self.learner_copy, kubeconfig=proxy.kubeconfig)
        self._create(BEFORE)
        self._wait(BEFORE)

    def inject(self) -> None:
        # A "simplification" of the retry rules rolls out; then the API server starts answering
        # every watch of Tenants with 410 Gone (its history was compacted under the controller).
        self.write_copy(self.edits)
        self.restart_operator()
        proxy = self.proxy()
        proxy.set_rules([STORM])
        eventually(lambda: len(proxy.stats()["hits"].get(STORM["name"], [])) >= 2, timeout=30,
                   message="the controller's Tenant watch answered with 410")
        self._create(DURING)

    def check(self) -> Iterator[Check]:
        yield probes.lab_operator_runs(self)
        yield from self._through_the_storm()
        for name in [BEFORE] + ([DURING] if self.made_tenant(DURING) else []):
            yield checks.tenant_reconciled(self.api, name)

    def solve(self) -> None:
        self.write_fixed()
        self.restart_operator()

    # -- the probe ----------------------------------------------------------------------

    def _through_the_storm(self) -> Iterator[Check]:
        """Restart the controller, answer every Tenant watch with 410, create a fresh Tenant: it must be
        reconciled within BUDGET (a relist), with no more than WATCHES_ALLOWED watches sent meanwhile."""
        relists = "a Tenant created while every watch expires is reconciled (the controller relists)"
        calm = "the controller backs off between expired watches (no hot loop)"
        proxy = self.proxy()
        self.restart_operator()  # a fresh backoff: a storm an earlier check left must not decide this one
        storm = time.time()
        proxy.set_rules([STORM])  # the storm stays on after the check, as the lab left it
        if not probes.wait(lambda: self._watch_expired_since(storm)):
            yield Check(relists, False, f"the restarted controller sent no Tenant watch in {probes.STEP_BUDGET:g} s "
                                        f"(the proxy saw none). The controller's log: operatorlab lab logs {self.id}")
            return
        name = probes.probe_name("lab-we-probe")
        started = time.time()
        self._create(name)
        try:
            def hot() -> bool:
                return len(self._watch_expired_since(started)) > WATCHES_ALLOWED

            done = converges(lambda: checks.tenant_reconciled(self.api, name).passed or hot(),
                             budget=BUDGET, interval=0.3)
            reconciled = checks.tenant_reconciled(self.api, name)
            if done.seconds < CALM_WINDOW:  # a relist at once would reconcile at once: count a whole window
                converges(hot, budget=CALM_WINDOW - done.seconds, interval=0.3)
            watches = self._watch_expired_since(started)
            counted = max(done.seconds, CALM_WINDOW)
            log = f"The controller's log: operatorlab lab logs {self.id}"
            yield Check(relists, reconciled.passed,
                        f"Tenant {name} reconciled {done.seconds:.1f} s after its create, every watch still "
                        f"answered 410" if reconciled.passed else
                        f"Tenant {name}, created {BUDGET:g} s ago while every Tenant watch was answered 410 Gone: "
                        f"{reconciled.message}; the controller sent {len(watches)} watches meanwhile, each answered "
                        f"410. {log}")
            yield Check(calm, len(watches) <= WATCHES_ALLOWED,
                        f"{len(watches)} Tenant watches in {counted:.1f} s, each answered 410 Gone: "
                        f"{'one right after another' if len(watches) > WATCHES_ALLOWED else 'spaced'}. {log}")
        finally:
            probes.delete_tenant(self, name, force=True)

    def _watch_expired_since(self, since: float) -> list[float]:
        return [t for t in self.proxy().stats()["hits"].get(STORM["name"], []) if t >= since]

    # -- helpers ------------------------------------------------------------------------

    def _create(self, name: str) -> None:
        """A Tenant with a fresh quota; the controller (not kopf) writes no status, so none is awaited."""
        self.track(TENANT_API_VERSION, "Tenant", name)
        self.track("v1", "Namespace", tenants.namespace_of(name))
        self.tenants.create(name, f"{secrets.randbelow(900) + 100}m", f"lab {self.id}")

    def _wait(self, name: str) -> None:
        eventually(lambda: checks.tenant_reconciled(self.api, name).passed, timeout=30,
                   message=f"lab {self.id}: Tenant {name} reconciled")
