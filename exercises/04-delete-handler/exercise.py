"""Lesson 04: a delete handler that can finish, graded by running the operator with it.

The learner's ``delete_tenant_namespace`` replaces the Tenant operator's own (an AST edit
of a copy, :mod:`operatorlab.faults.variants`); that operator runs as a process and the
check deletes Tenants of its own in the three situations a delete meets.
"""

from __future__ import annotations

import ast
import inspect
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from kubernetes import client

from operatorlab import tenants
from operatorlab.exercises import Exercise
from operatorlab.faults import variants
from operatorlab.grading import Check, converges
from operatorlab.operators import OperatorProcess, operator_path

FUNCTION = "delete_tenant_namespace"
FAILED = "Handler 'delete-namespace' failed"


class DeleteHandler(Exercise):
    lesson = "04"
    title = "delete_tenant_namespace: gone already is done, and never delete what is not yours"
    subject = FUNCTION
    budget = 20.0
    xdist_group = "tenant-operator"
    hints = (
        "What does the API answer when you read or delete a namespace that is not there? What should a "
        "delete handler conclude from that answer?",
        "A 404 means the work is done: the handler may return, and kopf removes its finalizer. Keep every other "
        "error an error (a retry may help), and a 409 (the precondition: another namespace of that name now) "
        "is not yours either.",
        "Shape: wrap the read and the delete in try/except ApiException as e: if e.status in (404, 409): "
        "return False; otherwise route it (routed = _route_api_error(e); raise routed or the original).",
    )

    def function_source(self, learner: ModuleType) -> str:
        """The learner's function as source text (the reference's is the operator's own)."""
        function = getattr(learner, FUNCTION)
        path = Path(learner.__file__ or "")
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == FUNCTION:
                return ast.get_source_segment(path.read_text(), node) or ""
        return inspect.getsource(function)  # defined elsewhere: the reference re-exports the operator's

    def solution_source(self) -> str:
        original = operator_path("tenant").read_text()
        node = next(n for n in ast.parse(original).body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION)
        return ast.get_source_segment(original, node) or ""

    def check(self, learner: ModuleType) -> Iterator[Check]:
        source = self.function_source(learner)
        original = operator_path("tenant").read_text()
        workdir = Path(tempfile.mkdtemp(prefix="ex04-"))
        copy = workdir / "tenant_operator.py"
        try:
            copy.write_text(variants.apply(original, [variants.ReplaceFunction(FUNCTION, source)]))
        except variants.VariantError:  # the same function as the operator's: run it as it is
            copy.write_text(original)
        suffix = uuid.uuid4().hex[:6]
        plain, gone, foreign = (f"ex04-{suffix}-{n}" for n in ("plain", "gone", "taken"))
        made = [plain, gone, foreign]
        api = tenants.Tenants(self.api)
        core = client.CoreV1Api(self.api)
        operator = OperatorProcess(copy, kubeconfig=self.kubeconfig_path).start()
        failed = lambda: FAILED in operator.log() or not operator.running  # noqa: E731 - the give-up test
        try:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=tenants.namespace_of(foreign))))
            for name in (plain, gone, foreign):
                api.create(name, "1", "exercise 04")
            ready = converges(lambda: api.phase(plain) == "Ready" and api.phase(gone) == "Ready", budget=30)
            if not ready.ok:
                yield Check("the operator reconciles the check's Tenants", False,
                            f"not Ready in 30 s; operator log ends: {operator.log()[-400:]}")
                return

            api.delete(plain)
            outcome = converges(lambda: plain not in api.names() and _gone_or_terminating(core, plain),
                                budget=self.budget, give_up=failed)
            yield Check("a Tenant with its namespace: deleted, and its namespace with it", outcome.ok,
                        _evidence(api, core, plain, operator, outcome.seconds))

            core.delete_namespace(tenants.namespace_of(gone))
            converges(lambda: _gone(core, gone), budget=60)
            api.delete(gone)
            outcome = converges(lambda: gone not in api.names(), budget=self.budget, give_up=failed)
            yield Check("a Tenant whose namespace is already gone: deleted, not stuck Terminating",
                        outcome.ok, _evidence(api, core, gone, operator, outcome.seconds))

            api.delete(foreign)
            outcome = converges(lambda: foreign not in api.names(), budget=self.budget, give_up=failed)
            survived = not _gone_or_terminating(core, foreign)
            yield Check("a namespace the Tenant does not own survives the Tenant's delete",
                        outcome.ok and survived,
                        f"Tenant deleted: {outcome.ok}; namespace {tenants.namespace_of(foreign)} "
                        f"{'untouched' if survived else 'deleted'}")
        finally:
            operator.stop()
            api.remove(made, force=True)
            for name in made:
                try:
                    core.delete_namespace(tenants.namespace_of(name))
                except client.ApiException as e:
                    if e.status != 404:
                        raise


def _gone(core: client.CoreV1Api, tenant: str) -> bool:
    try:
        core.read_namespace(tenants.namespace_of(tenant))
    except client.ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def _gone_or_terminating(core: client.CoreV1Api, tenant: str) -> bool:
    try:
        return bool(core.read_namespace(tenants.namespace_of(tenant)).metadata.deletion_timestamp)
    except client.ApiException as e:
        if e.status == 404:
            return True
        raise


def _evidence(api: tenants.Tenants, core: client.CoreV1Api, name: str, operator: OperatorProcess,
              seconds: float) -> str:
    if name not in api.names():
        return f"done in {seconds:.1f} s"
    meta = api.get(name)["metadata"]
    failures = [line.strip() for line in operator.log().splitlines() if FAILED in line][-1:]
    return (f"Tenant {name} still there after {seconds:.0f} s: deletionTimestamp={meta.get('deletionTimestamp')}, "
            f"finalizers={meta.get('finalizers')}; operator log: {failures or 'no handler failure logged'}")
