"""Scripted LIST and WATCH answers, for testing the reflector's loop without a client.

A :class:`ScriptedListWatch` is a :class:`~operatorlab.controllers.listwatch.ListerWatcher`
whose answers a test lists in advance: a page body or a
:class:`~operatorlab.controllers.reflector_policy.Failure` per LIST call, a
:class:`ScriptedStream` or a Failure per WATCH call. It records every call, so a test
asserts which resourceVersion, limit and continue token the reflector asked for. What
the API server itself does with those requests is tested on the real cluster in
tests/integration/test_controllers.py.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from operatorlab.controllers.backoff import Backoff, BackoffManager
from operatorlab.controllers.listwatch import StreamBroken, WatchEvent
from operatorlab.controllers.reflector_policy import Failure, RequestFailed

_END, _BREAK = object(), object()


def tenant(name: str, rv: str, cpu: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"cpuQuota": cpu}}


def page(*objects: dict[str, Any], rv: str, cont: str = "") -> dict[str, Any]:
    """A LIST response body."""
    return {"items": list(objects), "metadata": {"resourceVersion": rv, **({"continue": cont} if cont else {})}}


def event(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def bookmark(rv: str) -> dict[str, Any]:
    return event("BOOKMARK", {"metadata": {"resourceVersion": rv}})


def end_of_initial_events(rv: str) -> dict[str, Any]:
    """The bookmark that ends a streaming list's initial events."""
    return event("BOOKMARK", {"metadata": {"resourceVersion": rv,
                                           "annotations": {"k8s.io/initial-events-end": "true"}}})


def error(code: int, reason: str) -> dict[str, Any]:
    return event("ERROR", {"kind": "Status", "code": code, "reason": reason, "message": f"{code} {reason}"})


class ScriptedStream:
    """An open watch: yields the events it was given (and any :meth:`push` ed later), then ``then``.

    Args:
        events: decoded events to deliver at once.
        then: ``"end"`` (the server closes the stream), ``"break"`` (the
            connection breaks) or ``"wait"`` (stays open until :meth:`close`).
    """

    def __init__(self, *events: Mapping[str, Any], then: str = "wait") -> None:
        self._queue: queue.Queue[object] = queue.Queue()
        for e in events:
            self._queue.put(e)
        if then != "wait":
            self._queue.put({"end": _END, "break": _BREAK}[then])
        self.closed = threading.Event()

    def push(self, *events: Mapping[str, Any]) -> None:
        for e in events:
            self._queue.put(e)

    def end(self) -> None:
        self._queue.put(_END)

    def events(self) -> Generator[Mapping[str, Any], None, None]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if item is _BREAK:
                raise StreamBroken("connection reset by peer")
            assert isinstance(item, Mapping)
            yield item

    def close(self) -> None:
        """What closing a real HTTP stream looks like to its reader: the read fails."""
        if not self.closed.is_set():
            self.closed.set()
            self._queue.put(_BREAK)


@dataclass
class ScriptedListWatch:
    """Answers LIST and WATCH calls from scripts; once a script runs out, the ``default`` applies.

    Attributes:
        lists: per LIST call, a body or a Failure (raised as RequestFailed).
        watches: per WATCH call, a stream or a Failure.
        default_list: the answer once ``lists`` is used up.
        list_calls, watch_calls: what was asked, with ``time.monotonic()``.
    """

    lists: deque[Mapping[str, Any] | Failure] = field(default_factory=deque)
    watches: deque[ScriptedStream | Failure] = field(default_factory=deque)
    default_list: Mapping[str, Any] = field(default_factory=lambda: page(rv="1"))
    list_calls: list[dict[str, Any]] = field(default_factory=list)
    watch_calls: list[dict[str, Any]] = field(default_factory=list)
    streams: list[ScriptedStream] = field(default_factory=list)

    @classmethod
    def of(cls, lists: list[Mapping[str, Any] | Failure] | None = None,
           watches: list[ScriptedStream | Failure] | None = None) -> ScriptedListWatch:
        return cls(deque(lists or []), deque(watches or []))

    def list(self, *, resource_version: str, limit: int, continue_token: str, timeout: float) -> Mapping[str, Any]:
        self.list_calls.append({"resource_version": resource_version, "limit": limit, "continue": continue_token,
                                "t": time.monotonic()})
        answer = self.lists.popleft() if self.lists else self.default_list
        if isinstance(answer, Failure):
            raise RequestFailed(answer)
        return answer

    def watch(self, *, resource_version: str, timeout: float) -> ScriptedStream:
        self.watch_calls.append({"resource_version": resource_version, "t": time.monotonic()})
        answer = self.watches.popleft() if self.watches else ScriptedStream()
        if isinstance(answer, Failure):
            raise RequestFailed(answer)
        self.streams.append(answer)
        return answer

    def watch_list(self, *, resource_version: str, timeout: float) -> ScriptedStream:
        """A streaming list: answered from ``watches`` too, recorded as ``streaming`` in ``watch_calls``."""
        self.watch_calls.append({"resource_version": resource_version, "t": time.monotonic(), "streaming": True})
        answer = self.watches.popleft() if self.watches else ScriptedStream()
        if isinstance(answer, Failure):
            raise RequestFailed(answer)
        self.streams.append(answer)
        return answer


class RecordingSink:
    """A reflector sink that only remembers what it was given: each list's names and resourceVersion, each event."""

    def __init__(self) -> None:
        self.lists: list[tuple[list[str], str]] = []
        self.applied: list[WatchEvent] = []

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        self.lists.append(([o["metadata"]["name"] for o in objects], resource_version))

    def apply(self, event: WatchEvent) -> None:
        self.applied.append(event)


class RecordingBackoff(BackoffManager):
    """A fast, deterministic backoff (no jitter) that records every wait it hands out."""

    def __init__(self, initial: float = 0.01, cap: float = 0.08) -> None:
        super().__init__(Backoff(initial, factor=2.0, jitter=0.0, steps=100, cap=cap), reset_after=3600.0)
        self.waits: list[float] = []

    def step(self) -> float:
        wait = super().step()
        self.waits.append(wait)
        return wait
