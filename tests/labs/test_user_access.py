"""The user-access drill grades behaviour: access given by too wide a grant, or as someone else, fails.

tests/labs/test_labs.py proves its protocol. Here: Jane's certificate issued as it should be,
then the ways to let her work that give her more than asked (cluster-admin, admin, a Role of
``*``), each caught by the check that asks what she may do everywhere; and the admin's
kubeconfig put in her file, caught by the check that asks who the file authenticates as; and a
certificate for her signed by hand with the cluster's CA key while her request waits.
"""

from __future__ import annotations

import datetime
import shutil
from collections.abc import Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from kubernetes import client

from operatorlab import rbac
from operatorlab.labs import Lab
from tests.labs.drilling import drill_module, failing, started

DRILL = "user-access"
D = drill_module(DRILL)
pytestmark = pytest.mark.xdist_group(D.UserAccess.xdist_group)  # as test_labs.py runs it: not at once


@pytest.fixture
def lab(tmp_path, nothing_left) -> Iterator[Lab]:
    from operatorlab.cluster import current

    yield from started(DRILL, current(), tmp_path, nothing_left)


def _certificate_issued(lab: Lab) -> None:
    """The honest first step: her request approved, its certificate where her kubeconfig looks."""
    rbac.approve_certificate(lab.api, D.USER)
    D._save_certificate(lab)


def _role_repaired(lab: Lab) -> None:
    rbac_api = client.RbacAuthorizationV1Api(lab.api)
    rbac_api.patch_namespaced_role_binding(D.ROLE, D.NAMESPACE, {"subjects": [D._user(D.USER)]})
    rbac_api.patch_namespaced_role(D.ROLE, D.NAMESPACE, {"rules": D.RULES})


def _bind_cluster_role(lab: Lab, role: str) -> None:
    name = f"jane-{role}"
    lab.track("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", name)
    client.RbacAuthorizationV1Api(lab.api).create_cluster_role_binding({
        "metadata": {"name": name}, "subjects": [D._user(D.USER)],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}})


@pytest.mark.parametrize("role", ["cluster-admin", "admin"])
def test_a_cluster_role_binding_is_not_a_repair(lab, role):
    _certificate_issued(lab)
    _bind_cluster_role(lab, role)
    assert failing(lab) == [D.NOTHING_MORE]


def test_a_role_of_everything_in_her_namespace_is_not_a_repair(lab):
    _certificate_issued(lab)
    _role_repaired(lab)
    client.RbacAuthorizationV1Api(lab.api).patch_namespaced_role(D.ROLE, D.NAMESPACE, {"rules": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})
    assert failing(lab) == [D.NOTHING_MORE]


def test_the_admins_kubeconfig_in_her_file_is_not_a_repair(lab):
    shutil.copy(lab.ctx.kubeconfig, lab.workdir / D.KUBECONFIG)
    assert failing(lab) == [D.IDENTITY]


@pytest.mark.local_cluster  # signs with our cluster's CA key, which a cluster someone else runs keeps to itself
def test_a_certificate_signed_by_hand_while_her_request_waits_is_not_a_repair(lab):
    pki = lab.ctx.cluster.pki
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.key("ca").read_bytes(), password=None)
    her_key = serialization.load_pem_private_key((lab.workdir / D.KEY).read_bytes(), password=None)
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, D.USER)]))
            .issuer_name(ca.subject).public_key(her_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(hours=1))
            .sign(ca_key, hashes.SHA256()))
    (lab.workdir / D.CERT).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _role_repaired(lab)
    assert failing(lab) == [D.IDENTITY]  # the API server takes it; her request was never approved
