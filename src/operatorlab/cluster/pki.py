"""A throw-away public-key infrastructure for one local cluster, made with ``cryptography``.

One CA signs everything. Identities follow Kubernetes' default RBAC: the admin's
client certificate carries the group ``system:masters``; kube-controller-manager
and kube-scheduler authenticate as the users ``system:kube-controller-manager``
and ``system:kube-scheduler``, which the bootstrap ClusterRoleBindings already
name. The apiserver's serving certificate covers ``localhost``, ``127.0.0.1`` and
the in-cluster names of the ``kubernetes`` Service. Service-account tokens are
signed with a separate RSA key.

Every certificate carries the extensions a strict X.509 verifier demands, as
kubeadm's do: OpenSSL 3's ``X509_V_FLAG_X509_STRICT`` -- on by default in
``ssl.create_default_context()`` since Python 3.13, and ``openssl verify
-x509_strict`` -- refuses a CA without a Subject Key Identifier ("Missing Subject
Key Identifier") and a certificate it signed without an Authority Key Identifier
("Missing Authority Key Identifier"), where Go (kubectl, client-go) accepts both.

- CA: BasicConstraints ``CA:TRUE`` and KeyUsage ``digitalSignature,
  keyEncipherment, keyCertSign`` (both critical), Subject Key Identifier
  (client-go ``certutil.NewSelfSignedCACert``; Go derives the SKI from the key).
- Leaves: BasicConstraints ``CA:FALSE`` and KeyUsage ``digitalSignature,
  keyEncipherment`` (both critical), ExtendedKeyUsage ``serverAuth`` or
  ``clientAuth``, an Authority Key Identifier naming the CA's SKI (kubeadm
  ``pkiutil.NewSignedCert``, where Go copies it from the parent), and a Subject
  Key Identifier, which Go leaves out but RFC 5280 section 4.2.1.2 recommends.

Layout written by :func:`create` (PEM files)::

    ca.crt ca.key  apiserver.crt apiserver.key  admin.crt admin.key
    kube-controller-manager.crt/.key  kube-scheduler.crt/.key  kwok.crt/.key
    sa.key sa.pub

A cluster made before these extensions has certificates strict clients refuse:
:func:`outdated` finds them and :func:`renew` re-issues them with the same keys,
so the CA key (and whatever trusts it) and the ServiceAccount key (and every
token it signed) stay valid.

Sources: envtest's control plane (controller-runtime
``pkg/internal/testing/controlplane/auth.go``), kubeadm's certificate list
(https://kubernetes.io/docs/setup/best-practices/certificates/) and its
``cmd/kubeadm/app/util/pkiutil/pki_helpers.go``.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_E = TypeVar("_E", bound=x509.ExtensionType)

#: Client identities: file stem -> (user name, groups).
CLIENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("operatorlab-admin", ("system:masters",)),
    "kube-controller-manager": ("system:kube-controller-manager", ()),
    "kube-scheduler": ("system:kube-scheduler", ()),
    # kwok plays every node's kubelet; system:masters keeps it simple (it is a simulator).
    "kwok": ("kwok-controller", ("system:masters",)),
}

#: Every certificate's file stem, the CA first.
CERTIFICATES: tuple[str, ...] = ("ca", "apiserver", *CLIENTS)

_VALIDITY = datetime.timedelta(days=365)
_CA_NAME = "operatorlab-ca"


@dataclass(frozen=True)
class Pki:
    """Paths of one cluster's PKI files (see the module docstring for the layout)."""

    dir: Path

    def cert(self, stem: str) -> Path:
        return self.dir / f"{stem}.crt"

    def key(self, stem: str) -> Path:
        return self.dir / f"{stem}.key"

    @property
    def ca(self) -> Path:
        return self.cert("ca")

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"


@dataclass(frozen=True)
class _Leaf:
    """What one leaf certificate asserts: who (subject), for what (usage), where (SANs)."""

    subject: x509.Name
    usage: x509.ObjectIdentifier
    sans: tuple[x509.GeneralName, ...] = ()


