"""Lesson 02: resume a watch from the last resourceVersion, relist on 410 Gone, graded through the fault proxy.

The learner's ``follow(list_watch, sink, stop, backoff)`` is the reflector's loop: it keeps a
sink in step with a collection by LIST + WATCH. The check gives it the ConfigMaps of a
namespace of its own, through the fault proxy in front of the real API server, and a
sink that keeps what it is told. The server ends each watch after 3 s (``timeoutSeconds``),
so that bookmarks arrive. Then the check breaks the watch, and makes changes meanwhile:

- it cuts the open stream: nothing is lost, so WATCH again from the last resourceVersion
  seen, no LIST;
- it answers the next watch with 429: wait (``backoff``), then WATCH from the same place;
- it answers the next watch with a 410 ``ERROR`` event: that history is gone, LIST again;
- a BOOKMARK arrives: the next WATCH resumes from the bookmark's resourceVersion.

After each, the sink must hold every object's final state (by resourceVersion), and the
check counts the LIST and WATCH requests and the resourceVersion each WATCH asked for.
"""

from __future__ import annotations

import functools
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from kubernetes import client

from operatorlab.controllers.backoff import Backoff, BackoffManager
from operatorlab.exercises import Exercise
from operatorlab.exercises.watching import STREAM_SECONDS, ConfigMaps, Request, Store, without_retries
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check, converges, loop_ended

# Why the learner's loop stopped running, in words (empty while it runs).
_ended = functools.partial(loop_ended, returned="your loop returned although stop was not set")

#: Seconds a loop gets to return once stop is set and its stream closed (generous: a loaded CI machine).
STOP_BUDGET = 10.0
BACKOFF = 0.5  # seconds: the constant backoff the check hands the learner


