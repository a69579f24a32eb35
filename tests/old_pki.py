"""A test-only issuer of certificates as ``operatorlab.cluster.pki`` made them before strict TLS.

Until then the CA had no Subject Key Identifier and the leaves had neither a Subject
nor an Authority Key Identifier nor a KeyUsage. Go (kubectl, the apiserver) accepts
such certificates; OpenSSL's strict mode (Python 3.13+ by default) refuses them.
Tests use this to build the state an older cluster is in, and to prove that their
strict checks can fail.
"""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from operatorlab.cluster import pki

#: What the older issuer left out: key identifiers everywhere, KeyUsage on leaves.
_LEFT_OUT = (x509.SubjectKeyIdentifier, x509.AuthorityKeyIdentifier)


def issue_old_style(made: pki.Pki, *, not_after: datetime.datetime | None = None) -> None:
    """Re-sign every certificate in ``made`` the old way, with the same keys, names and SANs.

    Args:
        not_after: end of validity instead of the current one (e.g. in the past: expired).
    """
    ca_key = serialization.load_pem_private_key(made.key("ca").read_bytes(), password=None)
    for stem in pki.CERTIFICATES:
        cert = x509.load_pem_x509_certificate(made.cert(stem).read_bytes())
        builder = (
            x509.CertificateBuilder()
            .subject_name(cert.subject).issuer_name(cert.issuer).public_key(cert.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(cert.not_valid_before_utc).not_valid_after(not_after or cert.not_valid_after_utc)
        )
        for extension in cert.extensions:
            left_out = _LEFT_OUT + (() if stem == "ca" else (x509.KeyUsage,))
            if not isinstance(extension.value, left_out):
                builder = builder.add_extension(extension.value, critical=extension.critical)
        made.cert(stem).write_bytes(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
