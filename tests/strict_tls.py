"""Strict X.509 verification as Python 3.13+ and ``openssl verify -x509_strict`` do it.

Python 3.13 turned on ``ssl.VERIFY_X509_STRICT`` in ``ssl.create_default_context()``
(OpenSSL's ``X509_V_FLAG_X509_STRICT``); setting the flag by hand makes the tests,
which run on 3.11, verify exactly as a learner's 3.13 or 3.14 does.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest


def strict_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """Python's default client context plus ``VERIFY_X509_STRICT``; with ``cert``, a client certificate."""
    context = ssl.create_default_context(cafile=str(ca))
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def openssl_verify(ca: Path, leaf: Path) -> subprocess.CompletedProcess:
    """``openssl verify -x509_strict -CAfile ca leaf``; fails the test if openssl is not installed."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("the openssl command is missing: install it (Debian/Ubuntu: apt-get install openssl)")
    return subprocess.run([openssl, "verify", "-x509_strict", "-CAfile", str(ca), str(leaf)],
                          capture_output=True, text=True, timeout=30)


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> None:
    """A TLS handshake between two contexts in memory (no socket); raises what the client raises."""
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server_side = server.wrap_bio(server_in, server_out, server_side=True)
    client_side = client.wrap_bio(client_in, client_out, server_hostname=hostname)
    done = {"server": False, "client": False}
    for _ in range(10):
        for name, side, out, peer_in in (("client", client_side, client_out, server_in),
                                         ("server", server_side, server_out, client_in)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            return
    raise AssertionError(f"TLS handshake did not finish: {done}")