class ResumeWatch(Exercise):
    lesson = "02"
    title = "follow: resume a watch from the last resourceVersion, relist on 410 Gone"
    subject = "follow"
    budget = 3.0
    hints = (
        "When a watch ends, what do you already know? Where in the history were you, and is that place "
        "still there?",
        "Keep the resourceVersion of everything the server gives you: the LIST, each event, each BOOKMARK. A "
        "stream that ends or breaks: WATCH again from it. An ERROR event with code 410: the history is gone, "
        "LIST again. A 429 (RequestFailed with failure.too_many_requests): wait, then WATCH from the same "
        "place. Wait with stop.wait(backoff.step()).",
        "Shape: resource_version and a relist flag; loop: if relist, LIST, sink.replace, take its "
        "resourceVersion; WATCH from resource_version; for each event: an ERROR ends the stream (410: relist), "
        "else sink.apply and resource_version = event.resource_version; StreamBroken: just loop. "
        "(lesson 02's Reflector._run and reflector_policy.decide are the full version.)",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        follow = learner.follow
        suffix = uuid.uuid4().hex[:6]
        namespace, elsewhere = f"ex02r-{suffix}", f"ex02r-{suffix}-other"
        core = client.CoreV1Api(self.api)
        for name in (namespace, elsewhere):
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        workdir = Path(tempfile.mkdtemp(prefix="ex02r-"))
        proxy = FaultProxy(self.kubeconfig_path, workdir, name="ex02r")
        stop = threading.Event()
        ended: list[BaseException | None] = []
        try:
            proxy.start()
            watched = ConfigMaps(without_retries(proxy.kubeconfig), namespace)
            store = Store()
            for name in ("a", "b"):
                core.create_namespaced_config_map(namespace, _configmap(name))

            def run() -> None:
                try:
                    follow(watched, store, stop, BackoffManager(Backoff(duration=BACKOFF), reset_after=0))
                    ended.append(None)
                except BaseException as e:  # noqa: BLE001 - the learner's loop died: that is the evidence
                    ended.append(e)

            thread = threading.Thread(target=run, name="ex02r-learner", daemon=True)
            thread.start()
            world = _World(core, namespace, store, watched, thread, ended, self.budget)
            first_list = world.first_list()
            if ended and isinstance(ended[0], NotImplementedError):
                raise ended[0]
            yield first_list
            rules = _rules(namespace)
            yield world.broken(
                "a cut stream: WATCH again from the last resourceVersion seen, no LIST; nothing missed",
                proxy, [rules["cut"]], changes=lambda: (_touch(core, namespace, "b"), _create(core, namespace, "d")),
                lists=0)
            yield world.broken(
                f"a 429 on the WATCH: wait ({BACKOFF:g} s here), then WATCH from the same resourceVersion, no LIST; "
                "nothing missed", proxy, [rules["429"], rules["cut"]],
                changes=lambda: (_delete(core, namespace, "a"), _touch(core, namespace, "c")), lists=0,
                waits_after=429)
            yield world.broken(
                "a 410 Gone: LIST again (once), then WATCH from the new list; nothing missed",
                proxy, [rules["gone"]], changes=lambda: _delete(core, namespace, "b"), lists=1)
            yield world.bookmark(lambda: _create(core, elsewhere, f"nudge-{time.monotonic_ns()}"))
            yield world.resumes_everywhere()
            stop.set()
            watched.close_all()
            thread.join(STOP_BUDGET)
            yield Check("stop: your loop returns once stop is set (and its stream closed)",
                        not thread.is_alive() and ended == [None],
                        "returned" if ended == [None]
                        else _ended(ended) or f"still running {STOP_BUDGET:g} s after stop")
        finally:
            stop.set()
            proxy.stop()
            for name in (namespace, elsewhere):
                core.delete_namespace(name)


class _World:
    """The check's view: what the server holds, what the sink holds, what the loop asked."""

    def __init__(self, core: client.CoreV1Api, namespace: str, store: Store, watched: ConfigMaps,
                 thread: threading.Thread, ended: list, budget: float) -> None:
        self.core, self.namespace, self.store, self.watched = core, namespace, store, watched
        self.thread, self.ended, self.budget = thread, ended, budget

    def server(self) -> dict[str, str]:
        items = self.core.list_namespaced_config_map(self.namespace).items
        return {i.metadata.name: i.metadata.resource_version for i in items}

    def in_step(self) -> bool:
        return self.store.snapshot() == self.server()

    def difference(self) -> str:
        server, held = self.server(), self.store.snapshot()
        missing = sorted(set(server) - set(held))
        extra = sorted(set(held) - set(server))
        stale = sorted(n for n in set(server) & set(held) if server[n] != held[n])
        parts = [f"{what}: {', '.join(names)}" for what, names in
                 (("never told of", missing), ("still held after their deletion", extra),
                  ("held at an old resourceVersion", stale)) if names]
        return "; ".join(parts) or "in step"

    def converge(self) -> bool:
        return converges(self.in_step, budget=self.budget, give_up=lambda: not self.thread.is_alive()).ok

    def first_list(self) -> Check:
        name = "the first LIST, then the events: the sink holds every object at its resourceVersion"
        synced = converges(lambda: self.watched.counts()[1] >= 1 and self.in_step(), budget=self.budget,
                           give_up=lambda: not self.thread.is_alive())
        if synced.ok:
            _create(self.core, self.namespace, "c")
            _touch(self.core, self.namespace, "a")
        ok = synced.ok and self.converge()
        return Check(name, ok, _ended(self.ended) or ("in step" if ok else self.difference())
                     + f"; requests: {self.watched.counts()[0]} LIST, {self.watched.counts()[1]} WATCH")

    def broken(self, name: str, proxy: FaultProxy, rules: list[dict], changes: Callable[[], object],
               lists: int, waits_after: int | None = None) -> Check:
        if not self.thread.is_alive():
            return Check(name, False, _ended(self.ended) or "your loop is not running")
        self.converge()
        since = len(self.watched.requests)
        proxy.set_rules(rules)  # drops the open watch: a cut, then these answers to the next requests
        changes()
        done = converges(lambda: self.in_step() and any(
            r.kind == "WATCH" and r.failed is None for r in self.watched.requests[since:]) and not any(
            r.get("times") for r in proxy.stats()["rules"]), budget=self.budget,
            give_up=lambda: not self.thread.is_alive())
        proxy.clear()
        sent = self.watched.requests[since:]
        listed = sum(r.kind == "LIST" for r in sent)
        problems = []
        if not done.ok:
            problems.append(_ended(self.ended) or self.difference())
        if listed != lists:
            problems.append(f"{listed} LIST{'s' if listed != 1 else ''} (expected {lists})")
        wrong = [r for r in sent if r.kind == "WATCH" and r.resource_version != r.last_seen]
        if wrong:
            problems.append(_wrong_watch(wrong[0]))
        if waits_after is not None:
            failed = next((i for i, r in enumerate(sent) if r.failed == waits_after), None)
            if failed is not None and failed + 1 < len(sent):
                gap = sent[failed + 1].time - sent[failed].time
                if gap < BACKOFF * 0.8:
                    problems.append(f"the next request came {gap:.2f} s after the {waits_after}, without waiting")
        summary = ", ".join(f"{r.kind}{'(' + str(r.failed) + ')' if r.failed is not None else ''}" for r in sent)
        return Check(name, not problems, "; ".join(problems) or f"in step; requests since: {summary}")

    def bookmark(self, nudge: Callable[[], object]) -> Check:
        name = "a BOOKMARK moves the resourceVersion on: the next WATCH resumes from the bookmark's"
        if not self.thread.is_alive():
            return Check(name, False, _ended(self.ended) or "your loop is not running")
        seen = len(self.watched.bookmarks)
        nudge()  # a change in another namespace: the server's resourceVersion moves past our last event
        arrived = converges(lambda: self.watched.bookmarks[seen:], budget=2 * STREAM_SECONDS,
                            give_up=lambda: not self.thread.is_alive())
        if not arrived.ok:
            return Check(name, False, _ended(self.ended) or f"no bookmark reached your loop's watch within "
                                                             f"{2 * STREAM_SECONDS} s: is it watching?")
        since = len(self.watched.requests)
        following = converges(lambda: self.watched.requests[since:], budget=STREAM_SECONDS + 1,
                              give_up=lambda: not self.thread.is_alive())
        if not following.ok:
            return Check(name, False, _ended(self.ended) or "no request after the stream with the bookmark ended")
        after = following.last[0]
        # The stream may carry more than one bookmark before it ends (the server's resourceVersion
        # moves with every write anywhere): the one to resume from is the last your loop was given.
        mark = after.last_seen if after.last_seen_from == "BOOKMARK" else arrived.last[-1]
        return Check(name, after.kind == "WATCH" and after.resource_version == mark
                     and mark in self.watched.bookmarks[seen:],
                     f"the bookmark said {mark}; your next request: {after.kind} "
                     f"from {after.resource_version or 'no resourceVersion'}")

    def resumes_everywhere(self) -> Check:
        watches = [r for r in self.watched.requests if r.kind == "WATCH"]
        wrong = [r for r in watches if r.resource_version != r.last_seen]
        return Check("every WATCH (also after each stream the server ended) asked for the last resourceVersion "
                     "the loop had been given", bool(watches) and not wrong,
                     _wrong_watch(wrong[0]) + f" ({len(wrong)} of {len(watches)} WATCHes)" if wrong
                     else f"{len(watches)} WATCHes, {self.watched.counts()[0]} LISTs")


def _rules(namespace: str) -> dict[str, dict]:
    path = f"/namespaces/{namespace}/configmaps$"
    return {"cut": {"action": "cut", "method": "GET", "path": path, "watch": True, "after": 60, "times": 1},
            "429": {"action": "status", "status": 429, "method": "GET", "path": path, "watch": True, "times": 1},
            "gone": {"action": "gone", "method": "GET", "path": path, "watch": True, "times": 1}}


def _wrong_watch(request: Request) -> str:
    asked = request.resource_version or "no resourceVersion (start from now: what changed meanwhile is missed)"
    return (f"a WATCH asked for {asked}, but the last resourceVersion it had been given was {request.last_seen} "
            f"(from {request.last_seen_from or 'nothing'})")


def _configmap(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"version": "1"}}


def _create(core: client.CoreV1Api, namespace: str, name: str) -> None:
    core.create_namespaced_config_map(namespace, _configmap(name))


def _touch(core: client.CoreV1Api, namespace: str, name: str) -> None:
    core.patch_namespaced_config_map(name, namespace, {"data": {"version": str(time.monotonic_ns())}})


def _delete(core: client.CoreV1Api, namespace: str, name: str) -> None:
    core.delete_namespaced_config_map(name, namespace)

