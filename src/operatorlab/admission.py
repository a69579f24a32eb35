"""Admission on a real API server, for lesson 10 and its exercises: policies, their bindings, webhooks.

Everything here is made to touch only what its caller makes: a policy or a webhook matches the
resource of a CRD *copy* in a group of the caller's own (:func:`operatorlab.crds.copy_to_group`),
and a binding may narrow that further to objects carrying a label of the run. A Fail-policy webhook
or a Deny binding that matched the shipped Tenants would refuse every other test's Tenants while it
exists, so every object is deleted by the code that made it, in a ``finally``.

What the API server answers is returned as an :class:`Answer`: accepted or not, its words, and how
long it took (the lesson times a webhook that is gone against one that hangs).
"""

from __future__ import annotations

import base64
import os
import re
import signal
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from operatorlab import crds
from operatorlab.cluster import pki, process
from operatorlab.operators import OperatorProcess

V1 = "admissionregistration.k8s.io/v1"


def _api(api_client: Any) -> Any:
    from kubernetes import client

    return client.AdmissionregistrationV1Api(api_client)


def _snake(kind: str) -> str:
    """``ValidatingAdmissionPolicyBinding`` -> ``validating_admission_policy_binding`` (the client's method names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def apply(api_client: Any, body: Mapping[str, Any]) -> None:
    """Create an ``admissionregistration.k8s.io/v1`` object, or replace the one of that name."""
    from kubernetes import client

    api, kind, name = _api(api_client), _snake(body["kind"]), body["metadata"]["name"]
    try:
        getattr(api, f"create_{kind}")(dict(body))
    except client.ApiException as e:
        if e.status != 409:
            raise
        current = getattr(api, f"read_{kind}")(name)
        replaced = {**body, "metadata": {**body["metadata"], "resourceVersion": current.metadata.resource_version}}
        getattr(api, f"replace_{kind}")(name, replaced)


def delete(api_client: Any, kind: str, name: str) -> None:
    """Delete an ``admissionregistration.k8s.io/v1`` object; one that is gone already is fine."""
    from kubernetes import client

    try:
        getattr(_api(api_client), f"delete_{_snake(kind)}")(name)
    except client.ApiException as e:
        if e.status != 404:
            raise


def exists(api_client: Any, kind: str, name: str) -> bool:
    """Whether the ``admissionregistration.k8s.io/v1`` object ``kind``/``name`` exists."""
    from kubernetes import client

    try:
        getattr(_api(api_client), f"read_{_snake(kind)}")(name)
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def served_kinds(api_client: Any) -> list[str]:
    """The kinds ``admissionregistration.k8s.io/v1`` serves on this API server (discovery)."""
    resources = _api(api_client).get_api_resources().resources
    return sorted(r.kind for r in resources if "/" not in r.name)


# -- manifests ------------------------------------------------------------------------------


def resource_rule(crd: Mapping[str, Any], operations: Sequence[str] = ("CREATE", "UPDATE")) -> dict[str, Any]:
    """A rule matching the one resource of ``crd`` (its group, version and plural), for these operations."""
    group, version, plural = crds.coordinates(dict(crd))
    return {"apiGroups": [group], "apiVersions": [version], "operations": list(operations), "resources": [plural]}


def policy(name: str, spec: Mapping[str, Any], kind: str = "ValidatingAdmissionPolicy") -> dict[str, Any]:
    """A ``ValidatingAdmissionPolicy`` (or, with ``kind``, a ``MutatingAdmissionPolicy``) of this spec."""
    return {"apiVersion": V1, "kind": kind, "metadata": {"name": name}, "spec": dict(spec)}


def binding(name: str, policy_name: str, actions: Sequence[str] | None = ("Deny",), *,
            param_ref: Mapping[str, Any] | None = None, match_resources: Mapping[str, Any] | None = None,
            kind: str = "ValidatingAdmissionPolicyBinding") -> dict[str, Any]:
    """A binding of ``policy_name``: without one, a policy does nothing.

    ``actions`` is ``validationActions`` (``Deny``, ``Warn``, ``Audit``); None for a
    ``MutatingAdmissionPolicyBinding``, which has none. ``match_resources`` narrows what the
    policy's ``matchConstraints`` match (both must match).
    """
    spec: dict[str, Any] = {"policyName": policy_name}
    if actions is not None:
        spec["validationActions"] = list(actions)
    if param_ref is not None:
        spec["paramRef"] = dict(param_ref)
    if match_resources is not None:
        spec["matchResources"] = dict(match_resources)
    return {"apiVersion": V1, "kind": kind, "metadata": {"name": name}, "spec": spec}


def webhook(name: str, url: str, ca_bundle: str, crd: Mapping[str, Any], *, failure_policy: str = "Fail",
            timeout_seconds: int = 5, object_selector: Mapping[str, Any] | None = None,
            operations: Sequence[str] = ("CREATE", "UPDATE")) -> dict[str, Any]:
    """One entry of a ``ValidatingWebhookConfiguration``: the resource of ``crd`` sent to ``url``.

    ``sideEffects: None`` lets dry-run requests reach it (the webhook changes nothing else);
    ``timeoutSeconds`` is how long the API server waits for an answer (1 to 30, default 10).
    """
    entry: dict[str, Any] = {
        "name": name, "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [{**resource_rule(crd, operations), "scope": "*"}],
        "failurePolicy": failure_policy, "sideEffects": "None", "timeoutSeconds": timeout_seconds,
        "admissionReviewVersions": ["v1"], "matchPolicy": "Exact",
    }
    if object_selector is not None:
        entry["objectSelector"] = dict(object_selector)
    return entry


def webhook_configuration(name: str, webhooks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A ``ValidatingWebhookConfiguration`` of these entries (:func:`webhook`)."""
    return {"apiVersion": V1, "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
            "webhooks": [dict(w) for w in webhooks]}


