"""Lesson 04: the handler set that survives "operator down, world changed, operator back".

The learner's file holds the Tenant operator's reconcile handler, decorators and all. The
check puts it in place of the operator's own ``reconcile`` (in a copy of
``tenant_operator.py``, so its body may use that file's names), runs that operator as a
real ``kopf run`` process, and while it is stopped changes the world three ways: deletes a
Tenant's namespace, changes another Tenant's quota, creates a third Tenant. It starts it
again and times convergence; a fourth Tenant, untouched, must cost no write at all.
"""

from __future__ import annotations

import ast
import inspect
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from kubernetes import client

from operatorlab import tenants
from operatorlab.exercises import Exercise
from operatorlab.grading import Check, converges
from operatorlab.operators import OperatorProcess, operator_path

HANDLER = "reconcile"
#: After the operator is back, the Tenant created while it was down is handled first-hand
#: (a creation); the others were in the same initial listing, so once that one is Ready
#: this long, no later event is coming for them: a missing handler will not show up late.
SETTLE = 3.0
#: Seconds for kopf to post the Events of what it just did (it posts them in the background).
EVENT_GRACE = 1.0


def handler_source(learner: ModuleType) -> str:
    """The learner's handler, decorators included: their whole file when it defines it, else
    the function's own source (the reference re-exports the operator's)."""
    path = Path(learner.__file__ or "")
    text = path.read_text()
    if any(isinstance(n, ast.FunctionDef) and n.name == HANDLER for n in ast.parse(text).body):
        return text
    return inspect.getsource(getattr(learner, HANDLER))


def operator_with(handler: str) -> str:
    """``tenant_operator.py`` with its ``reconcile`` (decorators and all) replaced by ``handler``."""
    original = operator_path("tenant").read_text()
    node = next(n for n in ast.parse(original).body if isinstance(n, ast.FunctionDef) and n.name == HANDLER)
    lines = original.splitlines(keepends=True)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    return "".join([*lines[:first], handler.rstrip("\n") + "\n", *lines[node.end_lineno or node.lineno:]])


class SurviveDowntime(Exercise):
    lesson = "04"
    title = "reconcile's handlers: converge after downtime, and a restart with nothing to do writes nothing"
    subject = HANDLER
    budget = 15.0
    xdist_group = "tenant-operator"
    hints = (
        "Stop the operator, delete a Tenant's namespace, start it again. Which event tells the operator "
        "about that Tenant now? Which handlers does kopf call for an object it already handled?",
        "kopf calls on.create for an object it has no record of, on.update for one whose spec changed since "
        "it last handled it, and on.resume for every other object it finds when it starts. A level-triggered "
        "reconcile wants all three. Everything it writes must be a difference: an Event or a status field "
        "written on every run is a write per Tenant per restart.",
        "Stack @kopf.on.resume, @kopf.on.update and @kopf.on.create (same id) on one handler that calls "
        "reconcile_tenant(name, spec, uid=meta['uid'], report=post_event) and record_status(...): "
        "Events only from report (a real change), status only through record_status (only what differs).",
    )

    def solution_source(self) -> str:
        original = operator_path("tenant").read_text()
        node = next(n for n in ast.parse(original).body if isinstance(n, ast.FunctionDef) and n.name == HANDLER)
        lines = original.splitlines(keepends=True)
        first = min(d.lineno for d in node.decorator_list) - 1
        return ("import kopf\n\nGROUP, VERSION, PLURAL = \"hedronite.io\", \"v1\", \"tenants\"\n\n\n"
                + "".join(lines[first:node.end_lineno]))

    def check(self, learner: ModuleType) -> Iterator[Check]:
        workdir = Path(tempfile.mkdtemp(prefix="ex04s-"))
        copy = workdir / "tenant_operator.py"
        copy.write_text(operator_with(handler_source(learner)))
        suffix = uuid.uuid4().hex[:6]
        gone, changed, idle, new = (f"ex04s-{suffix}-{n}" for n in ("gone", "changed", "idle", "new"))
        api = tenants.Tenants(self.api)
        core = client.CoreV1Api(self.api)
        operator = OperatorProcess(copy, kubeconfig=self.kubeconfig_path)
        try:
            operator.start()
            for name in (gone, changed, idle):
                api.create(name, "1", "exercise 04")
            ready = converges(lambda: all(api.phase(n) == "Ready" for n in (gone, changed, idle)), budget=20,
                              give_up=lambda: not operator.running)
            if not ready.ok:
                yield Check("the operator reconciles new Tenants (created while it runs)", False,
                            f"not all Ready in {ready.seconds:.0f} s: phases {_phases(api, gone, changed, idle)}; "
                            f"operator log ends: {operator.log_tail(3)}")
                return

            operator.kill()  # down, as a Pod is killed: no goodbye
            core.delete_namespace(tenants.namespace_of(gone))
            api.patch_spec(changed, cpuQuota="3")
            api.create(new, "2", "exercise 04")
            deleted = converges(lambda: tenants.namespace_of(gone) not in api.namespaces(), budget=60)
            if not deleted.ok:  # the namespace controller's doing, not the learner's: say so
                yield Check("the check deletes a namespace while the operator is down", False,
                            f"namespace {tenants.namespace_of(gone)} still there after 60 s")
                return
            before = _writes(api, core, idle)

            operator.start()
            resumed = f"[{idle}] Resuming is processed"
            settled = _Holds(lambda: api.phase(new) == "Ready", SETTLE)
            outcome = converges(
                lambda: (api.phase(new) == "Ready" and _namespace_back(core, gone) and _quota(api, changed) == "3"
                         and resumed in operator.log()),
                budget=self.budget,
                give_up=lambda: settled() or not operator.running)
            # kopf posts Events in the background: give a late one the time to land.
            wrote = converges(lambda: _writes(api, core, idle) != before, budget=EVENT_GRACE)
            after = _writes(api, core, idle)
            took = f"converged in {outcome.seconds:.1f} s" if outcome.ok else f"after {outcome.seconds:.0f} s"
            yield Check("a Tenant created while the operator was down is handled when it is back",
                        api.phase(new) == "Ready", f"phase {api.phase(new)}, {took}")
            yield Check("a namespace deleted while the operator was down comes back (the Tenant did not change)",
                        _namespace_back(core, gone),
                        f"namespace {tenants.namespace_of(gone)} with its quota: "
                        f"{'back' if _namespace_back(core, gone) else 'still missing'}, {took}")
            yield Check("a quota changed while the operator was down is followed", _quota(api, changed) == "3",
                        f"limits.cpu {_quota(api, changed)!r} (the Tenant asks 3), {took}")
            yield Check("a Tenant nothing happened to costs no write on restart (namespace, quota, status, Events)",
                        not wrote.ok, _compare(before, after))
        finally:
            operator.kill()
            _remove(api, core, [gone, changed, idle, new])