def create(directory: Path, *, extra_ips: tuple[str, ...] = ()) -> Pki:
    """Create the PKI under ``directory``, or complete it: only what is missing is made.

    A key is generated only when its file is missing, so an existing CA key (and
    with it every certificate it signed) and ServiceAccount key (and every token
    it signed) survive; a certificate is issued whenever its file is missing. If
    the CA key itself is missing, every certificate is issued anew, since none
    of the existing ones could be verified any more.

    Args:
        directory: where to write the PEM files; created if missing, mode 0700.
        extra_ips: more IP SANs for the apiserver certificate (e.g. the advertise address).

    Returns:
        The :class:`Pki` describing the files.
    """
    pki = Pki(directory)
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    if not pki.key("ca").is_file():
        for stem in CERTIFICATES:
            pki.cert(stem).unlink(missing_ok=True)
    ca_key = _ec_key(pki.key("ca"))
    if not pki.ca.is_file():
        _write_cert(pki.ca, _ca_certificate(ca_key))
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    for stem, leaf in _leaves(extra_ips).items():
        if not pki.cert(stem).is_file():
            key = _ec_key(pki.key(stem))
            _write_cert(pki.cert(stem), _leaf_certificate(leaf, key.public_key(), ca, ca_key))
    if not pki.sa_key.is_file():
        _write_key(pki.sa_key, rsa.generate_private_key(public_exponent=65537, key_size=2048))
    if not pki.sa_pub.is_file():
        sa = serialization.load_pem_private_key(pki.sa_key.read_bytes(), password=None)
        pki.sa_pub.write_bytes(
            sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
    return pki


def outdated(pki: Pki) -> dict[str, str]:
    """Certificates a strict verifier would refuse, or that no longer chain to the CA.

    Missing files are not reported (:func:`create` makes them). A CA that needs
    re-issuing takes every leaf with it, since they came from the same issuer.

    Returns:
        File stem -> what is wrong with it (e.g. ``"no Subject Key Identifier"``),
        in :data:`CERTIFICATES` order; empty when every certificate is current.
    """
    if not (pki.ca.is_file() and pki.key("ca").is_file()):
        return {}
    try:
        ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    except ValueError:
        ca = None
    ca_key = serialization.load_pem_private_key(pki.key("ca").read_bytes(), password=None)
    found = {}
    ca_problems = _ca_problems(ca, ca_key.public_key()) if ca else ["unreadable"]
    if ca_problems:
        found["ca"] = ", ".join(ca_problems)
    for stem in CERTIFICATES[1:]:
        if pki.cert(stem).is_file():
            problems = _leaf_problems(pki.cert(stem), ca) if ca else []
            if problems or "ca" in found:
                found[stem] = ", ".join(problems) or "issued by the outdated CA"
    return found


def renew(pki: Pki, stems: Iterable[str], *, extra_ips: tuple[str, ...] = ()) -> None:
    """Re-issue the certificates ``stems`` (from :func:`outdated`) with their existing keys.

    Only certificate files are replaced; every key, the ServiceAccount key included,
    is kept. Stop whatever serves or presents these certificates first.
    """
    for stem in stems:
        pki.cert(stem).unlink(missing_ok=True)
    create(pki.dir, extra_ips=extra_ips)


@dataclass(frozen=True)
class Facts:
    """What a client certificate says and whether this cluster's API server would take it.

    Attributes:
        path: the PEM file read.
        user: the subject's CN (the user Kubernetes authenticates).
        groups: the subject's O values (the user's groups).
        not_before, not_after: its validity window (UTC).
        issued_by_ca: whether the cluster's CA signed it (all the API server checks of an issuer).
        problems: what a strict verifier would refuse (expired, not signed by ca.crt, a missing
            extension, ...); empty when none. Go (the API server) asks less: a current certificate
            signed by the CA, for client authentication.
    """

    path: Path
    user: str
    groups: tuple[str, ...]
    not_before: datetime.datetime
    not_after: datetime.datetime
    issued_by_ca: bool
    problems: tuple[str, ...]

    @property
    def current(self) -> bool:
        return self.not_before <= datetime.datetime.now(datetime.UTC) < self.not_after

    @property
    def lifetime(self) -> datetime.timedelta:
        return self.not_after - self.not_before


def facts(pki: Pki, path: Path) -> Facts:
    """Read the certificate at ``path`` and check it against this cluster's CA (``kubeadm certs check-expiration``).

    Raises:
        ValueError: ``path`` holds no PEM certificate.
    """
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    subject = cert.subject
    try:
        cert.verify_directly_issued_by(ca)
        issued_by_ca = True
    except (ValueError, TypeError, InvalidSignature):
        issued_by_ca = False
    return Facts(
        path=path,
        user=", ".join(str(a.value) for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)),
        groups=tuple(str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)),
        not_before=cert.not_valid_before_utc, not_after=cert.not_valid_after_utc, issued_by_ca=issued_by_ca,
        problems=tuple(_leaf_problems(path, ca)),
    )