# -- requests, answered and timed -------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What the API server said to one request: accepted or not, in its words, after how long."""

    accepted: bool
    message: str
    seconds: float
    status: int | None = None

    def __str__(self) -> str:
        return "accepted" if self.accepted else self.message


def send(request: Callable[[], Any]) -> Answer:
    """Send one request and time it: an :class:`Answer`, whatever the API server said."""
    from kubernetes import client

    started = time.monotonic()
    try:
        request()
    except client.ApiException as e:
        return Answer(False, crds.refusal(e), time.monotonic() - started, e.status)
    return Answer(True, "", time.monotonic() - started, None)


def create(api_client: Any, crd: Mapping[str, Any], name: str, spec: Any, *, labels: Mapping[str, str] | None = None,
           dry_run: bool = True) -> Answer:
    """Create an object of ``crd`` (a dry run by default: admitted in full, stored nowhere)."""
    from kubernetes import client

    body = crds.manifest(dict(crd), name, spec)
    if labels:
        body["metadata"]["labels"] = dict(labels)
    extra: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
    return send(lambda: client.CustomObjectsApi(api_client).create_cluster_custom_object(
        *crds.coordinates(dict(crd)), body, **extra))


def patch(api_client: Any, crd: Mapping[str, Any], name: str, body: Mapping[str, Any]) -> Answer:
    """Merge-patch an object of ``crd`` (``{"metadata": {"labels": {"k": None}}}`` removes a label)."""
    from kubernetes import client

    return send(lambda: client.CustomObjectsApi(api_client).patch_cluster_custom_object(
        *crds.coordinates(dict(crd)), name, dict(body)))


def in_force(probe: Callable[[], Answer], words: str, *, budget: float = 30.0) -> bool:
    """Wait until ``probe`` is refused with ``words`` in the refusal: a policy or webhook is in force.

    The API server loads policies, bindings and webhook configurations from its own informers (policies
    are re-read every second), so a rule is in force a moment after its objects were stored, not at once.
    """
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        answer = probe()
        if not answer.accepted and words in answer.message:
            return True
        time.sleep(0.2)
    return False


# -- a kopf webhook in a process of its own ------------------------------------------------------

#: Why an API server may get no answer from a webhook this machine serves, and what fixes it.
UNREACHABLE = ("An API server in a container (kind's, minikube's) cannot dial 127.0.0.1 on this machine, where "
               "the webhook listens: run this on the lab's own cluster (`make lab` without "
               "OPERATORLAB_CLUSTER=existing).")


def runner_path() -> Path:
    """The file ``kopf run`` runs: :mod:`operatorlab.kopf_webhook`."""
    return Path(__file__).with_name("kopf_webhook.py")


