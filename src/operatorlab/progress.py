"""A learner's progress: for each lab, drill (and exercise), attempts, first pass, time spent.

Kept in the learner's own cache (``<cache>/progress.json``), never sent anywhere. In a
workshop the instructor may ask for a class view: when ``$OPERATORLAB_CLASS_DIR`` is set
(on JupyterHub, a volume shared by the class, see ``workshop/``), each write also puts a
copy at ``<class dir>/<learner>.json``. What a copy holds is only this record: ids,
counts and times, under the learner's hub name; no code, no answers, no cluster data.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from operatorlab import paths

#: The record's format; a reader refuses another.
VERSION = 1


@dataclass
class Item:
    """One lab, drill or exercise: ``kind`` is ``lab``, ``drill`` or ``exercise``."""

    kind: str
    id: str
    attempts: int = 0
    started: str | None = None  # when it was (last) started, RFC 3339
    first_pass: str | None = None
    seconds_to_pass: float | None = None  # from the start before the first pass
    solution_shown: bool = False  # the reference fix was applied or shown before any pass

    def summary(self) -> str:
        """In words: ``PASS in 12 min``, ``PASS after the solution``, ``3 attempts``, ``started``."""
        if self.passed:
            if self.solution_shown:
                return "PASS after the solution"
            return f"PASS in {self.seconds_to_pass / 60:.0f} min" if self.seconds_to_pass is not None else "PASS"
        if self.attempts:
            return f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}"
        return "started" if self.started else "-"

    @property
    def passed(self) -> bool:
        return self.first_pass is not None


@dataclass
class Progress:
    """Everything one learner did, by ``kind:id``."""

    learner: str
    items: dict[str, Item] = field(default_factory=dict)

    def item(self, kind: str, item_id: str) -> Item:
        return self.items.setdefault(f"{kind}:{item_id}", Item(kind=kind, id=item_id))


def learner() -> str:
    """Who this is: the JupyterHub user name, else the login name."""
    name = os.environ.get("JUPYTERHUB_USER") or os.environ.get("USER") or "learner"
    return re.sub(r"[^A-Za-z0-9_.@-]", "_", name)


def default_path() -> Path:
    """``$OPERATORLAB_PROGRESS`` (the test session keeps its own), else ``<cache>/progress.json``."""
    if env := os.environ.get("OPERATORLAB_PROGRESS"):
        return Path(env)
    return paths.cache_root() / "progress.json"


def load(path: Path | None = None) -> Progress:
    """The record at ``path`` (default: this learner's), or an empty one.

    Raises:
        ValueError: the file is of another format version.
    """
    path = default_path() if path is None else path
    if not path.is_file():
        return Progress(learner=learner())
    doc = json.loads(path.read_text())
    if doc.get("version") != VERSION:
        raise ValueError(f"{path}: progress format {doc.get('version')!r}, expected {VERSION}")
    return Progress(learner=doc["learner"], items={k: Item(**v) for k, v in doc["items"].items()})


def _write(path: Path, progress: Progress) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": VERSION, "learner": progress.learner,
           "items": {k: asdict(v) for k, v in sorted(progress.items.items())}}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as out:
        json.dump(doc, out, indent=1)
    os.chmod(tmp, 0o644)  # a class copy is read by the instructor; it holds nothing secret
    os.replace(tmp, path)  # readers never see half a file


def _now() -> datetime:
    return datetime.now(UTC)


def _save(progress: Progress, path: Path | None) -> None:
    _write(default_path() if path is None else path, progress)
    if class_dir := os.environ.get("OPERATORLAB_CLASS_DIR"):
        _write(Path(class_dir) / f"{progress.learner}.json", progress)


def started(kind: str, item_id: str, *, path: Path | None = None, now: datetime | None = None) -> Item:
    """Record that ``kind:item_id`` was started (a new start restarts its clock if not yet passed)."""
    progress = load(path)
    item = progress.item(kind, item_id)
    if not item.passed:
        item.started = (now or _now()).isoformat(timespec="seconds")
    _save(progress, path)
    return item


def attempted(kind: str, item_id: str, passed: bool, *, path: Path | None = None,
              now: datetime | None = None) -> Item:
    """Record one check of ``kind:item_id`` and whether it passed; the first pass is kept."""
    now = now or _now()
    progress = load(path)
    item = progress.item(kind, item_id)
    item.attempts += 1
    if passed and not item.passed:
        item.first_pass = now.isoformat(timespec="seconds")
        if item.started:
            item.seconds_to_pass = round((now - datetime.fromisoformat(item.started)).total_seconds(), 1)
    _save(progress, path)
    return item


def solution_shown(kind: str, item_id: str, *, path: Path | None = None) -> Item:
    """Record that the reference solution was shown or applied (a later pass says so)."""
    progress = load(path)
    item = progress.item(kind, item_id)
    if not item.passed:
        item.solution_shown = True
    _save(progress, path)
    return item


def class_table(records: list[Progress]) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)``: one row per learner, one column per item any learner touched, in words."""
    keys = sorted({key for record in records for key in record.items})
    rows = [[record.learner, *(record.items[k].summary() if k in record.items else "-" for k in keys)]
            for record in records]
    passed = ["passed by", *(str(sum(1 for r in records if k in r.items and r.items[k].passed)) for k in keys)]
    return ["learner", *keys], [*rows, passed]


def class_records(class_dir: Path) -> list[Progress]:
    """Every learner's copy in ``class_dir``, by name; unreadable files are skipped by name in the result."""
    records = []
    for path in sorted(class_dir.glob("*.json")):
        try:
            records.append(load(path))
        except (ValueError, KeyError, TypeError, json.JSONDecodeError):
            records.append(Progress(learner=f"{path.stem} (unreadable record)"))
    return records
