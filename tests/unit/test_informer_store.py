"""Unit tests for the informer's store and handler dispatch (no cluster, no network).

Lists and events are handed straight to the informer's sink methods, exactly
as its reflector hands over what the API server sent; the LIST + WATCH itself,
410s and dropped streams are tested on the real cluster in
tests/integration/test_controllers.py.
"""

from __future__ import annotations

from kubernetes import client

from operatorlab.controllers.informer import DeletedFinalStateUnknown, Informer, Store, deletion_handling_key
from operatorlab.controllers.listwatch import Resource, WatchEvent


def tenant(name: str, rv: str, cpu: str = "1") -> dict:
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"cpuQuota": cpu}}


def event(kind: str, obj: dict) -> WatchEvent:
    return WatchEvent.from_raw({"type": kind, "object": obj})


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_add(self, obj):
        self.calls.append(("add", obj["metadata"]["name"]))

    def on_update(self, old, new):
        self.calls.append(("update", new["metadata"]["name"], old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"]))

    def on_delete(self, obj):
        kind = "tombstone" if isinstance(obj, DeletedFinalStateUnknown) else "delete"
        self.calls.append((kind, deletion_handling_key(obj)))


def make_informer() -> tuple[Informer, Recorder]:
    # No request is made: the reflector is never started.
    informer = Informer(client.ApiClient(client.Configuration()), Resource("hedronite.io", "v1", "tenants"))
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
    informer.add_event_handler(on_update=lambda old, new: seen_in_store.append(informer.get("a")["metadata"]["resourceVersion"]))
    informer.replace([], "10")
    informer.apply(event("ADDED", tenant("a", "11")))
    informer.apply(event("MODIFIED", tenant("a", "12", cpu="2")))
    informer.apply(event("BOOKMARK", {"metadata": {"resourceVersion": "13"}}))
    informer.apply(event("DELETED", tenant("a", "14", cpu="2")))
    assert recorder.calls == [("add", "a"), ("update", "a", "11", "12"), ("delete", "a")]
    assert seen_in_store == ["12"]
    assert informer.get("a") is None


def test_a_relist_adds_updates_and_tombstones_what_vanished() -> None:
    informer, recorder = make_informer()
    informer.replace([tenant("a", "1"), tenant("b", "2")], "2")
    recorder.calls.clear()
    informer.replace([tenant("b", "5"), tenant("c", "6")], "6")  # a was deleted while we were not watching
    assert sorted(recorder.calls) == [("add", "c"), ("tombstone", "a"), ("update", "b", "2", "5")]
    assert sorted(o["metadata"]["name"] for o in informer.list()) == ["b", "c"]


def test_resync_redelivers_every_cached_object_as_an_update_to_itself() -> None:
    informer, recorder = make_informer()
    informer.replace([tenant("a", "1"), tenant("b", "2")], "2")
    recorder.calls.clear()
    assert informer.resync() == 2
    assert sorted(recorder.calls) == [("update", "a", "1", "1"), ("update", "b", "2", "2")]


def test_a_handler_added_after_sync_first_hears_of_every_cached_object() -> None:
    informer = Informer(client.ApiClient(client.Configuration()), Resource("hedronite.io", "v1", "tenants"))
    informer.replace([tenant("a", "1")], "1")
    informer.reflector._synced.set()  # what the reflector does after delivering its first LIST
    late = Recorder()
    informer.add_event_handler(late.on_add, late.on_update, late.on_delete)
    assert late.calls == [("add", "a")]


def test_a_failing_handler_does_not_stop_the_others() -> None:
    informer = Informer(client.ApiClient(client.Configuration()), Resource("hedronite.io", "v1", "tenants"))

    def broken(obj):
        raise RuntimeError("boom")

    informer.add_event_handler(on_add=broken)
    recorder = Recorder()
    informer.add_event_handler(recorder.on_add)
    informer.apply(event("ADDED", tenant("a", "1")))
    assert recorder.calls == [("add", "a")]
    assert informer.get("a") is not None
