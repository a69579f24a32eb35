"""The reflector's retry rules, its backoff and its pager: pure functions, checked row by row.

Each expectation is client-go's behaviour as read in k8s.io/client-go v0.36.3
(``tools/cache/reflector.go``, ``tools/pager/pager.go``) and k8s.io/apimachinery
v0.36.3 (``pkg/util/wait/backoff.go``, ``pkg/api/errors``).
"""

from __future__ import annotations

import re

import pytest

from operatorlab.controllers import reflector_policy
from operatorlab.controllers.backoff import REFLECTOR_BACKOFF, REFLECTOR_BACKOFF_RESET, Backoff, BackoffManager
from operatorlab.controllers.pager import list_pages
from operatorlab.controllers.reflector_policy import Attempt, Failure, Interrupt, Next, Outcome, RequestFailed, decide
from tests.unit.scripted import ScriptedListWatch, page, tenant

GONE = Failure(410, "Expired", message="too old resource version")
TOO_MANY = Failure(429, "TooManyRequests")
REFUSED = Failure(refused=True, message="connection refused")
INTERNAL = Failure(500, "InternalError")
FORBIDDEN = Failure(403, "Forbidden")
TOO_LARGE = Failure(504, "Timeout", causes=("ResourceVersionTooLarge",))
NETWORK = Failure(message="read timed out")

# (outcome, next, back off, row)
ROWS = [
    (Outcome(Attempt.STREAM, GONE, stopping=True), Next.STOP, False, 1),
    (Outcome(Attempt.LIST, stopping=True), Next.STOP, False, 1),
    (Outcome(Attempt.LIST, resource_version="0"), Next.WATCH, False, 2),
    (Outcome(Attempt.LIST, GONE, resource_version="42"), Next.LIST, False, 3),
    (Outcome(Attempt.LIST, TOO_LARGE, resource_version="42"), Next.LIST, False, 3),
    (Outcome(Attempt.LIST, GONE, resource_version=""), Next.LIST, True, 4),  # already the newest: no point at once
    (Outcome(Attempt.LIST, INTERNAL, resource_version="0"), Next.LIST, True, 4),
    (Outcome(Attempt.LIST, TOO_MANY, resource_version="0"), Next.LIST, True, 4),
    (Outcome(Attempt.LIST, REFUSED, resource_version="0"), Next.LIST, True, 4),
    (Outcome(Attempt.WATCH, TOO_MANY), Next.WATCH, True, 5),
    (Outcome(Attempt.WATCH, Failure(429, "")), Next.WATCH, True, 5),
    (Outcome(Attempt.WATCH, REFUSED), Next.WATCH, True, 5),
    (Outcome(Attempt.WATCH, GONE), Next.LIST, True, 6),
    (Outcome(Attempt.WATCH, INTERNAL), Next.LIST, True, 6),
    (Outcome(Attempt.WATCH, FORBIDDEN), Next.LIST, True, 6),
    (Outcome(Attempt.WATCH, NETWORK), Next.LIST, True, 6),
    (Outcome(Attempt.STREAM, TOO_MANY, seconds=30, events=3), Next.WATCH, True, 7),
    (Outcome(Attempt.STREAM, GONE, seconds=30, events=3), Next.LIST, True, 8),
    (Outcome(Attempt.STREAM, Failure(410, "Gone")), Next.LIST, True, 8),
    (Outcome(Attempt.STREAM, INTERNAL, seconds=30, events=3), Next.LIST, True, 9),
    (Outcome(Attempt.STREAM, seconds=0.2, events=0), Next.LIST, True, 10),
    (Outcome(Attempt.STREAM, seconds=0.2, events=1), Next.WATCH, False, 11),
    (Outcome(Attempt.STREAM, seconds=1.0, events=0), Next.WATCH, False, 11),
    (Outcome(Attempt.STREAM, seconds=300, events=12), Next.WATCH, False, 11),
    (Outcome(Attempt.STREAM, seconds=0.1, interrupted=Interrupt.REWATCH), Next.WATCH, False, 12),
    (Outcome(Attempt.STREAM, seconds=0.1, interrupted=Interrupt.RELIST), Next.LIST, False, 13),
]


