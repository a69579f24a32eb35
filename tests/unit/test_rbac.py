"""Unit tests of operatorlab.rbac's pure parts: the operators' RBAC objects, renamed
copies of them, and the token kubeconfig file. Getting a token from the TokenRequest
API and using it is for tests/integration/test_rbac.py.
"""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from operatorlab import rbac


@pytest.mark.parametrize(("operator", "namespace"), [
    ("tenant", "operatorlab-system"), ("website", "operatorlab-system"),
    ("namespacebaseline", "namespacebaseline-system")])  # the NamespaceBaseline operator runs in its own
def test_operator_rbac_is_its_deploy_identity_in_the_kustomization_namespace(operator: str, namespace: str) -> None:
    account, role, binding = rbac.operator_rbac(operator)
    name = f"{operator}-operator"
    assert (account["kind"], account["metadata"]["name"], account["metadata"]["namespace"]) == (
        "ServiceAccount", name, namespace)
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", name) and role["rules"]
    assert binding["roleRef"]["name"] == name
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]


def test_a_renamed_copy_keeps_the_rules_and_points_at_itself() -> None:
    original = rbac.operator_rbac("website")
    account, role, binding = rbac.operator_rbac("website", name="website-operator-copy")
    names = (account["metadata"]["name"], role["metadata"]["name"], binding["metadata"]["name"])
    assert names == ("website-operator-copy",) * 3
    assert role["rules"] == original[1]["rules"]
    assert binding["roleRef"]["name"] == "website-operator-copy"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "website-operator-copy",
                                    "namespace": "operatorlab-system"}]


def test_operator_rbac_of_an_unknown_operator_says_so() -> None:
    with pytest.raises(FileNotFoundError):
        rbac.operator_rbac("nope")


def test_token_kubeconfig_embeds_server_ca_and_token(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n")
    api_client = SimpleNamespace(configuration=SimpleNamespace(
        host="https://127.0.0.1:6443", ssl_ca_cert=str(ca), verify_ssl=True))
    path = rbac.token_kubeconfig(api_client, "t0ken", tmp_path / "sa" / "kubeconfig",
                                 user="system:serviceaccount:ns:sa")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = yaml.safe_load(path.read_text())
    (cluster,) = config["clusters"]
    assert cluster["cluster"]["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == ca.read_bytes()
    assert config["users"] == [{"name": "system:serviceaccount:ns:sa", "user": {"token": "t0ken"}}]
    (context,) = config["contexts"]
    assert config["current-context"] == context["name"]
    assert context["context"] == {"cluster": cluster["name"], "user": "system:serviceaccount:ns:sa"}