def _remove(api: tenants.Tenants, core: client.CoreV1Api, names: list[str]) -> None:
    """Delete the check's Tenants and namespaces without waiting (the names are the check's own)."""
    for name in names:
        _ignore_missing(api.custom.patch_cluster_custom_object, tenants.GROUP, tenants.VERSION, tenants.PLURAL,
                        name, {"metadata": {"finalizers": None}})
        _ignore_missing(api.delete, name)
        _ignore_missing(core.delete_namespace, tenants.namespace_of(name))


def _ignore_missing(call: Callable[..., object], *args: object) -> None:
    try:
        call(*args)
    except client.ApiException as e:
        if e.status != 404:
            raise


class _Holds:
    """A give-up test: true once ``condition`` has held for ``seconds`` in a row."""

    def __init__(self, condition: Callable[[], bool], seconds: float) -> None:
        self.condition, self.seconds = condition, seconds
        self.since: float | None = None

    def __call__(self) -> bool:
        try:
            holds = self.condition()
        except client.ApiException:
            holds = False
        if not holds:
            self.since = None
            return False
        self.since = self.since or time.monotonic()
        return time.monotonic() - self.since >= self.seconds


def _phases(api: tenants.Tenants, *names: str) -> dict[str, str | None]:
    return {name: api.phase(name) for name in names}


def _namespace_back(core: client.CoreV1Api, tenant: str) -> bool:
    try:
        core.read_namespaced_resource_quota(tenants.QUOTA_NAME, tenants.namespace_of(tenant))
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def _quota(api: tenants.Tenants, tenant: str) -> str | None:
    try:
        return api.quota(tenant).get("limits.cpu")
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def _writes(api: tenants.Tenants, core: client.CoreV1Api, tenant: str) -> dict[str, object]:
    """What a write to the Tenant's world would change: resourceVersions, and its Events."""
    namespace = tenants.namespace_of(tenant)
    meta = api.get(tenant)["metadata"]
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.uid={meta['uid']}").items
    return {
        "Tenant resourceVersion": meta["resourceVersion"],
        "namespace resourceVersion": core.read_namespace(namespace).metadata.resource_version,
        "quota resourceVersion": core.read_namespaced_resource_quota(tenants.QUOTA_NAME, namespace)
        .metadata.resource_version,
        "Events": sorted(f"{e.reason} x{e.count or 1}" for e in events),
    }


def _compare(before: dict[str, object], after: dict[str, object]) -> str:
    changed = [f"{key}: {before[key]} -> {after[key]}" for key in before if before[key] != after[key]]
    return "; ".join(changed) if changed else "nothing written"
