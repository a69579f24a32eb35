"""Run as an operator's ServiceAccount: its RBAC objects, and a kubeconfig with its token; or as a
user, with a client certificate issued through the certificates API (the last section).

An operator in a Pod talks to the API server as its ServiceAccount, with exactly
the verbs its ClusterRole grants. To show that (and to break it on purpose in the
labs) outside a Pod:

1. :func:`operator_rbac` reads the operator's ``deploy/`` ServiceAccount,
   ClusterRole and ClusterRoleBinding, optionally renamed to a private copy;
2. apply them (``operatorlab.cluster.manifests.apply``);
3. :func:`service_account_kubeconfig` asks the TokenRequest API for a short-lived
   token of that ServiceAccount and writes a kubeconfig that uses it;
4. run the operator with that kubeconfig (``OperatorProcess(..., kubeconfig=...)``).

Every request it then makes is authorized as
``system:serviceaccount:<namespace>:<name>``: what its ClusterRole lacks is a 403.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from operatorlab import paths
from operatorlab.cluster import kubeconfig

# deploy/ files holding an operator's identity and permissions.
RBAC_FILES = ("serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml")


def operator_rbac(operator: str, *, name: str | None = None) -> list[dict[str, Any]]:
    """The ServiceAccount, ClusterRole and ClusterRoleBinding of ``operators/<operator>/deploy/``.

    The namespace is the kustomization's (``operatorlab-system``, shared by the
    Tenant and Website operators; ``namespacebaseline-system`` for the
    NamespaceBaseline operator), as ``kubectl apply -k`` would set it. With ``name``, all three are renamed to it
    (the binding pointing at the renamed role and account): a private copy with the
    very same rules, which a test or a lab may apply, change and delete without
    touching the shared one.

    Raises:
        FileNotFoundError: the operator has no such deploy/ file.
    """
    deploy = paths.operators_dir() / operator / "deploy"
    namespace = yaml.safe_load((deploy / "kustomization.yaml").read_text())["namespace"]
    objects = [yaml.safe_load((deploy / f).read_text()) for f in RBAC_FILES]
    for obj in objects:
        meta = obj["metadata"]
        if name:
            meta["name"] = name
        if obj["kind"] == "ServiceAccount":
            meta["namespace"] = namespace
        if obj["kind"] == "ClusterRoleBinding":
            if name:
                obj["roleRef"]["name"] = name
            for subject in obj["subjects"]:
                if subject["kind"] == "ServiceAccount":
                    subject["namespace"] = namespace
                    if name:
                        subject["name"] = name
    return objects


def service_account_token(api_client, namespace: str, name: str, *, expiration_seconds: int = 3600) -> str:
    """A token for ServiceAccount ``namespace/name`` from the TokenRequest API.

    Bound to nothing and valid ``expiration_seconds`` (the API server may
    shorten it; 10 minutes is the least it accepts). Nothing is stored in a Secret.

    Raises:
        kubernetes.client.ApiException: e.g. 404 if the ServiceAccount does not exist.
    """
    from kubernetes import client

    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=expiration_seconds)
    )
    response = client.CoreV1Api(api_client).create_namespaced_service_account_token(name, namespace, request)
    if response.status is None or not response.status.token:
        raise RuntimeError(f"the TokenRequest API returned no token for ServiceAccount {namespace}/{name}")
    return response.status.token


def server_fields(api_client) -> dict[str, Any]:
    """The API server of ``api_client`` as :func:`kubeconfig.config`'s fields: its URL and CA (embedded,
    so the file stands alone), or ``insecure`` only where the client itself skips verification."""
    conf = api_client.configuration
    ca_data = Path(conf.ssl_ca_cert).read_bytes() if conf.ssl_ca_cert else None
    return {"server": conf.host, "ca_data": ca_data, "insecure": ca_data is None and not conf.verify_ssl}


def token_config(api_client, token: str, *, user: str, cluster: str = "cluster", context: str | None = None,
                 namespace: str | None = None) -> dict[str, Any]:
    """A one-context kubeconfig (a dict) for the same API server as ``api_client``, authenticating with ``token``."""
    return kubeconfig.config(**server_fields(api_client), cluster=cluster, user=user, token=token, context=context,
                             namespace=namespace)


def token_kubeconfig(api_client, token: str, path: Path, *, user: str) -> Path:
    """Write a kubeconfig for the same API server as ``api_client``, authenticating with ``token``.

    The server URL and the CA come from ``api_client``'s configuration; the CA is
    embedded, so the file stands alone. Written with mode 0600: it grants access.
    """
    return kubeconfig.write_config(path, token_config(api_client, token, user=user))


def service_account_kubeconfig(api_client, namespace: str, name: str, path: Path, *,
                               expiration_seconds: int = 3600) -> Path:
    """Write a kubeconfig acting as ServiceAccount ``namespace/name`` (a fresh token) to ``path``."""
    token = service_account_token(api_client, namespace, name, expiration_seconds=expiration_seconds)
    return token_kubeconfig(api_client, token, path, user=f"system:serviceaccount:{namespace}:{name}")


# -- a user's client certificate, through the certificates API -----------------------------

#: The signer of client certificates the API server accepts: kube-controller-manager's
#: ``csrsigning-kube-apiserver-client`` controller signs an *approved* request for it with
#: the CA of ``--cluster-signing-cert-file`` (Kubernetes v1.36.3:
#: ``pkg/controller/certificates/signer/signer.go``, ``NewKubeAPIServerClientCSRSigningController``).
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"


def request_certificate(api_client, name: str, request_pem: bytes, *, expiration_seconds: int = 86400) -> None:
    """Create CertificateSigningRequest ``name`` for a client certificate (``request_pem``, e.g.
    from :func:`operatorlab.cluster.pki.user_request`): pending until someone approves it."""
    import base64

    from kubernetes import client

    body: Any = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                 "metadata": {"name": name},
                 "spec": {"request": base64.b64encode(request_pem).decode(), "signerName": CLIENT_SIGNER,
                          "expirationSeconds": expiration_seconds, "usages": ["client auth"]}}
    client.CertificatesV1Api(api_client).create_certificate_signing_request(body)


def approve_certificate(api_client, name: str) -> None:
    """Approve CertificateSigningRequest ``name`` as ``kubectl certificate approve`` does: an
    ``Approved`` condition written through its ``approval`` subresource."""
    from kubernetes import client

    certificates = client.CertificatesV1Api(api_client)
    csr: Any = certificates.read_certificate_signing_request(name)
    csr.status.conditions = [*(csr.status.conditions or []), client.V1CertificateSigningRequestCondition(
        type="Approved", status="True", reason="KubectlApprove",
        message="This CSR was approved by kubectl certificate approve.")]
    certificates.replace_certificate_signing_request_approval(name, csr)


def issued_certificate(api_client, name: str, *, timeout: float = 30.0) -> bytes:
    """The PEM certificate the signer wrote into CertificateSigningRequest ``name``'s
    ``status.certificate`` once it was approved (what ``kubectl get csr NAME -o
    jsonpath='{.status.certificate}' | base64 -d`` prints).

    Raises:
        TimeoutError: none within ``timeout`` s (is the controller-manager signing?).
    """
    import base64
    import time

    from kubernetes import client

    certificates = client.CertificatesV1Api(api_client)
    deadline = time.monotonic() + timeout
    while True:
        csr: Any = certificates.read_certificate_signing_request(name)
        if csr.status.certificate:
            return base64.b64decode(csr.status.certificate)
        if time.monotonic() > deadline:
            raise TimeoutError(f"CertificateSigningRequest {name} has no certificate {timeout:g} s after it was "
                               f"approved (conditions {[(c.type, c.reason) for c in csr.status.conditions or []]}): "
                               f"does kube-controller-manager run, with --cluster-signing-cert-file?")
        time.sleep(0.2)
