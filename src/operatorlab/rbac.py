"""Run as an operator's ServiceAccount: its RBAC objects, and a kubeconfig with its token.

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


def token_kubeconfig(api_client, token: str, path: Path, *, user: str) -> Path:
    """Write a kubeconfig for the same API server as ``api_client``, authenticating with ``token``.

    The server URL and the CA come from ``api_client``'s configuration; the CA is
    embedded, so the file stands alone. Written with mode 0600: it grants access.
    """
    conf = api_client.configuration
    ca_data = Path(conf.ssl_ca_cert).read_bytes() if conf.ssl_ca_cert else None
    return kubeconfig.write(path, server=conf.host, cluster="cluster", user=user, ca_data=ca_data, token=token,
                            insecure=ca_data is None and not conf.verify_ssl)


def service_account_kubeconfig(api_client, namespace: str, name: str, path: Path, *,
                               expiration_seconds: int = 3600) -> Path:
    """Write a kubeconfig acting as ServiceAccount ``namespace/name`` (a fresh token) to ``path``."""
    token = service_account_token(api_client, namespace, name, expiration_seconds=expiration_seconds)
    return token_kubeconfig(api_client, token, path, user=f"system:serviceaccount:{namespace}:{name}")
