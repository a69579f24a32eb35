"""The reflector's loop on scripted LIST and WATCH answers: what it asks for next, and when.

The reflector runs its real thread; only its two calls are scripted
(:mod:`tests.unit.scripted`), with a fast backoff that records each wait. The same
behaviour against the API server (a real 410, a 429 and cut streams through the
fault proxy) is in tests/integration/test_controllers.py.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from operatorlab.controllers.listwatch import ListWatch, Reflector, Resource, WatchEvent, failure_of
from operatorlab.controllers.reflector_policy import Failure, RequestFailed
from operatorlab.wait import eventually
from tests.unit.scripted import (
    RecordingBackoff,
    RecordingSink,
    ScriptedListWatch,
    ScriptedStream,
    bookmark,
    error,
    event,
    page,
    tenant,
)


@pytest.fixture
def run() -> Iterator[Callable[..., tuple[Reflector, RecordingSink, list[WatchEvent]]]]:
    started: list[Reflector] = []

    def start(lw: ScriptedListWatch, **kwargs: Any) -> tuple[Reflector, RecordingSink, list[WatchEvent]]:
        sink, timeline = RecordingSink(), []
        reflector = Reflector(lw, sink, backoff=kwargs.pop("backoff", RecordingBackoff()), **kwargs)
        reflector.on_event(timeline.append)
        started.append(reflector.start())
        return reflector, sink, timeline

    yield start
    for reflector in started:
        reflector.stop(5)


def types(timeline: list[WatchEvent]) -> list[str]:
    return [e.type for e in timeline]


def test_list_then_watch_from_the_lists_version_and_rewatch_where_the_stream_ended(run) -> None:
    lw = ScriptedListWatch.of(
        [page(tenant("a", "5"), rv="7")],
        [ScriptedStream(event("ADDED", tenant("b", "8")), bookmark("9"), then="end")],
    )
    reflector, sink, timeline = run(lw)
    eventually(lambda: len(lw.watch_calls) == 2, timeout=5, message="a second watch")
    assert sink.lists == [(["a"], "7")]
    assert [(e.type, e.resource_version) for e in sink.applied] == [("ADDED", "8"), ("BOOKMARK", "9")]
    assert [c["resource_version"] for c in lw.watch_calls] == ["7", "9"]  # row 11: from the bookmark, no backoff
    assert lw.list_calls[0]["resource_version"] == "0" and lw.list_calls[0]["limit"] == 500
    assert reflector.backoffs == 0 and "BACKOFF" not in types(timeline)


def test_410_on_the_stream_backs_off_then_relists_at_the_last_resource_version(run) -> None:
    lw = ScriptedListWatch.of(
        [page(rv="7"), page(tenant("a", "20"), rv="20")],
        [ScriptedStream(event("ADDED", tenant("a", "8")), error(410, "Expired"), then="wait")],
    )
    reflector, sink, timeline = run(lw)
    eventually(lambda: len(sink.lists) == 2, timeout=5, message="relisted")
    assert types(timeline)[:6] == ["LIST", "WATCH", "ADDED", "ERROR", "BACKOFF", "LIST"]
    relist = lw.list_calls[1]
    assert relist["resource_version"] == "8" and relist["limit"] == 0  # at a given RV: unpaged, for the watch cache
    assert relist["t"] - lw.watch_calls[0]["t"] >= reflector.backoff.waits[0]
    assert reflector.expired == 1 and [d.row for d in reflector.decisions[:3]] == [2, 8, 2]


@pytest.mark.parametrize("refusal", [Failure(429, "TooManyRequests"), Failure(refused=True)])
def test_a_refused_watch_backs_off_and_watches_again_from_the_same_version(run, refusal: Failure) -> None:
    lw = ScriptedListWatch.of([page(rv="7")], [refusal, refusal, ScriptedStream(bookmark("9"))])
    reflector, _, _ = run(lw)
    eventually(lambda: len(lw.watch_calls) == 3, timeout=5, message="third watch")
    assert [c["resource_version"] for c in lw.watch_calls] == ["7", "7", "7"]
    assert len(lw.list_calls) == 1  # no relist
    backoff = reflector.backoff
    assert backoff.waits == [0.01, 0.02]  # growing
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(lw.watch_calls)]
    assert all(gap >= wait for gap, wait in zip(gaps, backoff.waits, strict=True))


def test_429_on_the_stream_backs_off_and_watches_again_from_the_last_version(run) -> None:
    lw = ScriptedListWatch.of([page(rv="7")], [ScriptedStream(bookmark("8"), error(429, "TooManyRequests"))])
    _, _, timeline = run(lw)
    eventually(lambda: len(lw.watch_calls) == 2, timeout=5, message="second watch")
    assert lw.watch_calls[1]["resource_version"] == "8" and len(lw.list_calls) == 1
    assert "BACKOFF" in types(timeline)


def test_a_watch_request_failing_otherwise_backs_off_then_relists(run) -> None:
    lw = ScriptedListWatch.of([page(rv="7"), page(rv="11")], [Failure(500, "InternalError")])
    reflector, sink, _ = run(lw)
    eventually(lambda: len(sink.lists) == 2, timeout=5, message="relisted")
    assert [d.row for d in reflector.decisions[:2]] == [2, 6] and reflector.backoffs == 1


def test_streams_cut_at_once_never_loop_hot(run) -> None:
    lw = ScriptedListWatch.of()
    lw.default_list = page(rv="7")
    lw.watches.extend(ScriptedStream(then="break") for _ in range(1000))  # every stream breaks, no event
    reflector, _, _ = run(lw, backoff=RecordingBackoff(initial=0.05, cap=0.4))
    time.sleep(1.5)
    # row 10 each time: back off, relist. Waits 0.05, 0.1, 0.2, 0.4, 0.4 ... add up past 1.5 s by the 6th.
    assert 3 <= len(lw.watch_calls) <= 6, len(lw.watch_calls)
    assert len(lw.list_calls) == len(lw.watch_calls) or len(lw.list_calls) == len(lw.watch_calls) + 1
    assert {d.row for d in reflector.decisions if d.row != 2} == {10}


def test_a_list_at_an_unavailable_version_retries_at_once_for_the_newest_state(run) -> None:
    lw = ScriptedListWatch.of(
        [page(rv="7"), Failure(410, "Expired"), page(rv="30")],
        [ScriptedStream(bookmark("8"), error(410, "Expired"))],
    )
    reflector, sink, _ = run(lw)
    eventually(lambda: len(sink.lists) == 2, timeout=5, message="listed the newest state")
    assert [(c["resource_version"], c["limit"]) for c in lw.list_calls] == [("0", 500), ("8", 0), ("", 500)]
    assert [d.row for d in reflector.decisions[:4]] == [2, 8, 3, 2]
    assert reflector.backoffs == 1  # before the relist at "8"; none before the one at ""
    eventually(lambda: lw.watch_calls[-1]["resource_version"] == "30", timeout=5, message="watching from the new list")


def test_a_failed_list_backs_off_and_lists_again(run) -> None:
    lw = ScriptedListWatch.of([Failure(500, "InternalError"), Failure(refused=True), page(rv="7")])
    reflector, sink, _ = run(lw)
    assert reflector.wait_for_sync(5)
    assert sink.lists == [([], "7")] and reflector.backoff.waits == [0.01, 0.02]
    assert [c["resource_version"] for c in lw.list_calls] == ["0", "0", "0"]


def test_an_explicit_page_size_and_a_consistent_first_list(run) -> None:
    lw = ScriptedListWatch.of([page(tenant("a", "1"), rv="7", cont="c"), page(tenant("b", "2"), rv="7")])
    reflector, sink, timeline = run(lw, page_size=1, first_list_resource_version="")
    assert reflector.wait_for_sync(5)
    assert sink.lists == [(["a", "b"], "7")]
    assert [(c["resource_version"], c["limit"], c["continue"]) for c in lw.list_calls] == [("", 1, ""), ("", 1, "c")]
    assert "2 page(s)" in timeline[0].detail


def test_break_watch_and_relist_act_at_once_without_backoff(run) -> None:
    lw = ScriptedListWatch.of([page(rv="7"), page(rv="12")], [ScriptedStream(bookmark("9"))])
    reflector, sink, timeline = run(lw)
    eventually(lambda: reflector.resource_version == "9", timeout=5, message="bookmark seen")
    assert reflector.break_watch()
    eventually(lambda: len(lw.watch_calls) == 2, timeout=5, message="re-watched")
    assert lw.watch_calls[1]["resource_version"] == "9" and "DROPPED" in types(timeline)
    eventually(lambda: types(timeline).count("WATCH") == 2, timeout=5, message="the second stream is open")
    reflector.relist()
    eventually(lambda: len(sink.lists) == 2, timeout=5, message="relisted")
    assert reflector.backoffs == 0


def test_stop_cuts_a_backoff_short(run) -> None:
    lw = ScriptedListWatch.of([Failure(500, "InternalError")])
    reflector, _, _ = run(lw, backoff=RecordingBackoff(initial=30, cap=30))
    eventually(lambda: reflector.backoffs == 1, timeout=5, message="backing off")
    started = time.monotonic()
    reflector.stop(5)
    assert time.monotonic() - started < 2 and not reflector.running


def test_a_refused_connection_is_recognised_in_the_clients_real_exception() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    configuration = client.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.retries = 0
    lw = ListWatch(client.ApiClient(configuration), Resource("hedronite.io", "v1", "tenants"), connect_timeout=2)
    with pytest.raises(RequestFailed) as raised:
        lw.watch(resource_version="7", timeout=5)
    assert raised.value.failure.refused and raised.value.failure.code is None
    with pytest.raises(RequestFailed) as raised:
        lw.list(resource_version="0", limit=0, continue_token="", timeout=5)
    assert raised.value.failure.refused


def test_a_failed_requests_status_becomes_the_failure_the_rules_read() -> None:
    gone = client.ApiException(status=410, reason="Gone")
    gone.body = '{"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version: 5 (90)"}'
    failure = failure_of(gone)
    assert (failure.code, failure.reason, failure.expired) == (410, "Expired", True)
    assert "too old resource version" in failure.message
    busy = client.ApiException(status=429, reason="Too Many Requests")  # no Status body: the code decides
    assert failure_of(busy).too_many_requests and not failure_of(busy).refused
    too_large = client.ApiException(status=504, reason="Gateway Timeout")
    too_large.body = ('{"code": 504, "reason": "Timeout", "message": "Too large resource version",'
                      ' "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large"}]}}')
    assert failure_of(too_large).causes == ("ResourceVersionTooLarge",)
    assert failure_of(too_large).too_large_resource_version
    assert not failure_of(OSError("connection reset by peer")).refused


def test_an_unexpected_exception_in_a_call_is_a_failure_not_the_end_of_the_thread(run) -> None:
    lw = ScriptedListWatch.of([page(rv="7")])
    calls = {"n": 0}
    real_list = lw.list

    def list_once_broken(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyError("a bug in the list call")
        return real_list(**kwargs)

    lw.list = list_once_broken
    reflector, _, _ = run(lw)
    assert reflector.wait_for_sync(5) and reflector.running
    assert reflector.decisions[0].row == 4 and reflector.backoffs == 1
