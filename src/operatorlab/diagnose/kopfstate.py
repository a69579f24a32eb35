"""What kopf leaves on an object, read back: its finalizer, handler progress, last-handled state, peering.

Everything here is kopf's own bookkeeping as the installed kopf (1.45) writes it; the
names come from kopf's defaults at import time, not spelled again:

- **finalizer** ``kopf.zalando.org/KopfFinalizerMarker`` (``PersistenceSettings.finalizer``),
  added while the operator has delete handlers (or daemons/timers) for the object;
- **handler progress**: ``SmartProgressStorage`` writes one annotation per handler,
  ``kopf.zalando.org/<handler id>`` (``/`` in an id becomes ``.``), holding JSON with
  ``started``, ``stopped``, ``delayed`` (when a retry is due, ISO 8601 UTC), ``purpose``
  (create/update/delete/resume), ``retries`` (attempts so far), ``success``/``failure``
  and ``message`` (the last error). It still *reads* ``status.kopf.progress`` (older
  kopf) but no longer writes it (``NoWriteStatusProgressStorage``). All of a cycle's
  records are **purged** once every handler succeeded or failed for good, so a record
  present means a cycle in progress: running, or backing off (``kopf/_cogs/configs/progress.py``,
  ``kopf/_core/actions/progression.py``, ``kopf/_core/reactor/processing.py``);
- **last-handled configuration** ``kopf.zalando.org/last-handled-configuration``: the
  object's *essence* (everything but ``apiVersion``, ``kind``, ``metadata`` and
  ``status``, plus labels and non-kopf annotations) when a cycle last completed. kopf
  compares it with the object to detect a change (``AnnotationsDiffBaseStorage``);
- **peering**: operators run with ``--peering`` (or neither it nor ``--standalone``,
  peering ``default``) keep ``{priority, lifetime, lastseen}`` per operator in the
  status of a ``ClusterKopfPeering`` (``--all-namespaces``) or ``KopfPeering``. An
  operator pauses while a live peer (``lastseen + lifetime`` in the future) has a higher
  priority, or the same one; ``kopf freeze`` writes such an entry by hand (priority 100
  by default), ``kopf resume`` removes it (``kopf/_core/engines/peering.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import kopf

_DIFFBASE = kopf.AnnotationsDiffBaseStorage()
#: The finalizer kopf adds to block deletion until its delete handlers ran.
FINALIZER: str = kopf.OperatorSettings().persistence.finalizer
#: The prefix of kopf's own annotations.
PREFIX: str = _DIFFBASE.prefix
#: The annotation holding the essence kopf last handled.
LAST_HANDLED: str = f"{PREFIX}/{_DIFFBASE.key}"
_TOUCH: str = kopf.AnnotationsProgressStorage().touch_key
# kopf marks a custom prefix as an operator's own with "<prefix>/kopf-managed" (its
# StorageKeyMarkingConvention, not public API): progress under such a prefix is read too.
_MARKER = "kopf-managed"
_NOT_HANDLERS = {_DIFFBASE.key, _TOUCH, _MARKER}
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

HandlerState = Literal["running", "backing off", "retry due", "succeeded", "failed"]


@dataclass(frozen=True)
class HandlerProgress:
    """One handler's progress record, as kopf stored it in an annotation."""

    handler: str
    annotation: str
    started: datetime | None
    stopped: datetime | None
    delayed: datetime | None
    purpose: str | None
    retries: int
    success: bool
    failure: bool
    message: str | None

    def state(self, now: datetime) -> HandlerState:
        """Where the handler is, by kopf's own rules (``HandlerState.sleeping``, ``finished``)."""
        if self.success:
            return "succeeded"
        if self.failure:
            return "failed"
        if self.delayed is not None:
            return "backing off" if self.delayed > now else "retry due"
        return "running"


def _time(value: object) -> datetime | None:
    """kopf's ISO 8601 timestamps (UTC; older kopf wrote them without a zone)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def prefixes(annotations: Mapping[str, str]) -> set[str]:
    """kopf's annotation prefixes on an object: the default one, and any marked ``<prefix>/kopf-managed``."""
    marked = {key.split("/", 1)[0] for key in annotations if key.endswith(f"/{_MARKER}")}
    return {PREFIX} | marked


def progress(annotations: Mapping[str, str]) -> list[HandlerProgress]:
    """Every handler progress record in ``annotations`` (kopf's v1 and v2 keys of one handler counted once)."""
    records: list[HandlerProgress] = []
    seen: set[str] = set()
    ours = prefixes(annotations)
    for key in sorted(annotations):
        prefix, _, name = key.partition("/")
        if prefix not in ours or not name or name in _NOT_HANDLERS or annotations[key] in seen:
            continue
        try:
            record = json.loads(annotations[key])
        except ValueError:
            continue
        if not isinstance(record, dict) or not {"started", "retries", "success", "failure", "delayed"} & set(record):
            continue
        seen.add(annotations[key])
        records.append(HandlerProgress(
            handler=name, annotation=key, started=_time(record.get("started")),
            stopped=_time(record.get("stopped")), delayed=_time(record.get("delayed")),
            purpose=record.get("purpose"), retries=int(record.get("retries") or 0),
            success=bool(record.get("success")), failure=bool(record.get("failure")), message=record.get("message"),
        ))
    return records