def backdate(pki: Pki, stem: str, *, expired_for: datetime.timedelta) -> None:
    """Re-issue client certificate ``stem`` with its key and identity, expired ``expired_for`` ago.

    A year's validity, as its first one had: what a cluster nobody renewed for a year presents.
    """
    leaf = _leaves(())[stem]
    ca_key = serialization.load_pem_private_key(pki.key("ca").read_bytes(), password=None)
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    key = serialization.load_pem_private_key(pki.key(stem).read_bytes(), password=None)
    cert = _leaf_certificate(leaf, key.public_key(), ca, ca_key,
                             ending=datetime.datetime.now(datetime.UTC) - expired_for)
    _write_cert(pki.cert(stem), cert)


def describe(found: dict[str, str]) -> str:
    """One line for :func:`outdated`'s result: files with the same problems grouped together."""
    by_problem: dict[str, list[str]] = {}
    for stem, problem in found.items():
        by_problem.setdefault(problem, []).append(f"{stem}.crt")
    return "; ".join(f"{', '.join(files)}: {problem}" for problem, files in by_problem.items())


# -- issuing ---------------------------------------------------------------------------


def _leaves(extra_ips: tuple[str, ...]) -> dict[str, _Leaf]:
    ips = ["127.0.0.1", "10.0.0.1", *extra_ips]
    dns = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
           "kubernetes.default.svc.cluster.local")
    apiserver = _Leaf(
        _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH,
        (*(x509.DNSName(n) for n in dns), *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in dict.fromkeys(ips))),
    )
    clients = {stem: _Leaf(_name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)
               for stem, (user, groups) in CLIENTS.items()}
    return {"apiserver": apiserver, **clients}


def _ca_certificate(key: ec.EllipticCurvePrivateKey, common_name: str = _CA_NAME) -> x509.Certificate:
    name = _name(common_name)
    return (
        _builder(name, name, key.public_key(), validity=10 * _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(_ski(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _leaf_certificate(leaf: _Leaf, public_key, ca: x509.Certificate, ca_key, *,
                      ending: datetime.datetime | None = None) -> x509.Certificate:
    builder = (
        _builder(leaf.subject, ca.subject, public_key, validity=_VALIDITY, ending=ending)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([leaf.usage]), critical=False)
        .add_extension(_ski(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(_ski(ca.public_key())), critical=False
        )
    )
    if leaf.sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(leaf.sans)), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    # kubeadm's set for every certificate, plus keyCertSign for a CA.
    return x509.KeyUsage(
        digital_signature=True, key_encipherment=True, key_cert_sign=cert_sign,
        content_commitment=False, data_encipherment=False, key_agreement=False, crl_sign=False,
        encipher_only=False, decipher_only=False,
    )


def _ski(public_key) -> x509.SubjectKeyIdentifier:
    # RFC 5280 method 1 (SHA-1 of the public key), as Go computes it for a CA.
    return x509.SubjectKeyIdentifier.from_public_key(public_key)


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    # Kubernetes reads the user from CN and the groups from O (one O per group).
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: x509.Name, issuer: x509.Name, public_key, *, validity: datetime.timedelta,
             ending: datetime.datetime | None = None) -> x509.CertificateBuilder:
    """Valid from five minutes ago (clock skew tolerated) for ``validity``, or for ``validity`` up to ``ending``."""
    now = datetime.datetime.now(datetime.UTC)
    start = ending - validity if ending else now - datetime.timedelta(minutes=5)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(ending or now + validity)
    )


# -- a server the API server calls: an admission webhook ------------------------------------


def serving(directory: Path, stem: str, *, ips: tuple[str, ...] = ("127.0.0.1",),
            dns: tuple[str, ...] = ("localhost",)) -> Pki:
    """A CA of its own and one server certificate it signed, for a server the API server calls.

    An admission webhook is such a server: the API server dials it over TLS and verifies its
    certificate against the ``caBundle`` of the webhook's configuration, so the certificate must
    name the address in the webhook's URL (``127.0.0.1`` here: an IP SAN). Its own CA, not the
    cluster's: the webhook's configuration names what it trusts, and a webhook's key signs nothing
    the API server would take from a client. The same extensions as the cluster's certificates
    (strict verifiers), usage ``serverAuth``. Files: ``ca.crt ca.key <stem>.crt <stem>.key``, made
    only if missing (as :func:`create`).
    """
    pki = Pki(directory)
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    ca_key = _ec_key(pki.key("ca"))
    if not pki.ca.is_file():
        _write_cert(pki.ca, _ca_certificate(ca_key, f"operatorlab-{stem}-ca"))
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    if not pki.cert(stem).is_file():
        leaf = _Leaf(_name(stem), ExtendedKeyUsageOID.SERVER_AUTH,
                     (*(x509.DNSName(n) for n in dns), *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips)))
        key = _ec_key(pki.key(stem))
        _write_cert(pki.cert(stem), _leaf_certificate(leaf, key.public_key(), ca, ca_key))
    return pki


