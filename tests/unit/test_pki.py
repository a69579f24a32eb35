"""The lab's PKI: certificates Kubernetes will accept for each identity."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import ssl

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from operatorlab.cluster import kubeconfig, pki
from tests.old_pki import issue_old_style
from tests.strict_tls import handshake, openssl_verify, strict_context

LEAVES = pki.CERTIFICATES[1:]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> pki.Pki:
    return pki.create(tmp_path_factory.mktemp("pki"), extra_ips=("192.0.2.7",))


def _load(p: pki.Pki, stem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(p.cert(stem).read_bytes())


def test_every_leaf_is_signed_by_the_ca(made):
    ca = _load(made, "ca")
    for stem in LEAVES:
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
    before = {p.name: p.read_bytes() for p in made.dir.iterdir()}
    pki.create(made.dir)
    assert {p.name: p.read_bytes() for p in made.dir.iterdir()} == before


# -- the extensions strict verifiers demand (kubeadm's set) ------------------------------


def _extension(cert: x509.Certificate, kind: type) -> x509.Extension:
    return cert.extensions.get_extension_for_class(kind)


def test_ca_is_a_critical_ca_with_kubeadms_key_usages_and_a_subject_key_identifier(made):
    ca = _load(made, "ca")
    constraints = _extension(ca, x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    usage = _extension(ca, x509.KeyUsage)
    assert usage.critical
    usages = (usage.value.digital_signature, usage.value.key_encipherment, usage.value.key_cert_sign)
    assert usages == (True, True, True)
    ski = _extension(ca, x509.SubjectKeyIdentifier).value
    assert ski.digest == x509.SubjectKeyIdentifier.from_public_key(ca.public_key()).digest


@pytest.mark.parametrize("stem", LEAVES)
def test_leaf_names_the_cas_key_and_its_own(made, stem):
    ca, cert = _load(made, "ca"), _load(made, stem)
    constraints = _extension(cert, x509.BasicConstraints)
    assert constraints.critical and not constraints.value.ca
    usage = _extension(cert, x509.KeyUsage)
    assert usage.critical
    usages = (usage.value.digital_signature, usage.value.key_encipherment, usage.value.key_cert_sign)
    assert usages == (True, True, False)
    wanted = ExtendedKeyUsageOID.SERVER_AUTH if stem == "apiserver" else ExtendedKeyUsageOID.CLIENT_AUTH
    assert list(_extension(cert, x509.ExtendedKeyUsage).value) == [wanted]
    assert _extension(cert, x509.SubjectKeyIdentifier).value.digest == \
        x509.SubjectKeyIdentifier.from_public_key(cert.public_key()).digest
    aki = _extension(cert, x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == _extension(ca, x509.SubjectKeyIdentifier).value.digest


@pytest.mark.parametrize("stem", LEAVES)
def test_openssl_strict_verify_accepts_every_leaf(made, stem):
    result = openssl_verify(made.ca, made.cert(stem))
    assert result.returncode == 0, result.stdout + result.stderr


def test_python_strict_tls_handshake_succeeds_with_client_certificate(made):
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(made.cert("apiserver")), str(made.key("apiserver")))
    server.load_verify_locations(str(made.ca))
    server.verify_mode = ssl.CERT_REQUIRED
    server.verify_flags |= ssl.VERIFY_X509_STRICT
    handshake(server, strict_context(made.ca, made.cert("admin"), made.key("admin")), "localhost")


# -- certificates from the older issuer --------------------------------------------------


@pytest.fixture
def old(tmp_path, made) -> pki.Pki:
    """A copy of ``made`` re-signed the old way: what a cluster made before strict TLS has."""
    shutil.copytree(made.dir, tmp_path / "pki")
    copy = pki.Pki(tmp_path / "pki")
    issue_old_style(copy)
    return copy


def test_strict_checks_refuse_old_style_certificates(old):
    """The strict checks above can fail: they do for what the older issuer made."""
    result = openssl_verify(old.ca, old.cert("apiserver"))
    assert result.returncode != 0
    assert "Missing" in result.stdout + result.stderr  # "Missing Authority/Subject Key Identifier"
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(old.cert("apiserver")), str(old.key("apiserver")))
    with pytest.raises(ssl.SSLCertVerificationError, match="Key Identifier"):
        handshake(server, strict_context(old.ca), "localhost")
    # Without the strict flag (Python 3.11/3.12's default) the same handshake passes.
    lenient = ssl.create_default_context(cafile=str(old.ca))
    lenient.verify_flags &= ~ssl.VERIFY_X509_STRICT
    handshake(server, lenient, "localhost")


def test_outdated_names_each_old_style_certificate_and_why(made, old):
    assert pki.outdated(made) == {}
    found = pki.outdated(old)
    assert list(found) == list(pki.CERTIFICATES)
    assert found["ca"] == "no Subject Key Identifier"
    assert found["admin"] == ("no critical KeyUsage digitalSignature, no Subject Key Identifier, "
                              "no Authority Key Identifier")
    assert pki.describe(found).startswith("ca.crt: no Subject Key Identifier; apiserver.crt, admin.crt, ")


def test_renew_reissues_with_the_same_keys_and_sans(old):
    keys = {p.name: p.read_bytes() for p in [*old.dir.glob("*.key"), old.sa_pub]}
    pki.renew(old, pki.outdated(old), extra_ips=("192.0.2.7",))
    assert pki.outdated(old) == {}
    assert {p.name: p.read_bytes() for p in [*old.dir.glob("*.key"), old.sa_pub]} == keys
    sans = _extension(_load(old, "apiserver"), x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("192.0.2.7") in sans.get_values_for_type(x509.IPAddress)
    for stem in LEAVES:
        assert openssl_verify(old.ca, old.cert(stem)).returncode == 0


def test_expired_certificates_are_outdated(old):
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1)
    issue_old_style(old, not_after=past)
    assert all(problem.startswith("expired") for problem in pki.outdated(old).values())


def test_a_leaf_from_another_ca_is_outdated(tmp_path, made):
    other = pki.create(tmp_path / "other")
    shutil.copytree(made.dir, tmp_path / "mixed")
    mixed = pki.Pki(tmp_path / "mixed")
    shutil.copy(other.cert("admin"), mixed.cert("admin"))
    shutil.copy(other.key("admin"), mixed.key("admin"))
    assert pki.outdated(mixed) == {"admin": "not signed by ca.crt, Authority Key Identifier not of the CA's key"}


def test_create_starts_over_without_the_ca_key(tmp_path, made):
    shutil.copytree(made.dir, tmp_path / "pki")
    copy = pki.Pki(tmp_path / "pki")
    copy.key("ca").unlink()
    pki.create(copy.dir)
    assert _load(copy, "ca") != _load(made, "ca")
    assert pki.outdated(copy) == {}
    assert copy.sa_key.read_bytes() == made.sa_key.read_bytes()  # tokens are signed with their own key


def test_create_refuses_a_key_that_is_not_ec_and_keeps_it(tmp_path, made):
    shutil.copytree(made.dir, tmp_path / "pki")
    copy = pki.Pki(tmp_path / "pki")
    copy.cert("admin").unlink()
    shutil.copy(copy.sa_key, copy.key("admin"))  # an RSA key where an EC key belongs
    with pytest.raises(ValueError, match=r"admin\.key holds a key of type RSAPrivateKey, .*: delete it"):
        pki.create(copy.dir)
    assert copy.key("admin").read_bytes() == copy.sa_key.read_bytes()
    assert not copy.cert("admin").exists()


def test_kubeconfig_points_at_files_and_server(tmp_path, made):
    path = kubeconfig.write(tmp_path / "kc", server="https://127.0.0.1:6443", ca=made.ca,
                            cert=made.cert("admin"), key=made.key("admin"), cluster="lab", user="admin")
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "lab"
    assert config["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:6443", "certificate-authority": str(made.ca)}
    assert config["users"][0]["user"]["client-key"] == str(made.key("admin"))
    assert path.stat().st_mode & 0o077 == 0


def test_a_users_request_names_the_user_and_groups_and_keeps_its_key(tmp_path):
    first = x509.load_pem_x509_csr(pki.user_request(tmp_path / "jane.key", "jane", ("dev",)))
    again = x509.load_pem_x509_csr(pki.user_request(tmp_path / "jane.key", "jane"))
    assert first.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "jane"
    assert [a.value for a in first.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["dev"]
    assert first.is_signature_valid and first.public_key() == again.public_key()  # one key, made once
    assert (tmp_path / "jane.key").stat().st_mode & 0o077 == 0


def test_a_backdated_certificate_is_expired_with_its_key_and_identity_kept(tmp_path, made):
    copy = pki.Pki(tmp_path / "pki")
    shutil.copytree(made.dir, copy.dir)
    key_before = copy.key("kube-scheduler").read_bytes()
    pki.backdate(copy, "kube-scheduler", expired_for=datetime.timedelta(days=1))
    found = pki.facts(copy, copy.cert("kube-scheduler"))
    assert found.user == "system:kube-scheduler" and found.groups == ()
    assert found.problems == ("expired",) and not found.current and found.issued_by_ca
    assert found.not_after < datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=23)
    assert found.lifetime == datetime.timedelta(days=365)
    assert copy.key("kube-scheduler").read_bytes() == key_before
    assert pki.outdated(copy) == {"kube-scheduler": "expired"}


def test_facts_name_the_user_groups_and_a_foreign_issuer(tmp_path, made):
    assert pki.facts(made, made.cert("admin")).groups == ("system:masters",)
    own = pki.facts(made, made.cert("kube-scheduler"))
    assert own.problems == () and own.current and own.issued_by_ca
    other = pki.facts(made, pki.create(tmp_path / "other").cert("kube-scheduler"))
    assert not other.issued_by_ca and "not signed by ca.crt" in other.problems
