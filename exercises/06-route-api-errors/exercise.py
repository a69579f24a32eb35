"""Lesson 06: route API errors by what a retry can achieve, graded with real errors.

The 429, 503 and 500 come from the fault proxy in front of the real API server (a POST:
urllib3 never retries one by itself, so the error reaches the caller, as in an operator);
the 422 and the 409 come from the API server itself.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import kopf
from kubernetes import client, config

from operatorlab.exercises import Exercise
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check


class RouteApiErrors(Exercise):
    lesson = "06"
    title = "route: TemporaryError with the server's delay, PermanentError, or None"
    subject = "route"
    budget = 10.0
    hints = (
        "Ask of each status: would sending the same request again, later, succeed?",
        "429 and 5xx: the server is overloaded or failing; it may say when to come back (Retry-After, "
        "seconds). 422: the object itself is refused; a retry sends the same object. 409: read again, retry soon.",
        "Shape: status = e.status; 422 -> kopf.PermanentError(...); 409 -> kopf.TemporaryError(..., delay=1); "
        "429 or >= 500 -> kopf.TemporaryError(..., delay=float(e.headers.get('Retry-After', DEFAULT_RETRY_DELAY))); "
        "else None. Never a delay of 0.",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        route = learner.route
        namespace = "default"
        name = f"ex06-{uuid.uuid4().hex[:6]}"
        workdir = Path(tempfile.mkdtemp(prefix="ex06-"))
        proxy = FaultProxy(self.kubeconfig_path, workdir, name="ex06").start()
        core = client.CoreV1Api(self.api)
        try:
            through = client.CoreV1Api(config.new_client_from_config(config_file=str(proxy.kubeconfig)))

            def refused(status: int, retry_after: int | None) -> client.ApiException:
                rule = {"action": "status", "status": status, "method": "POST", "path": "/configmaps$", "times": 1}
                if retry_after is not None:
                    rule["retry_after"] = retry_after
                proxy.set_rules([rule])
                return _error(lambda: through.create_namespaced_config_map(namespace, _configmap(name)))

            throttled, unavailable, failing = refused(429, 7), refused(503, None), refused(500, None)
            invalid = _error(lambda: core.create_namespaced_config_map(namespace, _configmap("Not_A_Valid_Name")))
            core.create_namespaced_config_map(namespace, _configmap(name))
            conflict = _error(lambda: core.create_namespaced_config_map(namespace, _configmap(name)))
            missing = _error(lambda: core.read_namespaced_config_map(f"{name}-absent", namespace))
            seen = {e.status for e in (throttled, unavailable, failing, invalid, conflict, missing)}
            if seen != {429, 503, 500, 422, 409, 404}:
                yield Check("the check could make each error", False, f"statuses seen: {sorted(seen)}")
                return
            yield _temporary("a 429 with Retry-After: 7 is retried after 7 s", route(throttled), lambda d: d == 7)
            yield _temporary("a 503 without Retry-After is retried, after a default delay (not 0: no hot loop)",
                             route(unavailable), lambda d: d >= 1)
            yield _temporary("a 500 is retried too, after a delay", route(failing), lambda d: d >= 1)
            yield _permanent("a 422 (the API refuses the object) is permanent: a retry would send the same",
                             route(invalid))
            yield _temporary("a 409 (changed or exists) is retried soon", route(conflict), lambda d: 0 < d <= 10)
            yield Check("a 404 is left to the caller (None)", route(missing) is None, f"got {_show(route(missing))}")
        finally:
            proxy.stop()
            try:
                core.delete_namespaced_config_map(name, namespace)
            except client.ApiException as e:
                if e.status != 404:
                    raise


def _configmap(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"made-by": "exercise 06"}}


def _error(call) -> client.ApiException:
    try:
        call()
    except client.ApiException as e:
        return e
    raise AssertionError("the request was expected to fail")


def _show(value: object) -> str:
    if isinstance(value, kopf.TemporaryError):
        return f"TemporaryError(delay={value.delay!r})"
    return f"{type(value).__name__}" if value is not None else "None"


def _temporary(name: str, routed: object, delay_ok) -> Check:
    ok = isinstance(routed, kopf.TemporaryError) and routed.delay is not None and delay_ok(routed.delay)
    return Check(name, ok, f"got {_show(routed)}")


def _permanent(name: str, routed: object) -> Check:
    return Check(name, isinstance(routed, kopf.PermanentError), f"got {_show(routed)}")