# -- a user's key and request, for the certificates API ---------------------------------


def user_request(key_path: Path, user: str, groups: tuple[str, ...] = ()) -> bytes:
    """A PEM certificate signing request for ``user`` (CN) in ``groups`` (O), with the key in ``key_path``.

    The key is made (P-256, mode 0600) if the file is missing, as ``openssl genrsa`` then
    ``openssl req -new -key ... -subj "/CN=jane"`` do for a new user; the request is what a
    ``CertificateSigningRequest``'s ``spec.request`` carries (base64 encoded) for the signer
    ``kubernetes.io/kube-apiserver-client`` to sign once approved. Not this cluster's CA:
    whichever CA the cluster's controller-manager signs with.
    """
    key = _ec_key(key_path)
    request = x509.CertificateSigningRequestBuilder().subject_name(_name(user, groups)).sign(key, hashes.SHA256())
    return request.public_bytes(serialization.Encoding.PEM)


# -- checking ----------------------------------------------------------------------------


def _ca_problems(ca: x509.Certificate, ca_public_key) -> list[str]:
    problems = _basic_problems(ca, is_ca=True)
    if _spki(ca.public_key()) != _spki(ca_public_key):
        problems.append("does not match ca.key")
    return problems


def _leaf_problems(path: Path, ca: x509.Certificate) -> list[str]:
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except ValueError:
        return ["unreadable"]
    problems = _basic_problems(cert, is_ca=False)
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        problems.append("not signed by ca.crt")
    if _extension(cert, x509.ExtendedKeyUsage) is None:
        problems.append("no ExtendedKeyUsage")
    aki = _extension(cert, x509.AuthorityKeyIdentifier)
    problems += _identifier_problems("Authority Key Identifier", aki.value.key_identifier if aki else None,
                                     _ski(ca.public_key()).digest, "the CA's key")
    return problems


def _basic_problems(cert: x509.Certificate, *, is_ca: bool) -> list[str]:
    """What a CA and a leaf must both get right: validity, BasicConstraints, KeyUsage, Subject Key Identifier."""
    problems = ["expired"] if cert.not_valid_after_utc <= datetime.datetime.now(datetime.UTC) else []
    constraints = _extension(cert, x509.BasicConstraints)
    if not (constraints and constraints.critical and constraints.value.ca == is_ca):
        problems.append(f"no critical BasicConstraints CA:{'TRUE' if is_ca else 'FALSE'}")
    usage = _extension(cert, x509.KeyUsage)
    needed = "keyCertSign" if is_ca else "digitalSignature"
    if not (usage and usage.critical and (usage.value.key_cert_sign if is_ca else usage.value.digital_signature)):
        problems.append(f"no critical KeyUsage {needed}")
    ski = _extension(cert, x509.SubjectKeyIdentifier)
    problems += _identifier_problems("Subject Key Identifier", ski.value.digest if ski else None,
                                     _ski(cert.public_key()).digest, "its key")
    return problems


def _identifier_problems(name: str, found: bytes | None, expected: bytes, whose: str) -> list[str]:
    """A key identifier must be there (strict verifiers) and name the right key (chain building)."""
    if found is None:
        return [f"no {name}"]
    return [] if found == expected else [f"{name} not of {whose}"]


def _extension(cert: x509.Certificate, kind: type[_E]) -> x509.Extension[_E] | None:
    try:
        return cert.extensions.get_extension_for_class(kind)
    except x509.ExtensionNotFound:
        return None


def _spki(public_key) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


# -- files ---------------------------------------------------------------------------------


def _ec_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """The key in ``path``, or a new P-256 key written there if there is none."""
    if path.is_file():
        found = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(found, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{path} holds a key of type {type(found).__name__}, where this PKI keeps an EC key: "
                             "delete it and run `operatorlab cluster up` to have a new one made")
        return found
    key = ec.generate_private_key(ec.SECP256R1())
    _write_key(path, key)
    return key


def _write_key(path: Path, key) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
