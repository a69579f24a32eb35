"""Unit tests for the informer's store and handler dispatch (no cluster, no network).

Lists and events are handed straight to the informer's sink methods, exactly
as its reflector hands over what the API server sent, or come from scripted LIST
and WATCH answers through the real reflector thread; the LIST + WATCH against
the API server, 410s and dropped streams are tested on the real cluster in
tests/integration/test_controllers.py.
"""

from __future__ import annotations

import threading

from operatorlab.controllers.informer import DeletedFinalStateUnknown, Informer, Store, deletion_handling_key
from operatorlab.controllers.listener import Listener
from operatorlab.controllers.listwatch import WatchEvent
from operatorlab.wait import eventually
from tests.unit.scripted import ScriptedListWatch, ScriptedStream, page, tenant
from tests.unit.scripted import event as raw_event


def event(kind: str, obj: dict) -> WatchEvent:
    return WatchEvent.from_raw(raw_event(kind, obj))


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_add(self, obj):
        self.calls.append(("add", obj["metadata"]["name"]))

    def on_update(self, old, new):
        rvs = (old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"])
        self.calls.append(("update", new["metadata"]["name"], *rvs))

    def on_delete(self, obj):
        kind = "tombstone" if isinstance(obj, DeletedFinalStateUnknown) else "delete"
        self.calls.append((kind, deletion_handling_key(obj)))


def make_informer() -> tuple[Informer, Recorder]:
    # No request is made: the reflector is never started; the handlers' threads start with their first notification.
    informer = Informer(ScriptedListWatch.of())
    recorder = Recorder()
    informer.add_event_handler(recorder.on_add, recorder.on_update, recorder.on_delete)
    return informer, recorder


def test_store_keys_objects_by_namespace_and_name() -> None:
    store = Store()
    assert store.put({"metadata": {"name": "a"}}) is None
    assert store.put({"metadata": {"name": "a", "namespace": "ns"}}) is None
    assert sorted(store.keys()) == ["a", "ns/a"]
    old = store.put({"metadata": {"name": "a"}, "spec": 1})
    assert old == {"metadata": {"name": "a"}}
    assert store.delete("ns/a") is not None and store.get("ns/a") is None
    assert len(store) == 1


def test_events_update_the_store_before_handlers_hear_of_them() -> None:
    informer, recorder = make_informer()
    seen_in_store = []
    informer.add_event_handler(
        on_update=lambda old, new: seen_in_store.append(informer.get("a")["metadata"]["resourceVersion"]))
    informer.replace([], "10")
    informer.apply(event("ADDED", tenant("a", "11")))
    informer.apply(event("MODIFIED", tenant("a", "12", cpu="2")))
    informer.apply(event("BOOKMARK", {"metadata": {"resourceVersion": "13"}}))
    assert informer.wait_for_handlers(5)
    assert seen_in_store == ["12"]  # (a handler may find the store even further on: it runs on its own thread)
    informer.apply(event("DELETED", tenant("a", "14", cpu="2")))
    assert informer.wait_for_handlers(5)
    assert recorder.calls == [("add", "a"), ("update", "a", "11", "12"), ("delete", "a")]
    assert informer.get("a") is None


def test_a_relist_adds_updates_and_tombstones_what_vanished() -> None:
    informer, recorder = make_informer()
    informer.replace([tenant("a", "1"), tenant("b", "2")], "2")
    assert informer.wait_for_handlers(5)
    recorder.calls.clear()
    informer.replace([tenant("b", "5"), tenant("c", "6")], "6")  # a was deleted while we were not watching
    assert informer.wait_for_handlers(5)
    assert sorted(recorder.calls) == [("add", "c"), ("tombstone", "a"), ("update", "b", "2", "5")]
    assert sorted(o["metadata"]["name"] for o in informer.list()) == ["b", "c"]


def test_resync_redelivers_every_cached_object_as_an_update_to_itself() -> None:
    informer, recorder = make_informer()
    informer.replace([tenant("a", "1"), tenant("b", "2")], "2")
    assert informer.wait_for_handlers(5)
    recorder.calls.clear()
    assert informer.resync() == 2
    assert informer.wait_for_handlers(5)
    assert sorted(recorder.calls) == [("update", "a", "1", "1"), ("update", "b", "2", "2")]


def test_a_handler_added_after_sync_first_hears_of_every_cached_object() -> None:
    informer = Informer(ScriptedListWatch.of([page(tenant("a", "1"), rv="1")]))
    with informer:
        assert informer.wait_for_cache_sync(5)
        late = Recorder()
        informer.add_event_handler(late.on_add, late.on_update, late.on_delete)
        assert informer.wait_for_handlers(5)
    assert late.calls == [("add", "a")]


def test_a_failing_handler_does_not_stop_the_others() -> None:
    informer = Informer(ScriptedListWatch.of())

    def broken(obj):
        raise RuntimeError("boom")

    informer.add_event_handler(on_add=broken)
    recorder = Recorder()
    informer.add_event_handler(recorder.on_add)
    informer.apply(event("ADDED", tenant("a", "1")))
    assert informer.wait_for_handlers(5)
    assert recorder.calls == [("add", "a")]
    assert informer.get("a") is not None


def test_handlers_run_off_the_watch_thread_and_a_slow_one_holds_up_nothing_else() -> None:
    stream = ScriptedStream()
    informer = Informer(ScriptedListWatch.of([page(rv="1")], [stream]), name="inf")
    release, threads = threading.Event(), set()
    slow_heard: list[str] = []
    fast = Recorder()

    def slow(obj) -> None:
        threads.add(threading.current_thread().name)
        release.wait(10)
        slow_heard.append(obj["metadata"]["name"])

    informer.add_event_handler(on_add=slow)
    informer.add_event_handler(fast.on_add)
    with informer:
        assert informer.wait_for_cache_sync(5)
        stream.push(*(raw_event("ADDED", tenant(n, str(i + 2))) for i, n in enumerate("abc")))
        # the slow handler sits on "a"; the store and the other handler go on to "c"
        eventually(lambda: fast.calls == [("add", "a"), ("add", "b"), ("add", "c")], timeout=5, message="fast handler")
        assert sorted(o["metadata"]["name"] for o in informer.list()) == ["a", "b", "c"]
        eventually(lambda: informer.pending_notifications() == 3, timeout=5, message="only the slow handler's")
        assert slow_heard == []
        release.set()
        assert informer.wait_for_handlers(5)
    assert slow_heard == ["a", "b", "c"]  # in order, each once
    assert threads == {"inf-handler-0"} and "reflector" not in next(iter(threads))


def test_the_cache_hands_out_copies_only() -> None:
    informer = Informer(ScriptedListWatch.of())
    seen: list[dict] = []

    def vandal(obj) -> None:
        obj["spec"]["cpuQuota"] = "999"  # a handler that edits what it was given
        seen.append(obj)

    informer.add_event_handler(on_add=vandal)
    other = []
    informer.add_event_handler(on_add=other.append)
    timeline_object = tenant("a", "1")
    informer.apply(WatchEvent.from_raw(raw_event("ADDED", timeline_object)))
    assert informer.wait_for_handlers(5)
    assert seen[0]["spec"]["cpuQuota"] == "999"
    assert other[0]["spec"]["cpuQuota"] == "1"  # another handler's copy is untouched
    cached = informer.get("a")
    assert cached is not None and cached["spec"]["cpuQuota"] == "1"  # and so is the cache
    cached["spec"]["cpuQuota"] = "7"
    informer.list()[0]["metadata"]["name"] = "renamed"
    timeline_object["spec"]["cpuQuota"] = "8"  # the event's object, as a timeline observer holds it
    assert informer.get("a")["spec"]["cpuQuota"] == "1"
    assert [o["metadata"]["name"] for o in informer.list()] == ["a"]


def test_a_listener_runs_in_order_drops_its_buffer_on_stop_and_runs_again_after_start() -> None:
    listener, ran, gate = Listener("l"), [], threading.Event()
    listener.add(lambda: gate.wait(5))
    for n in range(3):
        listener.add(lambda n=n: ran.append(n))
    assert listener.pending() == 4
    gate.set()
    assert listener.wait_idle(5) and ran == [0, 1, 2] and listener.delivered == 4
    gate.clear()
    running = threading.Event()
    listener.add(lambda: (running.set(), gate.wait(5)))
    listener.add(lambda: ran.append("dropped"))
    assert running.wait(5) and listener.pending() == 2  # one running, one buffered
    stopping = threading.Thread(target=listener.stop, args=(5,))
    stopping.start()  # drops the buffer at once, then waits for the running notification
    eventually(lambda: listener.pending() == 1, timeout=5, message="buffer dropped")
    gate.set()
    stopping.join(5)
    assert "dropped" not in ran and listener.pending() == 0
    listener.add(lambda: ran.append("ignored while stopped"))
    listener.start()
    listener.add(lambda: ran.append("after start"))
    assert listener.wait_idle(5) and ran == [0, 1, 2, "after start"]
