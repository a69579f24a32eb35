"""Stand-ins for the few Kubernetes client calls an operator's reconcile makes.

Unit tests use them to check *our* routing logic (which kopf error an ApiException
becomes, which writes a comparison triggers) without a cluster. Everything about
Kubernetes itself is tested against the real API server in ``tests/integration``.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client import ApiException


class StubApi:
    """Stands in for a ``kubernetes.client`` API object (CoreV1Api, AppsV1Api, ...).

    ``outcomes`` maps a method name to what it returns, or to an exception it raises,
    or to a list of those used one per call (the last one repeats), or to a function of
    the call's keyword arguments. Every call is recorded; a call the test did not set
    up fails the test.
    """

    def __init__(self, **outcomes: Any) -> None:
        self.outcomes = {k: list(v) if isinstance(v, list) else [v] for k, v in outcomes.items()}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, method: str) -> Any:
        def call(**kwargs: Any) -> Any:
            self.calls.append((method, kwargs))
            queue = self.outcomes.get(method)
            if not queue:
                raise AssertionError(f"unexpected call {method}({kwargs})")
            outcome = queue.pop(0) if len(queue) > 1 else queue[0]
            if callable(outcome) and not isinstance(outcome, type):
                outcome = outcome(**kwargs)
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        return call

    def called(self) -> list[str]:
        """The names of the methods called, in order."""
        return [method for method, _ in self.calls]

    def calls_to(self, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
        """``(method, kwargs)`` of the calls whose method name starts with ``prefix``."""
        return [(m, kw) for m, kw in self.calls if m.startswith(prefix)]


def api_error(status: int, message: str = "", headers: dict[str, str] | None = None) -> ApiException:
    """An ApiException as the client raises it for a Kubernetes Status response."""
    error = ApiException(status=status, reason="Reason")
    error.body = json.dumps({"kind": "Status", "message": message, "code": status})
    error.headers = headers
    return error


def crd_schema(crd: dict[str, Any]) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of a CRD with exactly one version (ValueError otherwise)."""
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]
