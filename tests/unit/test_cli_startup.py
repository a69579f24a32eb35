"""The ``operatorlab`` command starts without importing kopf: the names it needs are read, not imported.

Every command (``cluster up`` in the JupyterHub image's entrypoint, ``lab check`` in a
terminal) paid for importing kopf and aiohttp when ``operatorlab.tenants`` imported the
Tenant operator for five strings: seconds on a busy machine, twice per start of the image.
"""

from __future__ import annotations

import subprocess
import sys

from operatorlab import operators, tenants


def test_the_cli_imports_no_kopf() -> None:
    code = ("import sys, operatorlab.cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kopf', 'aiohttp')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_constants_are_the_operators_own_values() -> None:
    module = operators.load_module("tenant")
    read = operators.constants("tenant")
    for name in ("GROUP", "VERSION", "PLURAL", "TENANT_LABEL", "QUOTA_NAME"):
        assert read[name] == getattr(module, name)
    assert (tenants.GROUP, tenants.PLURAL) == (module.GROUP, module.PLURAL)
    assert tenants.namespace_of("acme") == module.namespace_name("acme")
