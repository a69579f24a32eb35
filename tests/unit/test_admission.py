"""Lesson 10's pure pieces: the admission manifests and the webhook's certificate (no cluster).

What the API server does with them is proven on the real one: the lesson's notebook and the
exercises 10-admission-policy and 10-validating-webhook (tests/exercises/).
"""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

from cryptography import x509

from operatorlab import admission, crds
from operatorlab.cluster import pki

COPY = crds.copy_to_group(crds.shipped("tenant.yaml"), "unit.lesson10.hedronite.io")


def test_a_rule_matches_the_copy_and_nothing_else() -> None:
    assert admission.resource_rule(COPY) == {"apiGroups": ["unit.lesson10.hedronite.io"], "apiVersions": ["v1"],
                                             "operations": ["CREATE", "UPDATE"], "resources": ["tenantcopies"]}


def test_a_mutating_binding_has_no_validation_actions() -> None:
    validating = admission.binding("b", "p", ["Deny"], param_ref={"name": "limits"})
    mutating = admission.binding("b", "p", None, kind="MutatingAdmissionPolicyBinding")
    assert validating["spec"] == {"policyName": "p", "validationActions": ["Deny"], "paramRef": {"name": "limits"}}
    assert mutating == {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
                        "metadata": {"name": "b"}, "spec": {"policyName": "p"}}


def test_a_webhook_entry_lets_dry_runs_through_and_says_its_failure_policy() -> None:
    entry = admission.webhook("fail.unit.hedronite.io", "https://127.0.0.1:1/x", "Q0E=", COPY, failure_policy="Ignore",
                              timeout_seconds=2, object_selector={"matchLabels": {"a": "b"}})
    assert entry["sideEffects"] == "None" and entry["failurePolicy"] == "Ignore" and entry["timeoutSeconds"] == 2
    assert entry["rules"][0]["resources"] == ["tenantcopies"] and entry["objectSelector"] == {"matchLabels": {"a": "b"}}


def test_the_client_method_names() -> None:
    assert admission._snake("ValidatingAdmissionPolicyBinding") == "validating_admission_policy_binding"
    assert admission._snake("MutatingWebhookConfiguration") == "mutating_webhook_configuration"


def test_the_webhook_certificate_is_one_a_strict_client_takes_for_127_0_0_1(tmp_path: Path) -> None:
    made = pki.serving(tmp_path / "tls", "webhook")
    ca = x509.load_pem_x509_certificate(made.ca.read_bytes())
    assert pki._leaf_problems(made.cert("webhook"), ca) == []
    # A TLS handshake as the API server makes it: the CA from the caBundle, the IP of the URL, strict X.509.
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(made.cert("webhook"), made.key("webhook"))
    client = ssl.create_default_context(cafile=str(made.ca))
    client.verify_flags |= ssl.VERIFY_X509_STRICT
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def accept() -> None:
            conn, _ = listener.accept()
            try:
                with server.wrap_socket(conn, server_side=True):
                    pass
            except ssl.SSLError:
                pass

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                client.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.version()
        thread.join(timeout=5)


def test_serving_keeps_what_it_made(tmp_path: Path) -> None:
    first = pki.serving(tmp_path, "webhook").cert("webhook").read_bytes()
    assert pki.serving(tmp_path, "webhook").cert("webhook").read_bytes() == first
