"""A throw-away public-key infrastructure for one local cluster, made with ``cryptography``.

One CA signs everything. Identities follow Kubernetes' default RBAC: the admin's
client certificate carries the group ``system:masters``; kube-controller-manager
and kube-scheduler authenticate as the users ``system:kube-controller-manager``
and ``system:kube-scheduler``, which the bootstrap ClusterRoleBindings already
name. The apiserver's serving certificate covers ``localhost``, ``127.0.0.1`` and
the in-cluster names of the ``kubernetes`` Service. Service-account tokens are
signed with a separate RSA key.

Layout written by :func:`create` (PEM files)::

    ca.crt ca.key  apiserver.crt apiserver.key  admin.crt admin.key
    kube-controller-manager.crt/.key  kube-scheduler.crt/.key  kwok.crt/.key
    sa.key sa.pub

Sources: envtest's control plane (controller-runtime
``pkg/internal/testing/controlplane/auth.go``) and kubeadm's certificate list
(https://kubernetes.io/docs/setup/best-practices/certificates/).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Client identities: file stem -> (user name, groups).
CLIENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("operatorlab-admin", ("system:masters",)),
    "kube-controller-manager": ("system:kube-controller-manager", ()),
    "kube-scheduler": ("system:kube-scheduler", ()),
    # kwok plays every node's kubelet; system:masters keeps it simple (it is a simulator).
    "kwok": ("kwok-controller", ("system:masters",)),
}

_VALIDITY = datetime.timedelta(days=365)


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

    def exists(self) -> bool:
        return self.sa_pub.is_file() and all(self.key(s).is_file() for s in ("ca", "apiserver", *CLIENTS))


def create(directory: Path, *, extra_ips: tuple[str, ...] = ()) -> Pki:
    """Create (or reuse, if complete) the PKI under ``directory``.

    Args:
        directory: where to write the PEM files; created if missing, mode 0700.
        extra_ips: more IP SANs for the apiserver certificate (e.g. the advertise address).

    Returns:
        The :class:`Pki` describing the files.
    """
    pki = Pki(directory)
    if pki.exists():
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("operatorlab-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), validity=10 * _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(pki, "ca", ca_cert, ca_key)

    def leaf(stem: str, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _builder(subject, ca_name, key.public_key(), validity=_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        _write(pki, stem, builder.sign(ca_key, hashes.SHA256()), key)

    ips = ["127.0.0.1", "10.0.0.1", *extra_ips]
    leaf(
        "apiserver",
        _name("kube-apiserver"),
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default",
                                    "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")]
        + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in dict.fromkeys(ips)],
    )
    for stem, (user, groups) in CLIENTS.items():
        leaf(stem, _name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH, [])

    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pki.sa_key.write_bytes(_pem_key(sa))
    pki.sa_key.chmod(0o600)
    pki.sa_pub.write_bytes(
        sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pki


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    # Kubernetes reads the user from CN and the groups from O (one O per group).
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: x509.Name, issuer: x509.Name, public_key, *, validity: datetime.timedelta) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # tolerate small clock skew
        .not_valid_after(now + validity)
    )


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(pki: Pki, stem: str, cert: x509.Certificate, key) -> None:
    pki.cert(stem).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pki.key(stem).write_bytes(_pem_key(key))
    pki.key(stem).chmod(0o600)
