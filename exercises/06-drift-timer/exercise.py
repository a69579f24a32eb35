"""Lesson 06: the drift timer, graded by running it inside a copy of the NamespaceBaseline operator.

The learner writes ``resync_seconds`` (the timer's interval, from the environment, with a
floor) and ``resync`` (the timer's body). The check puts both into a copy of the real
operator in place of its own, runs that copy as a kopf process through the fault proxy
(which counts every request), and perturbs the world: it deletes a baseline policy, then
opens one up by hand, and times each heal against the interval; then it watches a quiet
window, in which a resync must read but never write.
"""

from __future__ import annotations

import ast
import math
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from kubernetes import client

from operatorlab.exercises import Exercise
from operatorlab.faults import variants
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check, within
from operatorlab.operators import OperatorProcess, operator_path

NSB = ("hedronite.io", "v1alpha1", "namespacebaselines")
DENY, DNS = "baseline-default-deny", "baseline-allow-dns"
INTERVAL = 2.0  # the interval the check runs the timer at (NSB_RESYNC_SECONDS)
FLOOR = 1.0  # below this an interval is refused or raised
QUIET = 2 * INTERVAL  # the steady-state window: two resyncs
WRITES = ("POST", "PUT", "PATCH", "DELETE")
OPENED = {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}  # allows all ingress
CLOSED = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}  # the baseline's default-deny


class DriftTimer(Exercise):
    lesson = "06"
    title = "resync_seconds + resync: a drift timer that heals within its interval and is quiet otherwise"
    subject = "resync"
    budget = INTERVAL + 2.5  # a heal: one interval, plus a reconcile, plus margin
    xdist_group = "nsb-operator"  # it runs a cluster-wide NamespaceBaseline operator
    hints = (
        "Nothing tells the operator that someone deleted or edited a policy: only time does. And a timer "
        "that fires a hundred times a second, or writes every time it fires, is a load test, not a safety net.",
        "resync_seconds: read NSB_RESYNC_SECONDS (default 60), refuse what is not a positive number "
        "(ValueError), and raise anything below a floor of a second or more. resync: run the operator's whole "
        "reconcile every time (level-triggered: it need not know what happened) and write nothing else.",
        "resync_seconds: float(text), ValueError unless 0 < seconds < inf, then max(seconds, MIN_RESYNC_SECONDS). "
        "resync: call _reconcile_and_record(name, spec, body, patch) and return quietly on kopf.PermanentError; "
        "no timestamp in status (it would be a write every interval).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        interval = _interval_check(learner.resync_seconds)
        yield interval
        if not interval.passed:
            yield Check("the timer heals drift (not run)", False,
                        "not run: the operator would start with that interval; fix resync_seconds first")
            return
        source = variant_source(Path(learner.__file__).read_text())
        suffix = uuid.uuid4().hex[:6]
        name = namespace = f"ex06d-{suffix}"
        workdir = Path(tempfile.mkdtemp(prefix="ex06d-"))
        (workdir / "namespacebaseline_operator.py").write_text(source)
        core, networking = client.CoreV1Api(self.api), client.NetworkingV1Api(self.api)
        custom = client.CustomObjectsApi(self.api)
        proxy = FaultProxy(self.kubeconfig_path, workdir, name="ex06d").start()
        operator = None
        try:
            operator = OperatorProcess(workdir / "namespacebaseline_operator.py", kubeconfig=proxy.kubeconfig,
                                       env={"NSB_RESYNC_SECONDS": f"{INTERVAL:g}"}).start()
            stopped = lambda: not operator.running  # noqa: E731 - nothing changes once it exited
            core.create_namespace({"metadata": {"name": namespace, "labels": {"ex06d": suffix}}})
            custom.create_cluster_custom_object(*NSB[:2], NSB[2], {
                "apiVersion": "hedronite.io/v1alpha1", "kind": "NamespaceBaseline", "metadata": {"name": name},
                "spec": {"namespaceLabel": f"ex06d={suffix}"}})
            ready = within("the operator with your timer starts and applies the baseline",
                           lambda: {DENY, DNS} <= _policies(networking, namespace), budget=15.0, give_up=stopped,
                           evidence=lambda last: f"policies {last}; the operator's log ends: "
                                                 f"{operator.log_tail(3) if operator else ''}")
            yield ready
            if not ready.passed:
                return
            since = time.time()
            networking.delete_namespaced_network_policy(DENY, namespace)
            healed = within(
                f"a policy deleted by hand is back within the interval ({INTERVAL:g} s) and a reconcile",
                lambda: DENY in _policies(networking, namespace) and _wrote(proxy, "POST", namespace, since),
                budget=self.budget, give_up=stopped,
                evidence=lambda _: _by_whom(networking, namespace, "nothing put it back"))
            yield healed
            if not healed.passed:
                yield Check("a policy opened by hand is restored (not run)", False,
                            "not run: a deleted policy did not come back")
                return
            since = time.time()
            networking.patch_namespaced_network_policy(DENY, namespace, {"spec": OPENED})
            yield within(
                "a policy opened by hand (an allow-all ingress rule) is restored within the interval",
                lambda: _spec(networking, namespace) == CLOSED and _wrote(proxy, "PUT", namespace, since),
                budget=self.budget, give_up=stopped,
                evidence=lambda _: _by_whom(networking, namespace,
                                    f"its spec is still {_spec(networking, namespace)}"))
            yield _quiet(proxy, namespace)
        finally:
            if operator is not None:
                operator.stop()
            proxy.stop()
            _cleanup(custom, core, name, namespace)


def _interval_check(resync_seconds: Callable[..., float]) -> Check:
    """0.01, 0, -5, nan and words are refused (ValueError) or raised to the floor; 2 stays 2; unset is 60."""
    wrong = []
    for text in ("0.01", "0", "-5", "nan", "soon"):
        try:
            seconds = resync_seconds({"NSB_RESYNC_SECONDS": text})
        except ValueError:
            continue
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= FLOOR):
            wrong.append(f"{text!r} -> {seconds!r}")
    for environ, want in (({"NSB_RESYNC_SECONDS": f"{INTERVAL:g}"}, INTERVAL), ({}, 60.0)):
        got = resync_seconds(environ)
        if got != want:
            wrong.append(f"{environ} -> {got!r} (want {want:g})")
    return Check(f"an absurd interval is refused or raised to at least {FLOOR:g} s; {INTERVAL:g} stays, "
                 "unset means 60", not wrong, "; ".join(wrong) if wrong else "0.01, 0, -5, nan, 'soon' handled")