@pytest.mark.parametrize(("outcome", "then", "back_off", "row"), ROWS)
def test_each_row_of_the_table(outcome: Outcome, then: Next, back_off: bool, row: int) -> None:
    decision = decide(outcome)
    assert (decision.next, decision.back_off, decision.row) == (then, back_off, row)
    assert decision.list_latest == (row == 3)


def test_the_docstring_table_has_exactly_the_rows_decide_returns() -> None:
    table_rows = {int(n) for n in re.findall(r"^\s?(\d+)\s{2,}", reflector_policy.__doc__ or "", re.MULTILINE)}
    assert table_rows == {row for *_, row in ROWS} == set(range(1, 14))


def test_every_relist_waits_except_after_an_unavailable_resource_version() -> None:
    relists = [decide(o) for o, then, *_ in ROWS if then is Next.LIST]
    assert {d.row for d in relists if not d.back_off} == {3, 13}  # 13: asked for by the caller


def test_a_watch_request_that_opened_is_reported_as_a_stream() -> None:
    with pytest.raises(ValueError, match="STREAM"):
        decide(Outcome(Attempt.WATCH))


@pytest.mark.parametrize(("failure", "expired"), [
    (Failure(410, "Expired"), True),
    (Failure(410, "Gone"), True),
    (Failure(410, "SomethingNew"), True),  # an unknown reason: the code decides
    (Failure(410, ""), True),  # "" (StatusReasonUnknown) is not a known reason either
    (Failure(410, "Conflict"), False),  # a known reason wins over the code
    (Failure(500, "Expired"), True),  # IsResourceExpired looks at the reason only
    (Failure(None), False),
])
def test_expired_is_client_gos_is_expired_error(failure: Failure, expired: bool) -> None:
    assert failure.expired is expired


def test_too_many_requests_is_the_reason_or_the_code_whatever_the_reason() -> None:
    assert Failure(429, "Conflict").too_many_requests  # IsTooManyRequests checks the code unconditionally
    assert Failure(503, "TooManyRequests").too_many_requests
    assert not Failure(503, "ServiceUnavailable").too_many_requests


def test_too_large_resource_version_by_cause_or_by_the_old_message() -> None:
    assert Failure(504, "Timeout", causes=("ResourceVersionTooLarge",)).too_large_resource_version
    assert Failure(504, "Timeout", message="Too large resource version: 99, current: 10").too_large_resource_version
    assert not Failure(504, "Timeout", message="request timed out").too_large_resource_version


def test_which_resource_version_a_list_asks_for() -> None:
    assert reflector_policy.list_resource_version("", unavailable=False) == "0"  # first LIST: the watch cache, as it is
    assert reflector_policy.list_resource_version("", unavailable=False, initial="") == ""  # or: the newest state
    assert reflector_policy.list_resource_version("57", unavailable=False) == "57"  # relist: not older than what we saw
    assert reflector_policy.list_resource_version("57", unavailable=True) == ""  # that one is gone: the newest state


# -- backoff --------------------------------------------------------------------------------


def test_client_gos_reflector_backoff_parameters() -> None:
    assert Backoff(duration=0.8, factor=2.0, jitter=1.0, steps=38, cap=30.0) == REFLECTOR_BACKOFF
    assert REFLECTOR_BACKOFF_RESET == 120.0