def backing_off(annotations: Mapping[str, str], now: datetime) -> list[HandlerProgress]:
    """The handlers kopf will retry later, not now: unfinished, their ``delayed`` in the future; soonest first.

    kopf's own rule (``HandlerState.sleeping`` in ``kopf/_core/actions/progression.py``,
    1.45.2): not finished, and ``delayed`` later than now. Until then kopf does not run the
    handler, whatever changes: not after a fix of the code, not after a restart (the record
    is read back from the object). Without the record (its annotation removed), kopf finds
    no state for the handler and runs it at once.
    """
    waiting = [r for r in progress(annotations) if r.state(now) == "backing off"]
    return sorted(waiting, key=lambda r: r.delayed or now)


def status_progress(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``status.kopf.progress`` (written by kopf before 1.29, or with ``StatusProgressStorage``); {} if none."""
    kopf_status = (obj.get("status") or {}).get("kopf") or {}
    found = kopf_status.get("progress") if isinstance(kopf_status, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def last_handled(annotations: Mapping[str, str]) -> dict[str, Any] | None:
    """The essence kopf last handled (``None``: kopf never completed a cycle for this object)."""
    for prefix in sorted(prefixes(annotations)):
        raw = annotations.get(f"{prefix}/{_DIFFBASE.key}")
        if raw is not None:
            try:
                decoded = json.loads(raw)
            except ValueError:
                return None
            return decoded if isinstance(decoded, dict) else None
    return None


def essence(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as kopf's default diff-base sees it (``DiffBaseStorage.build``, without handler extra fields)."""
    result = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    meta = obj.get("metadata") or {}
    ours = prefixes(meta.get("annotations") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k.split("/", 1)[0] not in ours and k != _LAST_APPLIED}
    picked = {k: v for k, v in (("labels", meta.get("labels")), ("annotations", annotations)) if v}
    if picked:
        result["metadata"] = picked
    return result


def unhandled_changes(obj: Mapping[str, Any]) -> list[str] | None:
    """The fields changed since kopf last completed a cycle: ``[]`` none, ``None`` never handled.

    Top-level fields (``spec``...), plus ``metadata.labels`` and ``metadata.annotations``.
    """
    handled = last_handled((obj.get("metadata") or {}).get("annotations") or {})
    if handled is None:
        return None
    now = essence(obj)
    changed = [k for k in sorted(set(now) | set(handled)) if k != "metadata" and now.get(k) != handled.get(k)]
    for part in ("labels", "annotations"):
        if (now.get("metadata") or {}).get(part) != (handled.get("metadata") or {}).get(part):
            changed.append(f"metadata.{part}")
    return changed


# --- peering -------------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    """One operator (or ``kopf freeze``) entry in a peering object's status."""

    identity: str
    priority: int
    lifetime: int
    lastseen: datetime | None

    def alive(self, now: datetime) -> bool:
        """kopf's rule: alive until ``lastseen + lifetime`` (no ``lastseen`` counts as now)."""
        if self.lastseen is None:
            return self.lifetime > 0
        return (self.lastseen.timestamp() + self.lifetime) > now.timestamp()

    def until(self) -> datetime | None:
        if self.lastseen is None:
            return None
        return datetime.fromtimestamp(self.lastseen.timestamp() + self.lifetime, UTC)


@dataclass(frozen=True)
class Pause:
    """Who a peering pauses, and because of whom."""

    paused: tuple[Peer, ...]
    by: tuple[Peer, ...]
    #: Two or more live peers share the top priority: kopf pauses every one of them.
    tie: bool


@dataclass(frozen=True)
class Peering:
    """A ``ClusterKopfPeering`` (``namespace`` None) or ``KopfPeering`` and its peers."""

    kind: str
    name: str
    namespace: str | None
    peers: tuple[Peer, ...]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Peering:
        meta = obj.get("metadata") or {}
        peers = []
        for identity, info in sorted((obj.get("status") or {}).items()):
            if isinstance(info, dict):
                lifetime = info.get("lifetime")
                peers.append(Peer(identity=identity, priority=int(info.get("priority") or 0),
                                  lifetime=60 if lifetime is None else int(lifetime),
                                  lastseen=_time(info.get("lastseen"))))
        return cls(kind=str(obj.get("kind") or ("KopfPeering" if meta.get("namespace") else "ClusterKopfPeering")),
                   name=str(meta.get("name")), namespace=meta.get("namespace"), peers=tuple(peers))

    def live(self, now: datetime) -> list[Peer]:
        return [p for p in self.peers if p.alive(now)]

    def pause(self, now: datetime) -> Pause | None:
        """Whom this peering pauses now (``None``: nobody), by ``process_peering_event``'s rules."""
        live = self.live(now)
        if len(live) < 2:
            return None
        top = max(p.priority for p in live)
        leaders = tuple(p for p in live if p.priority == top)
        if len(leaders) > 1:
            return Pause(paused=tuple(live), by=leaders, tie=True)
        return Pause(paused=tuple(p for p in live if p.priority < top), by=leaders, tie=False)

    def cli_scope(self) -> str:
        """The ``kopf freeze``/``resume`` flag addressing this peering object."""
        return f"--namespace={self.namespace}" if self.namespace else "--all-namespaces"
