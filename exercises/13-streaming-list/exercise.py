"""Lesson 13: consume a streaming list; synced only at the bookmark that ends the initial events.

The learner's ``stream_list(core, namespace)`` returns ``(store, resource_version)``: every
ConfigMap of the namespace by name with its resourceVersion, and the resourceVersion to resume a
watch from. The check gives it a namespace of its own with ConfigMaps in it, through the fault
proxy in front of the real API server, and holds the learner's watch request for a few seconds
(the proxy's ``stall``) while it creates, changes and deletes ConfigMaps. Then:

- the request was one WATCH with ``sendInitialEvents=true`` and ``resourceVersionMatch=NotOlderThan``,
  and no LIST;
- the store equals a LIST the check makes after the function returned (nothing changed meanwhile):
  the changes made while the request was held are in it;
- a watch from the returned resourceVersion brings the changes the check makes afterwards, and
  nothing the store already holds: no change is lost, none is repeated.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from kubernetes import client, watch

from operatorlab.exercises import Exercise
from operatorlab.exercises.watching import quiet_namespace, without_retries
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check

OBJECTS = 60  # ConfigMaps made before the check starts (a little payload each)
STALL = 4.0  # seconds the proxy holds the learner's watch request while the check changes things
PAYLOAD = "x" * 512


class StreamingList(Exercise):
    lesson = "13"
    title = "stream_list: the initial state as watch events, synced at the initial-events-end bookmark"
    subject = "stream_list"
    budget = 30.0
    hints = (
        "A streaming list is one WATCH that starts with the whole collection. How do you know the "
        "collection has been sent in full, and from which point in the history does it go on?",
        "Ask for it: send_initial_events=True, resource_version_match=\"NotOlderThan\" and "
        "allow_watch_bookmarks=True on core.list_namespaced_config_map (kubernetes.watch.Watch().stream passes "
        "them on). The initial events are ADDED; the end is a BOOKMARK whose metadata.annotations has "
        "\"k8s.io/initial-events-end\": \"true\". Not a timer, not the first quiet moment.",
        "Shape: for each event: a BOOKMARK with that annotation -> return (store, that bookmark's "
        "resourceVersion); any other BOOKMARK -> skip; DELETED -> drop the name; else store[name] = "
        "resourceVersion. Close the stream before you return (events.close()). "
        "(lesson 13's InitialEvents is the same, for the reflector.)",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        stream_list = learner.stream_list
        suffix = uuid.uuid4().hex[:6]
        namespace = f"ex13s-{suffix}"
        core = client.CoreV1Api(self.api)
        quiet_namespace(core, namespace)
        workdir = Path(tempfile.mkdtemp(prefix="ex13s-"))
        proxy = FaultProxy(self.kubeconfig_path, workdir, name="ex13s")
        try:
            for i in range(OBJECTS):
                _create(core, namespace, f"cm-{i:03d}")
            proxy.start([{"action": "stall", "method": "GET", "path": f"/namespaces/{namespace}/configmaps$",
                          "watch": True, "after": STALL, "times": 1}])
            learner_core = client.CoreV1Api(without_retries(proxy.kubeconfig))
            result: list[Any] = []

            def run() -> None:
                try:
                    result.append(stream_list(learner_core, namespace))
                except BaseException as e:  # noqa: BLE001 - the evidence
                    result.append(e)

            thread = threading.Thread(target=run, name="ex13s-learner", daemon=True)
            started = time.monotonic()
            thread.start()
            # While the learner's request is held (or, without a watch, at once): the world changes.
            asked = _wait(lambda: _requests(proxy, namespace) or result, budget=10)
            if result and isinstance(result[0], NotImplementedError):
                raise result[0]
            changed_during = asked and not result
            for i in range(3):
                _create(core, namespace, f"add-{i}")
            _touch(core, namespace, "cm-010")
            _delete(core, namespace, "cm-020")
            thread.join(self.budget + STALL)
            seconds = time.monotonic() - started
            outcome = result[0] if result else None
            returned = isinstance(outcome, tuple) and len(outcome) == 2
            yield Check(
                "your function returns (store, resourceVersion)", returned,
                f"returned after {seconds:.1f} s" if returned else
                (f"it raised {type(outcome).__name__}: {outcome}" if isinstance(outcome, BaseException)
                 else f"it returned {outcome!r}" if result
                 else f"no answer within {self.budget + STALL:g} s"))
            if not returned:
                return
            store, resource_version = dict(outcome[0]), str(outcome[1])
            sent = _requests(proxy, namespace)
            lists = [r for r in sent if not r["watch"]]
            streams = [r for r in sent if r["watch"] and r["query"].get("sendInitialEvents") == "true"
                       and r["query"].get("resourceVersionMatch") == "NotOlderThan"]
            yield Check(
                "one streaming list: a WATCH with sendInitialEvents=true and resourceVersionMatch=NotOlderThan, "
                "no LIST", len(streams) >= 1 and not lists,
                "; ".join(f"{'WATCH' if r['watch'] else 'LIST'} with {_shown(r['query'])}" for r in sent)
                or "no request reached the API server")
            server = _server(core, namespace)
            yield Check(
                "the store equals a fresh LIST: the changes made while your request was held are in it",
                store == server and changed_during,
                "equal" if store == server else _difference(store, server)
                + " (made while your request was held: add-0..2 created, cm-010 changed, cm-020 deleted)")
            yield _resumes(core, namespace, store, resource_version)
        finally:
            proxy.stop()
            core.delete_namespace(namespace)


def _resumes(core: client.CoreV1Api, namespace: str, store: dict[str, str], resource_version: str) -> Check:
    """Watch from the learner's resourceVersion: afterwards' changes arrive, nothing already held comes again."""
    name = "a WATCH from your resourceVersion brings the later changes and repeats nothing your store holds"
    _create(core, namespace, "late-0")
    _touch(core, namespace, "cm-011")
    _delete(core, namespace, "cm-012")
    held, repeated, wanted = dict(store), [], {"late-0", "cm-011", "cm-012"}
    seen: set[str] = set()
    stream = watch.Watch().stream(core.list_namespaced_config_map, namespace, resource_version=resource_version,
                                  timeout_seconds=10, _request_timeout=20)
    try:
        for event in stream:
            kind, meta = event["type"], event["raw_object"].get("metadata") or {}
            if kind == "ERROR":
                return Check(name, False, f"the watch from {resource_version!r} answered "
                                          f"{event['raw_object'].get('code')}: {event['raw_object'].get('message')}")
            if kind == "BOOKMARK":
                continue
            object_name, version = meta.get("name", ""), meta.get("resourceVersion", "")
            if (kind == "DELETED" and object_name not in held) or (kind != "DELETED" and held.get(object_name)
                                                                  == version):
                repeated.append(f"{kind} {object_name}")
            if kind == "DELETED":
                held.pop(object_name, None)
            else:
                held[object_name] = version
            seen.add(object_name)
            if wanted <= seen and held == _server(core, namespace):
                break
    except client.ApiException as e:
        return Check(name, False, f"the watch from {resource_version!r} was refused: {e.status} {e.reason}")
    finally:
        stream.close()
    missing = sorted(wanted - seen)
    ok = not missing and not repeated
    return Check(name, ok, "resumed" if ok else "; ".join(
        part for part in (f"never came: {', '.join(missing)}" if missing else "",
                          f"came again although your store held them: {', '.join(repeated[:5])}"
                          + (" ..." if len(repeated) > 5 else "") if repeated else "") if part))


def _wait(condition: Any, *, budget: float) -> bool:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def _requests(proxy: FaultProxy, namespace: str) -> list[dict[str, Any]]:
    return [r for r in proxy.stats()["requests"] if r["path"].endswith(f"/namespaces/{namespace}/configmaps")]


def _shown(query: dict[str, str]) -> str:
    keys = ("sendInitialEvents", "resourceVersionMatch", "resourceVersion", "allowWatchBookmarks")
    shown = [f"{k}={query[k]}" for k in keys if k in query]
    return ", ".join(shown) or "no sendInitialEvents"


def _server(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    return {i.metadata.name: i.metadata.resource_version for i in core.list_namespaced_config_map(namespace).items}


def _difference(held: dict[str, str], server: dict[str, str]) -> str:
    missing = sorted(set(server) - set(held))
    extra = sorted(set(held) - set(server))
    stale = sorted(n for n in set(server) & set(held) if server[n] != held[n])
    parts = [f"{what}: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''} ({len(names)})"
             for what, names in (("missing", missing), ("held after their deletion", extra),
                                 ("at an old resourceVersion", stale)) if names]
    return "; ".join(parts) or "in step"


def _create(core: client.CoreV1Api, namespace: str, name: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": name}, "data": {"payload": PAYLOAD}})


def _touch(core: client.CoreV1Api, namespace: str, name: str) -> None:
    core.patch_namespaced_config_map(name, namespace, {"data": {"version": str(time.monotonic_ns())}})


def _delete(core: client.CoreV1Api, namespace: str, name: str) -> None:
    core.delete_namespaced_config_map(name, namespace)