def test_backoff_doubles_from_800ms_to_the_30s_cap_with_up_to_100_percent_jitter() -> None:
    now = [0.0]
    low = BackoffManager(clock=lambda: now[0], rand=lambda: 0.0)
    assert [round(low.step(), 3) for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    high = BackoffManager(clock=lambda: now[0], rand=lambda: 0.999)
    waits = [high.step() for _ in range(8)]
    assert waits[0] == pytest.approx(0.8 * 1.999) and waits[-1] == pytest.approx(30 * 1.999)


def test_backoff_resets_two_minutes_after_the_last_reset_even_while_failing() -> None:
    now = [0.0]
    manager = BackoffManager(clock=lambda: now[0], rand=lambda: 0.0)
    waits = []
    for _ in range(10):  # fail without pause: each wait is followed by a failure at once
        waits.append(manager.step())
        now[0] += waits[-1]
    # 0.8 + 1.6 + ... + 25.6 = 50.4, then 30 s at t=50.4, 80.4 and 110.4 (not yet 120 s after the
    # manager started); the step at t=140.4 is past 120 s: it starts from 800 ms again.
    assert waits[:9] == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0])
    assert waits[9] == pytest.approx(0.8)


def test_backoff_with_no_reset_interval_never_grows() -> None:
    manager = BackoffManager(reset_after=0, rand=lambda: 0.0)
    assert [manager.step() for _ in range(3)] == [0.8, 0.8, 0.8]


# -- pager --------------------------------------------------------------------------------


def test_an_unpaged_list_is_one_request_without_a_limit() -> None:
    lw = ScriptedListWatch.of([page(tenant("a", "3"), rv="9")])
    listed = list_pages(lambda **kw: lw.list(timeout=1, **kw), resource_version="0", page_size=0)
    assert (listed.pages, listed.paginated, listed.resource_version) == (1, False, "9")
    assert lw.list_calls[0] | {"t": 0} == {"resource_version": "0", "limit": 0, "continue": "", "t": 0}


def test_pages_are_joined_and_only_the_first_asks_for_a_resource_version() -> None:
    lw = ScriptedListWatch.of([
        page(tenant("a", "1"), tenant("b", "2"), rv="9", cont="c1"),
        page(tenant("c", "3"), tenant("d", "4"), rv="9", cont="c2"),
        page(tenant("e", "5"), rv="9"),
    ])
    listed = list_pages(lambda **kw: lw.list(timeout=1, **kw), resource_version="", page_size=2)
    assert [o["metadata"]["name"] for o in listed.items] == ["a", "b", "c", "d", "e"]
    assert (listed.pages, listed.paginated, listed.resource_version) == (3, True, "9")
    assert [(c["resource_version"], c["limit"], c["continue"]) for c in lw.list_calls] == [
        ("", 2, ""), ("", 2, "c1"), ("", 2, "c2")]


def test_an_expired_continue_token_falls_back_to_one_unpaged_list_at_the_first_resource_version() -> None:
    lw = ScriptedListWatch.of([
        page(tenant("a", "1"), rv="9", cont="c1"),
        Failure(410, "Expired", message="The provided continue parameter is too old"),
        page(tenant("a", "1"), tenant("b", "12"), rv="12"),
    ])
    listed = list_pages(lambda **kw: lw.list(timeout=1, **kw), resource_version="7", page_size=1)
    assert [o["metadata"]["name"] for o in listed.items] == ["a", "b"]  # the fallback's whole list, not page 1 + it
    assert (listed.pages, listed.resource_version) == (3, "12")
    assert [(c["resource_version"], c["limit"], c["continue"]) for c in lw.list_calls] == [
        ("7", 1, ""), ("", 1, "c1"), ("7", 0, "")]


@pytest.mark.parametrize("failure", [Failure(410, "Expired"), Failure(410, "Gone"), Failure(500, "InternalError")])
def test_other_page_failures_are_raised(failure: Failure) -> None:
    first_page_expired = failure.reason == "Expired"
    lw = ScriptedListWatch.of([failure] if first_page_expired else [page(rv="9", cont="c1"), failure])
    with pytest.raises(RequestFailed) as raised:
        list_pages(lambda **kw: lw.list(timeout=1, **kw), resource_version="0", page_size=1)
    assert raised.value.failure == failure  # on page 1 even Expired is raised; Gone only counts as Expired elsewhere
