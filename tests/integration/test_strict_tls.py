"""Strict TLS clients (Python 3.13+, ``openssl verify -x509_strict``) accept the cluster's certificates.

Python 3.13 verifies with ``VERIFY_X509_STRICT`` by default; the tests run on 3.11
with the flag set by hand (tests/strict_tls.py), so a certificate a learner's 3.13
or 3.14 would refuse fails here. A cluster made before the PKI had these
extensions is re-issued by ``up``: the last tests build that state and check that
nothing is lost.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from operatorlab.cluster import LocalCluster, current, pki
from tests.old_pki import issue_old_style
from tests.strict_tls import openssl_verify, strict_context


def _kubeconfig_tls(kubeconfig: Path, scratch: Path) -> tuple[str, Path, Path, Path]:
    """Server URL, CA, client certificate and key of the current context, as files
    (a kubeconfig may embed them as ``*-data``, as kind's does)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    context = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])

    def file(entry: dict, field: str) -> Path:
        if field in entry:
            return Path(entry[field])
        path = scratch / field
        path.write_bytes(base64.b64decode(entry[f"{field}-data"]))
        return path

    scratch.mkdir(parents=True, exist_ok=True)
    return (cluster["server"], file(cluster, "certificate-authority"),
            file(user, "client-certificate"), file(user, "client-key"))


def _strict_get(kubeconfig: Path, scratch: Path, path: str) -> dict:
    """GET ``path`` from the apiserver as Python 3.13+ would: strict verification, client certificate."""
    server, ca, cert, key = _kubeconfig_tls(kubeconfig, scratch)
    with urllib.request.urlopen(server + path, context=strict_context(ca, cert, key), timeout=10) as response:  # noqa: S310
        return json.loads(response.read())


def _serving_certificate(server: str, scratch: Path) -> Path:
    """The certificate the apiserver presents (fetched without verifying it: it is what we check)."""
    host, port = server.removeprefix("https://").rsplit(":", 1)
    path = scratch / "serving.crt"
    path.write_text(ssl.get_server_certificate((host, int(port)), timeout=10))
    return path


def _leaves_in_use(kubeconfig: Path, scratch: Path) -> dict[str, Path]:
    """Every leaf certificate the cluster uses: the serving one and each kubeconfig's client one."""
    server, _, cert, _ = _kubeconfig_tls(kubeconfig, scratch)
    leaves = {"kube-apiserver (serving)": _serving_certificate(server, scratch), kubeconfig.name: cert}
    cluster = current()
    if isinstance(cluster, LocalCluster):  # the control plane's own identities
        for component in sorted((cluster.dir / "components").glob("*.kubeconfig")):
            leaves[component.name] = _kubeconfig_tls(component, scratch / component.stem)[2]
    return leaves


# -- the session's cluster --------------------------------------------------------------


def test_a_strict_python_client_with_the_kubeconfigs_certificate_reaches_the_api(kubeconfig, tmp_path):
    version = _strict_get(kubeconfig, tmp_path, "/version")
    assert version["gitVersion"].startswith("v1.")
    assert "v1" in _strict_get(kubeconfig, tmp_path, "/api")["versions"]


def test_openssl_strict_verify_accepts_every_leaf_the_cluster_uses(kubeconfig, tmp_path):
    leaves = _leaves_in_use(kubeconfig, tmp_path)
    if isinstance(current(), LocalCluster):
        assert {"kube-controller-manager.kubeconfig", "kube-scheduler.kubeconfig", "kwok.kubeconfig"} <= set(leaves)
    _, ca, _, _ = _kubeconfig_tls(kubeconfig, tmp_path)
    results = {name: openssl_verify(ca, leaf) for name, leaf in leaves.items()}
    refused = {name: r.stdout + r.stderr for name, r in results.items() if r.returncode != 0}
    assert not refused, f"openssl verify -x509_strict refused: {refused}"


# -- a cluster from before: up re-issues its certificates -------------------------------


@pytest.fixture(scope="module")
def legacy_root(tmp_path_factory) -> Path:
    """Where a private cluster ``legacy`` lives, whose certificates the tests replace.

    Each use reads the cluster afresh (``LocalCluster(...)``), as each CLI command does,
    since ``up`` in between changes its pids.
    """
    root = tmp_path_factory.mktemp("clusters")
    LocalCluster("legacy", root=root).up(log=lambda _: None)
    yield root
    LocalCluster("legacy", root=root).down(purge=True, log=lambda _: None)


def _admin(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))


def _user_of_token(cluster: LocalCluster, token: str) -> str:
    """Whom the apiserver takes ``token`` for (a SelfSubjectReview authenticates and says)."""
    configuration = client.Configuration()
    configuration.host, configuration.ssl_ca_cert = cluster.server, str(cluster.pki.ca)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    review = client.AuthenticationV1Api(client.ApiClient(configuration)).create_self_subject_review(
        client.V1SelfSubjectReview())
    return review.status.user_info.username


@pytest.mark.parametrize("while_running", [True, False], ids=["running", "stopped"])
@pytest.mark.local_cluster
def test_up_reissues_old_style_certificates_and_loses_nothing(legacy_root, tmp_path, while_running):
    legacy = LocalCluster("legacy", root=legacy_root)
    core = _admin(legacy)
    name = f"kept-{'running' if while_running else 'stopped'}"
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name), data={"answer": "42"}))
    token = core.create_namespaced_service_account_token("default", "default", client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=["https://kubernetes.default.svc.cluster.local"],
                                       expiration_seconds=3600))).status.token
    if not while_running:
        legacy.down(log=lambda _: None)
    issue_old_style(legacy.pki)
    refused = openssl_verify(legacy.pki.ca, legacy.pki.cert("apiserver"))
    assert refused.returncode != 0, "the old-style certificate must fail strict verification"
    pids = {r.name: r.pid for r in legacy.status()}

    messages: list[str] = []
    legacy = LocalCluster("legacy", root=legacy_root).up(log=messages.append)  # as a new command would

    reissued = [m for m in messages if "re-issued" in m]
    assert len(reissued) == 1, messages
    assert "ca.crt: no Subject Key Identifier" in reissued[0] and "Python 3.13+" in reissued[0]
    assert pki.outdated(legacy.pki) == {}
    status = legacy.status()
    assert all(r.running and r.healthy for r in status), status
    after = {r.name: r.pid for r in status}
    if while_running:
        assert after["etcd"] == pids["etcd"], "etcd needs no certificate: it keeps running"
        assert after["kube-apiserver"] != pids["kube-apiserver"], "the apiserver serves the new certificate"
    assert _admin(legacy).read_namespaced_config_map(name, "default").data == {"answer": "42"}
    assert _user_of_token(legacy, token) == "system:serviceaccount:default:default"
    assert _strict_get(legacy.kubeconfig, tmp_path, "/version")["gitVersion"].startswith("v1.")
    server, ca, _, _ = _kubeconfig_tls(legacy.kubeconfig, tmp_path)
    assert openssl_verify(ca, _serving_certificate(server, tmp_path)).returncode == 0
    for stem in pki.CERTIFICATES[1:]:
        assert openssl_verify(ca, legacy.pki.cert(stem)).returncode == 0, stem

    again: list[str] = []
    legacy.up(log=again.append)
    assert not [m for m in again if "re-issued" in m], again