def _wrote(proxy: FaultProxy, method: str, namespace: str, since: float) -> bool:
    """Whether the check's own operator (behind the proxy) sent ``method`` for the policy since ``since``."""
    return any(r["method"] == method and r["t"] >= since and f"/namespaces/{namespace}/networkpolicies" in r["path"]
               for r in proxy.stats()["requests"])


def _by_whom(networking: client.NetworkingV1Api, namespace: str, otherwise: str) -> str:
    """Evidence: a heal that did not come through the check's operator was another operator's."""
    if DENY in _policies(networking, namespace) and _spec(networking, namespace) == CLOSED:
        return ("healed, but not by your operator: another NamespaceBaseline operator runs on this cluster "
                "(stop it, e.g. the lesson's: operator.stop())")
    return otherwise


def _quiet(proxy: FaultProxy, namespace: str) -> Check:
    """Over a quiet window the timer must read (it ran) and write nothing (nothing differed)."""
    since = time.time() + 0.5  # let the heal's own writes (status, Events) land first
    time.sleep(QUIET + 0.2)
    requests = [r for r in proxy.stats()["requests"] if r["t"] >= since and not r["watch"]]
    writes = [f"{r['method']} {r['path']}" for r in requests if r["method"] in WRITES]
    reads = [r for r in requests if r["method"] == "GET" and f"/namespaces/{namespace}/networkpolicies/" in r["path"]]
    ran = len(reads) >= 2
    return Check(f"steady state: over {QUIET:g} s the timer reads the policies and writes nothing",
                 ran and not writes,
                 f"{len(reads)} reads of the namespace's policies, {len(writes)} writes"
                 + (f": {writes[:4]}" if writes else "") + ("" if ran else "; the timer did not run"))


def variant_source(learner_source: str) -> str:
    """The NamespaceBaseline operator with the learner's resync_seconds and resync in place of its own.

    The learner's other top-level statements (imports, constants) go just before its
    resync_seconds; ``resync`` keeps the operator's ``@kopf.timer`` decorator.
    """
    tree = ast.parse(learner_source)
    lines = learner_source.splitlines(keepends=True)

    def text(node: ast.stmt) -> str:
        """A statement's source; a function's from its ``def`` (the operator keeps its own decorators)."""
        return "".join(lines[node.lineno - 1:node.end_lineno])

    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    rest = [n for n in tree.body if not isinstance(n, ast.FunctionDef)
            and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
            and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    missing = {"resync_seconds", "resync"} - set(functions)
    if missing:
        raise ValueError(f"define {' and '.join(sorted(missing))} (module-level functions)")
    prelude = "".join(text(n) + "\n" for n in rest)
    operator = operator_path("namespacebaseline").read_text()
    return variants.apply(operator, [
        variants.ReplaceFunction("resync_seconds", prelude + text(functions["resync_seconds"])),
        variants.ReplaceFunction("resync", text(functions["resync"])),
    ])


def _policies(networking: client.NetworkingV1Api, namespace: str) -> set[str]:
    return {p.metadata.name for p in networking.list_namespaced_network_policy(namespace).items}


def _spec(networking: client.NetworkingV1Api, namespace: str) -> dict:
    spec = networking.read_namespaced_network_policy(DENY, namespace).spec
    return client.ApiClient().sanitize_for_serialization(spec)


def _cleanup(custom: client.CustomObjectsApi, core: client.CoreV1Api, name: str, namespace: str) -> None:
    """The operator is stopped: drop kopf's finalizer so the baseline can go; the namespace takes its policies."""
    unfinalized = {"metadata": {"finalizers": None}}
    for delete in (lambda: custom.patch_cluster_custom_object(*NSB[:2], NSB[2], name, unfinalized),
                   lambda: custom.delete_cluster_custom_object(*NSB[:2], NSB[2], name),
                   lambda: core.delete_namespace(namespace)):
        try:
            delete()
        except client.ApiException as e:
            if e.status != 404:
                raise
