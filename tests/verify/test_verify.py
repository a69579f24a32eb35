"""``operatorlab verify`` on the real cluster: it passes on every operator of the course, and a
broken copy of the capstone's reference fails on the property that names its fault.

The broken copies are the reference with one edit each (``BROKEN``), graded only on the
properties that catch them (``--only``): the whole suite on each of them would cost minutes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from operatorlab import paths
from operatorlab.exercises import get, grade
from operatorlab.operators import operator_path
from operatorlab.verify import PROPERTIES, Inputs, verify
from tests.verify.conftest import VERIFY_GROUP

pytestmark = pytest.mark.xdist_group(VERIFY_GROUP)

INPUTS = Path(__file__).parent / "inputs"
CAPSTONE = paths.repo_root() / "exercises" / "08-capstone"
# What each worked example needs beyond its CRD, example and unusable spec: the
# NamespaceBaseline marks its policies with a label, and they outlive it (fail-closed).
EXTRA = {"namespacebaseline": {"child_selector": "hedronite.io/namespacebaseline={name}", "children_outlive": True}}

# broken copy -> (file, text in it, replacement, properties graded, the property that must fail)
BROKEN: dict[str, tuple[str, str, str, tuple[str, ...], str]] = {
    "creates blindly (not idempotent)": (
        "solution.py", "observed, created = _get_or_create(read=read, create=lambda: create(desired))",
        "observed, created = create(desired), True", ("converge", "resync"), "resync"),
    "no owner reference, no cleanup": (
        "solution.py", "        kopf.append_owner_reference(body, owner=owner_body(name, uid))", "        pass",
        ("converge", "delete"), "delete"),
    "an unusable spec reported nowhere": (
        "solution.py",
        '    except NameTaken as e:\n        if record_status(body, patch, {"phase": "NameTaken"}, ready=False, '
        'reason="NameTaken", message=str(e)):\n            kopf.warn(body, reason="NameTaken", message=str(e))\n',
        "    except NameTaken:\n", ("unusable",), "unusable"),
    "a hot retry loop": ("solution.py", "NAME_TAKEN_RETRY_DELAY = 30.0", "NAME_TAKEN_RETRY_DELAY = 0.1",
                         ("unusable",), "unusable"),
    "a schema that lets Secrets through": (
        "crd.yaml", "                    enum: [pods, pods/log,", "                    x-enum: [pods, pods/log,",
        ("crd",), "crd"),
}


def _text(checks: list) -> str:
    return "\n".join(f"{'PASS' if c.passed else 'FAIL'}  {c.name}: {c.message}" for c in checks)


@pytest.mark.parametrize("name", ["tenant", "website", "namespacebaseline"])
def test_the_suite_passes_on_each_worked_example(name: str, verify_cluster: Path) -> None:
    inputs = Inputs(operator_path(name), paths.crds_dir() / f"{name}.yaml", INPUTS / name / "example.yaml",
                    INPUTS / name / "unusable.yaml", **EXTRA.get(name, {}))  # type: ignore[arg-type]
    checks = verify(inputs, verify_cluster)
    assert [c.name for c in checks] == list(PROPERTIES.values())
    assert all(c.passed for c in checks), _text(checks)


def test_the_capstone_reference_passes(verify_cluster: Path) -> None:
    verdict = grade("08-capstone", path=CAPSTONE / "solution.py", kubeconfig=verify_cluster, record=False)
    assert verdict.passed, verdict.text()
    assert len(verdict.checks) == len(PROPERTIES), verdict.text()


def test_the_capstone_scaffold_fails_fast_and_says_why(tmp_path: Path, verify_cluster: Path) -> None:
    for source in (CAPSTONE / "scaffold").iterdir():
        shutil.copyfile(source, tmp_path / source.name)
    verdict = grade("08-capstone", path=tmp_path / "capstone_operator.py", kubeconfig=verify_cluster, record=False)
    assert not verdict.passed
    first = verdict.checks[0]
    assert first.name == PROPERTIES["crd"] and not first.passed, verdict.text()
    assert "refused the CRD" in first.message, verdict.text()
    assert all("not run" in c.message for c in verdict.checks[1:]), verdict.text()
    assert verdict.hint == get("08-capstone").hints[0]
    assert verdict.seconds < 15, f"a scaffold fails at once, not after budgets: {verdict.seconds:.1f} s"


@pytest.mark.parametrize("broken", list(BROKEN))
def test_each_broken_copy_fails_on_its_property(broken: str, tmp_path: Path, verify_cluster: Path) -> None:
    file, old, new, only, failing = BROKEN[broken]
    for name in ("solution.py", "crd.yaml", "example.yaml", "unusable.yaml", "bad.yaml"):
        shutil.copyfile(CAPSTONE / name, tmp_path / name)
    text = (tmp_path / file).read_text()
    assert text.count(old) == 1, f"{old!r} must occur once in {file}"
    (tmp_path / file).write_text(text.replace(old, new))
    inputs = Inputs.beside(tmp_path / "solution.py")
    if broken.startswith("no owner reference"):  # found by their label, as the reference marks them too
        inputs.child_selector = "hedronite.io/readonlyaccess={name}"
    checks = verify(inputs, verify_cluster, only=only)
    verdicts = {c.name: c.passed for c in checks}
    assert verdicts == {PROPERTIES[p]: p != failing for p in only}, _text(checks)


def test_the_command_says_fail_in_words_with_no_traceback(tmp_path: Path, verify_cluster: Path) -> None:
    (tmp_path / "crd.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "op.py").write_text("import kopf\n")
    run = subprocess.run(
        [sys.executable, "-m", "operatorlab.cli", "verify", str(tmp_path / "op.py"), "--example",
         str(CAPSTONE / "example.yaml"), "--kubeconfig", str(verify_cluster)],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert "FAIL" in run.stdout and "not valid YAML" in run.stdout, run.stdout
