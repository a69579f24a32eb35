"""Lesson 07: a handler must not hang on the API server, graded with a server that stops answering.

kopf's liveness probe proves that its event loop answers, not that handlers make
progress: a sync handler blocked on a socket sits in a worker thread for ever while the
probe stays green. The learner's ``read_policy`` is called as kopf calls a sync handler (in
a thread of its own) through the fault proxy, which holds chosen requests unanswered
(``stall``): for half a second (a slow server, to be waited for), then for an hour (a hung
one, to be given up on within a budget, as a TemporaryError kopf retries later).
"""

from __future__ import annotations

import queue
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import kopf
from kubernetes import client, config

from operatorlab.exercises import Exercise
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check

SLOW = 0.5  # seconds a slow server takes: still an answer
GIVE_UP = 6.0  # seconds within which a call to a hung server must give control back
POLICY = "baseline-default-deny"


class HungHandler(Exercise):
    lesson = "07"
    title = "read_policy: a handler's API call that gives up on a hung server, and says retry"
    subject = "read_policy"
    budget = GIVE_UP
    hints = (
        "How long does the kubernetes client wait for an answer that never comes, by default? And what should "
        "kopf do with a handler whose server did not answer?",
        "Every API method takes _request_timeout: seconds, or (connect, read). urllib3 retries a timed-out GET "
        "three more times by default, so the longest wait is four times the read timeout; it then raises "
        "urllib3.exceptions.MaxRetryError (an urllib3.exceptions.HTTPError), not an ApiException.",
        "Shape: networking.read_namespaced_network_policy(name, namespace, _request_timeout=(1.0, 1.0)); "
        "except ApiException with status 404 -> None; except urllib3.exceptions.HTTPError -> raise "
        "kopf.TemporaryError(..., delay=5); return networking.api_client.sanitize_for_serialization(policy).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        read_policy = learner.read_policy
        namespace = f"ex07h-{uuid.uuid4().hex[:6]}"
        core, networking = client.CoreV1Api(self.api), client.NetworkingV1Api(self.api)
        _starter_or_not(lambda: read_policy(networking, POLICY, "default"))
        workdir = Path(tempfile.mkdtemp(prefix="ex07h-"))
        core.create_namespace({"metadata": {"name": namespace}})
        proxy = FaultProxy(self.kubeconfig_path, workdir, name="ex07h").start()
        try:
            networking.create_namespaced_network_policy(namespace, {
                "metadata": {"name": POLICY}, "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}})
            through = client.NetworkingV1Api(config.new_client_from_config(config_file=str(proxy.kubeconfig)))
            call = lambda name: _in_worker(lambda: read_policy(through, name, namespace), GIVE_UP)  # noqa: E731

            found, missing = call(POLICY), call("absent")
            yield Check("a healthy read returns the policy (the API's JSON), and None for a missing one",
                        _named(found.value) and missing.value is None and not (found.error or missing.error),
                        f"got {found.show()} and {missing.show()}")
            if found.hung or missing.hung:
                yield Check("the rest (not run)", False, "not run: a healthy read did not return")
                return
            proxy.set_rules([{"action": "stall", "method": "GET", "path": f"/networkpolicies/{POLICY}$",
                              "after": SLOW}])
            slow = call(POLICY)
            yield Check(f"a slow server (answers after {SLOW:g} s) is waited for",
                        _named(slow.value), f"got {slow.show()} after {slow.seconds:.1f} s")
            proxy.set_rules([{"action": "stall", "method": "GET", "path": f"/networkpolicies/{POLICY}$",
                              "after": 3600}])
            hung = call(POLICY)
            attempts = len(proxy.stats()["hits"].get(f"stall-3600s GET /networkpolicies/{POLICY}$", []))
            yield Check(f"a hung server (no answer for an hour): the call gives control back within "
                        f"{GIVE_UP:g} s", not hung.hung,
                        f"still waiting after {hung.seconds:.1f} s ({attempts} request(s) sent): a hung "
                        "handler" if hung.hung else f"gave up after {hung.seconds:.1f} s, "
                                                    f"{attempts} request(s) sent")
            routed = isinstance(hung.error, kopf.TemporaryError) and (hung.error.delay or 0) >= 1
            yield Check("... as kopf.TemporaryError with a delay of a second or more (kopf retries the "
                        "handler later, no hot loop)", routed, f"got {hung.show()}")
            proxy.clear()
            after = call(POLICY)
            yield Check("once the server answers again, the next read works",
                        _named(after.value), f"got {after.show()}")
        finally:
            proxy.stop()  # a call still waiting on it ends with the connection
            core.delete_namespace(namespace)


def _starter_or_not(call: Callable[[], Any]) -> None:
    """One direct call before the proxy starts: a starter says so at once (NotImplementedError
    propagates); anything else it does is graded below, through the proxy."""
    try:
        call()
    except NotImplementedError:
        raise
    except Exception:  # noqa: BLE001 - graded below, with evidence
        pass


class _Outcome:
    """What a call did in its worker thread: its value, its exception, or nothing yet (hung)."""

    def __init__(self, value: Any = None, error: BaseException | None = None, hung: bool = False,
                 seconds: float = 0.0) -> None:
        self.value, self.error, self.hung, self.seconds = value, error, hung, seconds

    def show(self) -> str:
        if self.hung:
            return "no answer yet"
        if isinstance(self.error, kopf.TemporaryError):
            return f"kopf.TemporaryError(delay={self.error.delay!r})"
        if self.error is not None:
            first = (str(self.error).splitlines() or [""])[0]
            return f"{type(self.error).__module__}.{type(self.error).__name__}: {first[:160]}"
        if isinstance(self.value, dict):
            return f"a dict named {(self.value.get('metadata') or {}).get('name')!r}"
        return repr(self.value)[:160]


def _in_worker(call: Callable[[], Any], deadline: float) -> _Outcome:
    """Run ``call`` in a thread of its own, as kopf runs a sync handler, and wait at most ``deadline`` s."""
    results: queue.Queue[_Outcome] = queue.Queue()
    started = time.monotonic()

    def run() -> None:
        try:
            value = call()
        except BaseException as e:  # noqa: BLE001 - the learner's exception is the evidence
            results.put(_Outcome(error=e, seconds=time.monotonic() - started))
        else:
            results.put(_Outcome(value=value, seconds=time.monotonic() - started))

    threading.Thread(target=run, daemon=True, name="handler").start()
    try:
        return results.get(timeout=deadline)
    except queue.Empty:
        return _Outcome(hung=True, seconds=time.monotonic() - started)


def _named(value: object) -> bool:
    return isinstance(value, dict) and (value.get("metadata") or {}).get("name") == POLICY
