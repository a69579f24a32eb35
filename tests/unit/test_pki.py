"""The lab's PKI: certificates Kubernetes will accept for each identity."""

from __future__ import annotations

import ipaddress

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from operatorlab.cluster import kubeconfig, pki


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> pki.Pki:
    return pki.create(tmp_path_factory.mktemp("pki"), extra_ips=("192.0.2.7",))


def _load(p: pki.Pki, stem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(p.cert(stem).read_bytes())


def test_every_leaf_is_signed_by_the_ca(made):
    ca = _load(made, "ca")
    for stem in ("apiserver", *pki.CLIENTS):
        cert = _load(made, stem)
        cert.verify_directly_issued_by(ca)  # raises if the signature or issuer is wrong


def test_apiserver_cert_serves_loopback_and_in_cluster_names(made):
    cert = _load(made, "apiserver")
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "kubernetes.default.svc"} <= set(sans.get_values_for_type(x509.DNSName))
    ips = set(sans.get_values_for_type(x509.IPAddress))
    assert {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("192.0.2.7")} <= ips
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage


@pytest.mark.parametrize("stem", list(pki.CLIENTS))
def test_client_identity_is_cn_user_and_o_groups(made, stem):
    user, groups = pki.CLIENTS[stem]
    subject = _load(made, stem).subject
    assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == user
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == list(groups)


def test_private_keys_are_not_world_readable(made):
    for stem in ("ca", "apiserver", "admin"):
        assert made.key(stem).stat().st_mode & 0o077 == 0
    assert made.sa_key.stat().st_mode & 0o077 == 0


def test_create_reuses_a_complete_pki(made):
    before = made.cert("ca").read_bytes()
    pki.create(made.dir)
    assert made.cert("ca").read_bytes() == before


def test_kubeconfig_points_at_files_and_server(tmp_path, made):
    path = kubeconfig.write(tmp_path / "kc", server="https://127.0.0.1:6443", ca=made.ca,
                            cert=made.cert("admin"), key=made.key("admin"), cluster="lab", user="admin")
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "lab"
    assert config["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:6443", "certificate-authority": str(made.ca)}
    assert config["users"][0]["user"]["client-key"] == str(made.key("admin"))
    assert path.stat().st_mode & 0o077 == 0
