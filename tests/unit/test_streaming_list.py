"""A streaming list (sendInitialEvents): the temporary store, and the reflector's loop on scripted answers.

The same against the real API server is in tests/integration/test_streaming_list.py.
"""

from __future__ import annotations

import pytest

from operatorlab.controllers.listwatch import Reflector
from operatorlab.controllers.reflector_policy import Failure
from operatorlab.controllers.streaming import InitialEvents, is_initial_events_end, watch_list_query
from operatorlab.wait import eventually
from tests.unit.scripted import (
    RecordingBackoff,
    RecordingSink,
    ScriptedListWatch,
    ScriptedStream,
    bookmark,
    end_of_initial_events,
    event,
    page,
    tenant,
)


def test_the_query_asks_for_initial_events_not_older_than_the_resource_version() -> None:
    assert watch_list_query() == {"watch": "true", "sendInitialEvents": "true",
                                  "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true"}
    assert watch_list_query("42")["resourceVersion"] == "42"


def test_only_the_annotated_bookmark_ends_the_initial_events() -> None:
    assert is_initial_events_end(end_of_initial_events("9"))
    assert not is_initial_events_end(bookmark("9"))  # a periodic bookmark: progress, not the end
    assert not is_initial_events_end(event("ADDED", tenant("a", "9")))
    annotated_added = event("ADDED", {"metadata": {"name": "a", "annotations": {"k8s.io/initial-events-end": "true"}}})
    assert not is_initial_events_end(annotated_added)  # only a BOOKMARK ends them


def test_the_temporary_store_holds_the_state_at_the_end_bookmark() -> None:
    initial = InitialEvents()
    assert not initial.add(event("ADDED", tenant("b", "5")))
    assert not initial.add(event("ADDED", tenant("a", "6")))
    assert not initial.add(event("MODIFIED", tenant("b", "7")))
    assert not initial.add(event("ADDED", tenant("c", "8")))
    assert not initial.add(event("DELETED", tenant("c", "9")))
    assert not initial.add(bookmark("10")) and not initial.done
    assert initial.add(end_of_initial_events("12"))
    assert initial.resource_version == "12"
    assert [(o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in initial.items()] == [("a", "6"),
                                                                                                   ("b", "7")]
    with pytest.raises(ValueError, match="have ended"):
        initial.add(event("ADDED", tenant("d", "13")))


def test_an_error_event_is_not_part_of_the_initial_state() -> None:
    with pytest.raises(ValueError, match="ERROR"):
        InitialEvents().add(event("ERROR", {"code": 410}))


def run(lw: ScriptedListWatch) -> tuple[Reflector, RecordingSink]:
    sink = RecordingSink()
    return Reflector(lw, sink, watch_list=True, backoff=RecordingBackoff()).start(), sink


def test_synced_only_at_the_bookmark_then_the_same_stream_goes_on() -> None:
    stream = ScriptedStream(event("ADDED", tenant("a", "5")), event("ADDED", tenant("b", "6")))
    lw = ScriptedListWatch.of(watches=[stream])
    reflector, sink = run(lw)
    try:
        eventually(lambda: reflector.events == 2, timeout=5, message="two initial events read")
        assert not reflector.has_synced() and sink.lists == [] and sink.applied == []
        stream.push(end_of_initial_events("9"), event("ADDED", tenant("c", "10")))
        assert reflector.wait_for_sync(5)
        eventually(lambda: len(sink.applied) == 1, timeout=5, message="the event after the bookmark applied")
        assert sink.lists == [(["a", "b"], "9")]
        assert [(e.type, e.name) for e in sink.applied] == [("ADDED", "c")]
        assert reflector.resource_version == "10" and lw.list_calls == []
        assert lw.watch_calls == [{"resource_version": "", "t": lw.watch_calls[0]["t"], "streaming": True}]
        stream.end()  # the server ends the stream: an ordinary WATCH from the last resourceVersion follows
        eventually(lambda: len(lw.watch_calls) == 2, timeout=5, message="a second watch")
        assert lw.watch_calls[1] == {"resource_version": "10", "t": lw.watch_calls[1]["t"]}
        assert reflector.streamed_lists == 1 and reflector.lists == 1
    finally:
        reflector.stop(5)


def test_a_stream_that_ends_before_its_bookmark_is_a_failed_list_streamed_again_after_a_backoff() -> None:
    lw = ScriptedListWatch.of(watches=[ScriptedStream(event("ADDED", tenant("a", "5")), then="end"),
                                       ScriptedStream(event("ADDED", tenant("a", "5")), end_of_initial_events("9"))])
    reflector, sink = run(lw)
    try:
        assert reflector.wait_for_sync(5)
        assert sink.lists == [(["a"], "9")] and len(reflector.backoff.waits) == 1  # type: ignore[attr-defined]
        assert [c.get("streaming") for c in lw.watch_calls] == [True, True] and lw.list_calls == []
    finally:
        reflector.stop(5)


def test_a_server_that_refuses_the_stream_gets_a_list_at_once_and_the_next_list_streams_again() -> None:
    refused = Failure(400, "BadRequest", message="sendInitialEvents is forbidden for watch unless the WatchList "
                                                 "feature gate is enabled")
    lw = ScriptedListWatch.of(lists=[page(tenant("a", "5"), rv="7")],
                              watches=[refused, ScriptedStream(event("ERROR", {"code": 410, "reason": "Expired",
                                                                               "message": "too old"})),
                                       ScriptedStream(event("ADDED", tenant("a", "5")), end_of_initial_events("20"))])
    reflector, sink = run(lw)
    try:
        assert reflector.wait_for_sync(5)
        eventually(lambda: len(sink.lists) == 2, timeout=5, message="streamed after the 410")
        assert sink.lists == [(["a"], "7"), (["a"], "20")]
        assert len(reflector.backoff.waits) == 1  # type: ignore[attr-defined]  # the 410's; the fallback: at once
        assert [(c["resource_version"], c.get("streaming", False)) for c in lw.watch_calls] == [
            ("", True), ("7", False), ("7", True)]  # the relist streams from the last resourceVersion seen
    finally:
        reflector.stop(5)


def test_watch_list_needs_a_streaming_lister_watcher() -> None:
    class Plain:
        def list(self, **kwargs: object) -> None: ...
        def watch(self, **kwargs: object) -> None: ...

    with pytest.raises(TypeError, match="watch_list"):
        Reflector(Plain(), RecordingSink(), watch_list=True)  # type: ignore[arg-type]
