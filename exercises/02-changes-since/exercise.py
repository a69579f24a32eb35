"""Lesson 02: "what changed since resourceVersion R?", answered by one WATCH from R with bookmarks.

The learner's ``changes_since(list_watch, resource_version)`` gets the lesson's
``ListerWatcher`` protocol for the ConfigMaps of a namespace of the check's own, on the real
API server. The check notes the resourceVersion of a LIST, then creates, edits (twice) and
deletes ConfigMaps; while the learner's watch is open it changes one in another namespace, so
the server's resourceVersion moves past the last event and the bookmark carries a newer one. It asks what changed:
every object changed since, at its newest resourceVersion, ``None`` for the deleted one, and
nothing unchanged; with one WATCH and no LIST; and the resourceVersion to ask from next time
is the newest the server gave, the bookmark's. Asked again from there after one more change,
only that change comes back. When the history is gone (410 Gone, forced by the fault proxy:
a fresh cluster has compacted nothing yet) the answer is ``None``, so the caller knows only a
LIST can tell.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from kubernetes import client

from operatorlab.exercises import Exercise
from operatorlab.exercises.watching import STREAM_SECONDS, ConfigMaps, quiet_namespace, without_retries
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check


class ChangesSince(Exercise):
    lesson = "02"
    title = "changes_since: what changed after a resourceVersion, from one WATCH and its bookmark"
    subject = "changes_since"
    budget = 2 * STREAM_SECONDS + 2
    hints = (
        "A resourceVersion is a position in the cluster's history, and a WATCH from it replays what came "
        "after. How do you know when the replay has caught up?",
        "WATCH from resource_version; keep, per name, the newest resourceVersion (None for DELETED); the first "
        "BOOKMARK says everything up to its resourceVersion was sent: return then, with the bookmark's. An "
        "ERROR event with code 410 (or a RequestFailed whose failure is expired): return None.",
        "Shape: stream = list_watch.watch(resource_version=..., timeout=...); for raw in stream.events(): "
        "event = WatchEvent.from_raw(raw); ERROR 410 -> None; BOOKMARK -> return (changed, "
        "event.resource_version); else changed[event.name] = None if DELETED else event.resource_version; "
        "close the stream in a finally.",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        suffix = uuid.uuid4().hex[:6]
        namespace, elsewhere = f"ex02c-{suffix}", f"ex02c-{suffix}-other"
        core = client.CoreV1Api(self.api)
        proxy = FaultProxy(self.kubeconfig_path, Path(tempfile.mkdtemp(prefix="ex02c-")), name="ex02c")
        gone_rule = {"action": "gone", "method": "GET", "path": f"/namespaces/{namespace}/configmaps$", "watch": True}
        proxy_failed: list[Exception] = []

        def start_proxy() -> None:
            try:
                proxy.start([gone_rule])
            except Exception as e:  # noqa: BLE001 - raised in the check's thread, below
                proxy_failed.append(e)

        starting = threading.Thread(target=start_proxy, name="ex02c-proxy", daemon=True)
        starting.start()  # it takes a second or two: meanwhile, the first questions
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=elsewhere)))
        quiet_namespace(core, namespace)  # no ConfigMap but the check's appears in it from here on
        try:
            for name in ("kept", "edited", "deleted"):
                _write(core, namespace, name)
            since = core.list_namespaced_config_map(namespace).metadata.resource_version
            _write(core, namespace, "created")
            _write(core, namespace, "edited")
            _write(core, namespace, "edited")
            core.delete_namespaced_config_map("deleted", namespace)

            def nudge() -> None:  # while the watch is open: the server's resourceVersion moves past our last event
                _write(core, elsewhere, "nudge")

            watched = ConfigMaps(self.api, namespace)
            answer, seconds = self._ask(learner, watched, since, nudge)
            server = _versions(core, namespace)
            want = {"created": server["created"], "edited": server["edited"], "deleted": None}
            changed, resume = answer if isinstance(answer, tuple) else (answer, None)
            yield Check("every object changed since, at its newest resourceVersion (None: deleted); nothing unchanged",
                        changed == want, f"got {changed!r}; the server says {want!r}")
            yield Check("one WATCH and no LIST", watched.counts() == (0, 1),
                        f"{watched.counts()[0]} LIST, {watched.counts()[1]} WATCH")
            yield Check("the resourceVersion to ask from next time is the newest the server gave (the bookmark's)",
                        resume is not None and resume == watched.last_seen,
                        f"returned {resume!r}; the last the server gave was {watched.last_seen!r} "
                        f"(from {watched.last_seen_from or 'nothing'}), in {seconds:.1f} s")
            if isinstance(resume, str) and resume:
                _write(core, namespace, "created")
                again = ConfigMaps(self.api, namespace)
                answer, _ = self._ask(learner, again, resume, nudge)
                newest = _versions(core, namespace)["created"]
                changed = answer[0] if isinstance(answer, tuple) else answer
                yield Check("asked again from there, after one more change: only that change",
                            changed == {"created": newest}, f"got {changed!r}; expected "
                                                           f"{ {'created': newest}!r}")
            else:
                yield Check("asked again from there, after one more change: only that change", False,
                            "no resourceVersion was returned to ask from")
            starting.join()
            if proxy_failed:
                raise proxy_failed[0]
            gone = ConfigMaps(without_retries(proxy.kubeconfig), namespace)
            answer, _ = self._ask(learner, gone, since)
            yield Check("a 410 Gone (the history is no longer kept; here from the fault proxy): the answer is "
                        "None, so the caller knows only a LIST can tell", answer is None,
                        f"got {answer!r}; the server said 410 Gone")
        finally:
            starting.join()
            proxy.stop()
            for name in (namespace, elsewhere):
                core.delete_namespace(name)

    def _ask(self, learner: ModuleType, watched: ConfigMaps, resource_version: str,
             meanwhile: Callable[[], object] | None = None) -> tuple[Any, float]:
        """The learner's answer (in a thread: a loop that never returns must not hang the check).

        ``meanwhile`` runs 0.3 s into the call: kube-apiserver sends a watch a bookmark only if
        its resourceVersion moved after the watch began.
        """
        result: list[Any] = []
        failed: list[BaseException] = []

        def call() -> None:
            try:
                result.append(learner.changes_since(watched, resource_version))
            except BaseException as e:  # noqa: BLE001 - re-raised below, for the runner to report
                failed.append(e)

        started = time.monotonic()
        thread = threading.Thread(target=call, name="ex02c-learner", daemon=True)
        thread.start()
        if meanwhile is not None:
            time.sleep(0.3)
            meanwhile()
        thread.join(self.budget)
        watched.close_all()
        if failed:
            raise failed[0]
        if thread.is_alive():
            raise TimeoutError(f"changes_since did not return within {self.budget:g} s (the server ends each "
                               f"watch after {STREAM_SECONDS} s: return when the stream ends, or at a bookmark)")
        return result[0], time.monotonic() - started


def _write(core: client.CoreV1Api, namespace: str, name: str) -> None:
    """Create the ConfigMap, or change it if it exists."""
    body = {"metadata": {"name": name}, "data": {"at": str(time.monotonic_ns())}}
    try:
        core.create_namespaced_config_map(namespace, body)
    except client.ApiException as e:
        if e.status != 409:
            raise
        core.patch_namespaced_config_map(name, namespace, {"data": body["data"]})


def _versions(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    return {i.metadata.name: i.metadata.resource_version for i in core.list_namespaced_config_map(namespace).items}


