"""The worked-example operators' shared code is copied, not imported: the copies must not drift.

Each operator runs alone in its image (it imports only kopf, kubernetes and the
standard library), so error routing, the Ready condition and the ownership rules
are written out in each. This test compares the copies' syntax trees (comments and
layout may differ; names, docstrings and logic may not): fix one, fix them all.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPERATORS = {
    name: ROOT / "operators" / name / f"{name}_operator.py" for name in ("tenant", "website", "namespacebaseline")
}

# In every operator: error routing, API object helpers, the Ready condition.
EVERYWHERE = ("_route_api_error", "retry_delay", "_server_message", "_serializer", "_as_dict", "_ignore",
              "ready_conditions", "record_status", "_now")
# In the operators whose children carry owner references (not namespacebaseline: fail-closed, by label).
OWNER_REFERENCES = ("NameTaken", "owner_body", "ownership", "name_taken", "adoption_patch", "configure")
CONSTANTS = ("DEFAULT_RETRY_DELAY", "CONFLICT_RETRY_DELAY")


def _definitions(path: Path) -> dict[str, str]:
    """Each top-level function, class and constant of a module, as a dump of its syntax tree."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found[node.name] = ast.dump(node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = ast.dump(node.value)
    return found


DEFINITIONS = {name: _definitions(path) for name, path in OPERATORS.items()}
# The capstone's reference operator copies the same helpers (its children carry owner references).
CAPSTONE = _definitions(ROOT / "exercises" / "08-capstone" / "solution.py")


@pytest.mark.parametrize("name", EVERYWHERE + CONSTANTS)
def test_every_operator_has_the_same_copy(name: str) -> None:
    copies = {operator: found.get(name) for operator, found in {**DEFINITIONS, "capstone": CAPSTONE}.items()}
    assert None not in copies.values(), f"{name} missing in {[o for o, c in copies.items() if c is None]}"
    assert len(set(copies.values())) == 1, f"the copies of {name} differ: make them the same in {sorted(copies)}"


@pytest.mark.parametrize("name", OWNER_REFERENCES)
def test_the_owner_reference_operators_have_the_same_copy(name: str) -> None:
    tenant, website = DEFINITIONS["tenant"].get(name), DEFINITIONS["website"].get(name)
    assert tenant is not None and tenant == website, f"the copies of {name} in tenant and website differ"
    assert CAPSTONE.get(name) == tenant, f"the capstone's copy of {name} differs from tenant's"


def test_the_comparison_sees_a_difference() -> None:
    """A changed message is a difference (so the tests above can fail)."""
    source = OPERATORS["tenant"].read_text()
    edited = source.replace(
        "retrying\",\n            delay=CONFLICT_RETRY_DELAY", "again\",\n            delay=CONFLICT_RETRY_DELAY"
    )
    assert edited != source
    original = next(n for n in ast.parse(source).body if getattr(n, "name", "") == "_route_api_error")
    changed = next(n for n in ast.parse(edited).body if getattr(n, "name", "") == "_route_api_error")
    assert ast.dump(original) != ast.dump(changed)
