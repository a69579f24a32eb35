"""The worked-example operators stand alone: each imports only kopf, kubernetes and the
standard library, so it runs in its own image and a learner can copy it as it is.

import-linter guards the layers inside ``operatorlab`` (.importlinter); the operators
are files outside the package, so this test reads their imports from the AST.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from operatorlab import operators, paths

ALLOWED = {"kopf", "kubernetes"} | set(sys.stdlib_module_names)


def imported_packages(source: str) -> set[str]:
    """The top-level packages a module imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("name", operators.operator_names())
def test_an_operator_imports_only_kopf_kubernetes_and_the_standard_library(name: str) -> None:
    path = operators.operator_path(name)
    extra = imported_packages(path.read_text()) - ALLOWED
    assert not extra, f"{path.relative_to(path.parents[2])} imports {sorted(extra)}: it must run alone in its image"


def test_the_rule_sees_an_import_of_ours_even_inside_a_function() -> None:
    source = "import kopf\n\ndef handler():\n    from operatorlab.tenants import Tenants\n"
    assert imported_packages(source) - ALLOWED == {"operatorlab"}


def test_every_operator_is_checked() -> None:
    assert set(operators.operator_names()) == {p.name for p in paths.operators_dir().iterdir()
                                                if (p / "Dockerfile").is_file()}
    assert Path(operators.operator_path("tenant")).name == "tenant_operator.py"
