"""A learner's progress record, its class copy, and the class view built from the copies."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from operatorlab import progress

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_attempts_first_pass_and_time_to_pass(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    progress.started("lab", "take-over", path=path, now=T0)
    progress.attempted("lab", "take-over", False, path=path, now=T0 + timedelta(minutes=5))
    item = progress.attempted("lab", "take-over", True, path=path, now=T0 + timedelta(minutes=12))
    assert (item.attempts, item.passed, item.seconds_to_pass) == (2, True, 720.0)
    # A later failing check (the learner broke it again) keeps the first pass.
    later = progress.attempted("lab", "take-over", False, path=path, now=T0 + timedelta(minutes=20))
    assert later.first_pass == item.first_pass and later.attempts == 3
    assert progress.load(path).items["lab:take-over"].summary() == "PASS in 12 min"


def test_a_pass_after_the_solution_says_so(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    progress.started("lab", "stuck-finalizer", path=path, now=T0)
    progress.solution_shown("lab", "stuck-finalizer", path=path)
    item = progress.attempted("lab", "stuck-finalizer", True, path=path, now=T0 + timedelta(minutes=3))
    assert item.summary() == "PASS after the solution"


def test_the_class_copy_is_written_only_when_asked_and_holds_only_the_record(tmp_path, monkeypatch) -> None:
    path = tmp_path / "mine" / "progress.json"
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    monkeypatch.delenv("OPERATORLAB_CLASS_DIR", raising=False)
    progress.started("lab", "take-over", path=path, now=T0)
    class_dir = tmp_path / "class"
    assert not class_dir.exists()
    monkeypatch.setenv("OPERATORLAB_CLASS_DIR", str(class_dir))
    progress.attempted("lab", "take-over", True, path=path, now=T0 + timedelta(minutes=7))
    copy = json.loads((class_dir / "ada.json").read_text())
    assert copy == json.loads(path.read_text())
    assert set(copy) == {"version", "learner", "items"} and copy["learner"] == "ada"
    assert (class_dir / "ada.json").stat().st_mode & 0o777 == 0o644


def test_another_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    path.write_text(json.dumps({"version": 99, "learner": "x", "items": {}}))
    with pytest.raises(ValueError, match="format 99"):
        progress.load(path)


def test_the_class_view_names_each_learner_and_counts_passes(tmp_path: Path, monkeypatch) -> None:
    class_dir = tmp_path / "class"
    for who, passes in (("ada", True), ("grace", False)):
        monkeypatch.setenv("JUPYTERHUB_USER", who)
        monkeypatch.setenv("OPERATORLAB_CLASS_DIR", str(class_dir))
        mine = tmp_path / who / "progress.json"
        progress.started("lab", "take-over", path=mine, now=T0)
        progress.attempted("lab", "take-over", passes, path=mine, now=T0 + timedelta(minutes=9))
    (class_dir / "broken.json").write_text("{not json")
    shown = subprocess.run([sys.executable, "-m", "operatorlab.cli", "class", str(class_dir)],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert shown[0].split() == ["learner", "lab:take-over"]
    assert shown[1].split() == ["ada", "PASS", "in", "9", "min"]
    assert shown[2].startswith("broken (unreadable record)")
    assert shown[3].split() == ["grace", "1", "attempt"]
    assert shown[4].split() == ["passed", "by", "1"]


def test_the_class_view_without_a_directory_says_how_to_get_one(monkeypatch) -> None:
    monkeypatch.delenv("OPERATORLAB_CLASS_DIR", raising=False)
    result = subprocess.run([sys.executable, "-m", "operatorlab.cli", "class"], capture_output=True, text=True)
    assert result.returncode == 1 and "OPERATORLAB_CLASS_DIR" in result.stderr