class Webhook:
    """kopf serving the validating handlers of one file over TLS on ``https://127.0.0.1:PORT``.

    The port is chosen as the project's servers choose theirs (:func:`~operatorlab.cluster.process.free_port`),
    and chosen again if another process bound it first; the certificate is one of its own, from
    :func:`operatorlab.cluster.pki.serving`. Attached: it dies with the interpreter that started it.

    Args:
        handlers: the file defining the handler functions.
        functions: handler id -> function name in that file; each is served at ``/<id>``.
        crd: the CRD whose objects the handlers judge (a copy in a group of the caller's own).
    """

    def __init__(self, handlers: Path, functions: Mapping[str, str], crd: Mapping[str, Any], *,
                 kubeconfig: Path | None = None, workdir: Path | None = None) -> None:
        self.handlers = Path(handlers)
        self.functions = dict(functions)
        self.crd = crd
        self.kubeconfig = kubeconfig
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="operatorlab-webhook-"))
        self.tls = pki.serving(self.workdir / "tls", "webhook")
        self.port: int | None = None
        self.operator: OperatorProcess | None = None
        self._paused = False

    @property
    def ca_bundle(self) -> str:
        """The CA that signed the server's certificate, base64-encoded: a configuration's ``caBundle``."""
        return base64.b64encode(self.tls.ca.read_bytes()).decode()

    def url(self, handler_id: str) -> str:
        return f"https://127.0.0.1:{self.port}/{handler_id}"

    def runner(self) -> Path:
        """The file ``kopf run`` runs (a subclass serves something else: lesson 14's conversion)."""
        return runner_path()

    def environment(self) -> dict[str, str]:
        """What the runner serves, in its environment (the port and certificate are added by :meth:`start`)."""
        group, version, plural = crds.coordinates(dict(self.crd))
        return {"OPERATORLAB_WEBHOOK_HANDLERS": str(self.handlers),
                "OPERATORLAB_WEBHOOK_FUNCTIONS": ",".join(f"{i}={f}" for i, f in self.functions.items()),
                "OPERATORLAB_WEBHOOK_RESOURCE": f"{group}/{version}/{plural}"}

    def start(self, *, timeout: float = 60.0) -> Webhook:
        """Start kopf and wait until it answers TLS on its port (after its startup and its first scan).

        Raises:
            RuntimeError: kopf exited (the handlers file did not load, say) or did not serve in time,
                with its log's tail.
        """
        for _ in range(3):
            self.port = process.free_port()
            env = {**self.environment(),
                   "OPERATORLAB_WEBHOOK_PORT": str(self.port),
                   "OPERATORLAB_WEBHOOK_CERT": str(self.tls.cert("webhook")),
                   "OPERATORLAB_WEBHOOK_KEY": str(self.tls.key("webhook")),
                   "OPERATORLAB_WEBHOOK_CA": str(self.tls.ca)}
            self.operator = OperatorProcess(self.runner(), kubeconfig=self.kubeconfig, env=env,
                                            log_path=self.workdir / "kopf.log")
            self.operator.start(timeout=timeout)
            if self._serving(timeout):
                return self
            lost = process.lost_port_race(self.operator.log_path)
            self.operator.stop()
            if not lost:
                break
        raise RuntimeError(f"kopf did not serve webhooks on 127.0.0.1:{self.port}:\n"
                           f"{process.tail(self.workdir / 'kopf.log', 15)}")

    def _serving(self, timeout: float) -> bool:
        context = ssl.create_default_context(cafile=str(self.tls.ca))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.operator and self.operator.running:
            try:
                with socket.create_connection(("127.0.0.1", self.port or 0), timeout=2) as raw, \
                        context.wrap_socket(raw, server_hostname="127.0.0.1"):
                    return True
            except OSError:
                time.sleep(0.2)
        return False

    @property
    def running(self) -> bool:
        return bool(self.operator and self.operator.running)

    def log(self) -> str:
        return self.operator.log() if self.operator else ""

    def pause(self) -> None:
        """SIGSTOP it: the port still takes connections (the kernel's backlog), and nothing answers."""
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self._paused = False

    def _signal(self, sig: int) -> None:
        identity = self.operator.identity if self.operator else None
        if identity and identity.alive:
            os.killpg(identity.pid, sig)  # its own process group (process.spawn), this very process

    def stop(self) -> None:
        """Stop it (gracefully; resumed first if paused). Its port then refuses connections."""
        if self._paused:
            self.resume()
        if self.operator:
            self.operator.stop()

    def __enter__(self) -> Webhook:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
