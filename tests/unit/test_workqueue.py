"""Unit tests for operatorlab.controllers.workqueue (client-go util/workqueue semantics).

No cluster, no sleeps that decide a result: waits use events and generous
timeouts, and timing assertions are only lower bounds (a delayed key never
arrives early), which cannot flake.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable, Hashable

import pytest

from operatorlab.controllers.workqueue import (
    BucketRateLimiter,
    DelayingQueue,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    QueueMetrics,
    RateLimitingQueue,
    WorkQueue,
    default_controller_rate_limiter,
)

WAIT = 10.0  # generous upper bound for anything that should happen "soon"


def get_key(q: WorkQueue[str]) -> str:
    key, shutdown = q.get(timeout=WAIT)
    assert not shutdown and key is not None
    return key


def wait_until(
    q: WorkQueue[str], predicate: Callable[[QueueMetrics], bool], timeout: float = WAIT
) -> QueueMetrics:
    """Wait, via a listener, until predicate(metrics) holds; return those metrics."""
    hit = threading.Event()

    def listener(m: QueueMetrics) -> None:
        if predicate(m):
            hit.set()

    q.add_listener(listener)
    try:
        if not predicate(q.metrics()):
            assert hit.wait(timeout), f"condition not reached; metrics={q.metrics()}"
    finally:
        q.remove_listener(listener)
    return q.metrics()


def thread_alive(name: str) -> bool:
    return any(t.name == name and t.is_alive() for t in threading.enumerate())


# -- queue.go: dirty / processing ----------------------------------------------


def test_adding_a_queued_key_again_stores_it_once() -> None:
    q: WorkQueue[str] = WorkQueue("dedup")
    for _ in range(5):
        q.add("default/web")

    assert len(q) == 1
    m = q.metrics()
    assert (m.adds, m.deduplicated, m.depth, m.queued) == (1, 4, 1, 1)
    assert get_key(q) == "default/web"
    with pytest.raises(TimeoutError):
        q.get(timeout=0)  # the four extra adds left nothing behind


def test_key_added_while_processing_is_requeued_on_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert get_key(q) == "a"

    q.add("a")  # marked dirty, parked behind the worker: not handed to another
    assert len(q) == 0
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    q.add("a")  # still dirty: deduplicated
    m = q.metrics()
    assert (m.depth, m.queued, m.processing) == (1, 0, 1)
    assert (m.adds, m.deduplicated, m.requeued_while_processing) == (2, 1, 1)

    q.done("a")
    assert len(q) == 1
    assert get_key(q) == "a"
    q.done("a")
    assert q.metrics().processed == 2 == q.metrics().adds


def test_done_without_a_readd_does_not_requeue() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    get_key(q)
    q.done("a")
    assert len(q) == 0
    assert q.metrics().depth == 0


def test_distinct_keys_come_out_first_in_first_out() -> None:
    q: WorkQueue[str] = WorkQueue()
    keys = [f"ns/obj-{i}" for i in range(20)]
    for k in keys:
        q.add(k)
    q.add(keys[0])  # a re-add does not move a queued key
    assert [get_key(q) for _ in keys] == keys


def test_done_for_a_key_not_being_processed_raises() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    with pytest.raises(ValueError, match="not being processed"):
        q.done("a")  # queued, never handed out
    get_key(q)
    q.done("a")
    with pytest.raises(ValueError):
        q.done("a")  # twice
    assert q.metrics().processed == 1


def test_get_rejects_a_negative_timeout() -> None:
    with pytest.raises(ValueError):
        WorkQueue[str]().get(timeout=-1)


def test_unhashable_key_raises_type_error() -> None:
    q: WorkQueue[Hashable] = WorkQueue()
    with pytest.raises(TypeError):
        q.add(["not", "hashable"])  # type: ignore[arg-type]


# -- default_rate_limiters.go ---------------------------------------------------


def test_exponential_backoff_doubles_from_5ms_and_caps_at_1000s() -> None:
    rl: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [rl.when("k") for _ in range(21)]

    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[:18] == [0.005 * 2**n for n in range(18)]  # 17th retry: 655.36 s
    assert delays[18:] == [1000.0, 1000.0, 1000.0]  # 0.005 * 2**18 = 1310.72 s > cap
    assert rl.num_requeues("k") == 21
    assert rl.num_requeues("other") == 0


def test_backoff_is_per_key_and_forget_resets_it() -> None:
    rl: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1.0, max_delay=10.0)
    assert [rl.when("a") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert rl.when("b") == 1.0
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == 1.0
    assert rl.num_requeues("b") == 1


def test_backoff_survives_huge_failure_counts() -> None:
    rl: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    for _ in range(1100):  # 2.0**1024 overflows a float
        last = rl.when("k")
    assert last == 1000.0


def test_rate_limiters_reject_bad_parameters() -> None:
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter(base_delay=-1.0)
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter(max_delay=float("nan"))
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0)
    with pytest.raises(ValueError):
        BucketRateLimiter(burst=0)


def test_bucket_allows_a_burst_then_spaces_retries_at_qps() -> None:
    now = [100.0]
    rl: BucketRateLimiter[str] = BucketRateLimiter(qps=10.0, burst=2, clock=lambda: now[0])
    assert [rl.when("x") for _ in range(4)] == [0.0, 0.0, 0.1, 0.2]
    now[0] += 1.0  # refills 10 tokens, capped at burst; 2 were borrowed
    assert rl.when("y") == 0.0
    assert rl.num_requeues("x") == 0


def test_max_of_takes_the_longest_delay_and_forgets_everywhere() -> None:
    now = [0.0]
    slow: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1.0, 100.0)
    bucket: BucketRateLimiter[str] = BucketRateLimiter(qps=1.0, burst=1, clock=lambda: now[0])
    rl = MaxOfRateLimiter(slow, bucket)
    assert [rl.when("k") for _ in range(3)] == [1.0, 2.0, 4.0]
    assert rl.num_requeues("k") == 3
    rl.forget("k")
    assert slow.num_requeues("k") == 0
    assert rl.when("k") == 3.0  # the bucket now dominates: 3 tokens borrowed at 1 qps


def test_default_controller_rate_limiter_matches_client_go() -> None:
    rl = default_controller_rate_limiter()
    assert [rl.when("k") for _ in range(3)] == [0.005, 0.01, 0.02]
    exp, bucket = rl.limiters
    assert isinstance(exp, ItemExponentialFailureRateLimiter)
    assert (exp.base_delay, exp.max_delay) == (0.005, 1000.0)
    assert isinstance(bucket, BucketRateLimiter)
    assert (bucket.qps, bucket.burst) == (10.0, 100)


# -- rate_limiting_queue.go -----------------------------------------------------


def test_add_rate_limited_counts_requeues_until_forget() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(base_delay=0.0))
    q.add_rate_limited("a")  # zero delay: added at once
    assert len(q) == 1
    q.add_rate_limited("a")  # already queued: deduplicated
    assert len(q) == 1
    assert q.num_requeues("a") == 2
    m = q.metrics()
    assert (m.retries, m.adds, m.deduplicated) == (2, 1, 1)

    q.forget("a")
    assert q.num_requeues("a") == 0
    assert len(q) == 1  # forget resets the backoff only; the key stays queued
    q.shut_down()


def test_add_rate_limited_waits_for_the_limiters_delay() -> None:
    class Fixed:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def when(self, item: str) -> float:
            self.asked.append(item)
            return 0.05

        def forget(self, item: str) -> None:
            pass

        def num_requeues(self, item: str) -> int:
            return len(self.asked)

    limiter = Fixed()
    q: RateLimitingQueue[str] = RateLimitingQueue(limiter, name="rl-delay")
    start = time.monotonic()
    q.add_rate_limited("a")
    assert get_key(q) == "a"
    assert time.monotonic() - start >= 0.05
    assert limiter.asked == ["a"]
    q.shut_down()


def test_default_rate_limiting_queue_uses_the_controller_limiter() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    assert isinstance(q.rate_limiter, MaxOfRateLimiter)
    q.shut_down()


# -- delaying_queue.go ----------------------------------------------------------


def test_add_after_delivers_no_earlier_than_the_delay() -> None:
    q: DelayingQueue[str] = DelayingQueue("delay")
    start = time.monotonic()
    q.add_after("a", 0.1)
    assert get_key(q) == "a"
    assert time.monotonic() - start >= 0.1
    m = q.metrics()
    assert (m.retries, m.adds, m.waiting) == (1, 1, 0)
    q.shut_down()


def test_add_after_keeps_the_earlier_ready_time() -> None:
    q: DelayingQueue[str] = DelayingQueue("earlier")
    q.add_after("a", 3600)
    assert (len(q), q.metrics().waiting) == (0, 1)  # an hour away: not delivered
    q.add_after("a", 0.01)  # moves it earlier
    assert q.metrics().waiting == 1  # still one entry per key
    assert get_key(q) == "a"
    assert q.metrics().waiting == 0  # the hour-long entry was superseded, not left behind
    q.add_after("a", 3600)
    q.add_after("a", 7200)  # later: ignored
    assert q.metrics().waiting == 1
    q.shut_down()


def test_add_after_is_deduplicated_against_a_queued_key() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add("a")
    q.add_after("a", 0.01)
    m = wait_until(q, lambda m: m.waiting == 0)
    assert (m.adds, m.deduplicated, m.queued) == (1, 1, 1)
    assert get_key(q) == "a"
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    q.shut_down()


def test_add_after_with_no_delay_adds_at_once_and_starts_no_thread() -> None:
    q: DelayingQueue[str] = DelayingQueue("nodelay")
    q.add_after("a", 0)
    q.add_after("b", -5)
    assert len(q) == 2
    assert not thread_alive("workqueue-nodelay-waiting")
    with pytest.raises(ValueError):
        q.add_after("c", float("nan"))
    q.shut_down()


def test_shut_down_drops_waiting_keys_and_joins_the_thread() -> None:
    q: DelayingQueue[str] = DelayingQueue("joins")
    q.add_after("a", 3600)
    assert thread_alive("workqueue-joins-waiting")
    q.shut_down()
    assert not thread_alive("workqueue-joins-waiting")
    assert q.metrics().waiting == 0
    q.add_after("b", 0)  # ignored after shutdown, and not counted as a retry
    assert q.metrics().retries == 1
    assert q.get(timeout=WAIT) == (None, True)


def test_delayed_keys_fire_in_ready_time_order() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("late", 0.2)
    q.add_after("early", 0.05)
    q.add_after("middle", 0.1)
    assert [get_key(q) for _ in range(3)] == ["early", "middle", "late"]
    q.shut_down()


# -- shutdown -------------------------------------------------------------------


def test_add_wakes_a_blocked_getter() -> None:
    q: WorkQueue[str] = WorkQueue()
    got: list[tuple[str | None, bool]] = []
    t = threading.Thread(target=lambda: got.append(q.get()))  # no timeout to fall back on
    t.start()
    time.sleep(0.05)  # let it block; the outcome is the same if it has not yet
    q.add("a")
    t.join(WAIT)
    woken = not t.is_alive()
    q.shut_down()  # release it if the add failed to
    t.join(WAIT)
    assert woken
    assert got == [("a", False)]


def test_shut_down_wakes_every_blocked_getter() -> None:
    q: WorkQueue[str] = WorkQueue()
    results: list[tuple[str | None, bool]] = []
    lock = threading.Lock()

    def getter() -> None:
        r = q.get()  # no timeout: only shut_down can release it
        with lock:
            results.append(r)

    threads = [threading.Thread(target=getter) for _ in range(5)]
    for t in threads:
        t.start()
    time.sleep(0.05)  # let them block; the outcome is the same if they have not yet
    q.shut_down()
    for t in threads:
        t.join(WAIT)
    assert not any(t.is_alive() for t in threads)
    assert results == [(None, True)] * 5
    assert q.shutting_down()


def test_after_shut_down_queued_keys_are_still_handed_out_then_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.shut_down()
    q.add("c")  # ignored
    assert get_key(q) == "a"
    assert get_key(q) == "b"
    assert q.get(timeout=WAIT) == (None, True)
    assert q.get(timeout=WAIT) == (None, True)  # and stays so
    assert q.metrics().adds == 2


def test_shut_down_with_drain_waits_for_processing_to_finish() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert get_key(q) == "a"
    result: list[bool] = []
    returned = threading.Event()

    def drain() -> None:
        result.append(q.shut_down_with_drain(timeout=WAIT * 3))
        returned.set()

    t = threading.Thread(target=drain)
    t.start()
    wait_until(q, lambda m: m.shutting_down)
    q.add("b")  # ignored: shutting down
    assert not returned.wait(0.1)  # cannot return while "a" is processing
    q.done("a")
    assert returned.wait(WAIT)
    t.join(WAIT)
    assert result == [True]
    assert q.get(timeout=WAIT) == (None, True)


def test_drain_also_waits_for_a_key_requeued_by_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert get_key(q) == "a"
    q.add("a")  # dirty while processing: done will re-queue it
    returned = threading.Event()

    def drain() -> None:
        q.shut_down_with_drain(timeout=WAIT * 3)
        returned.set()

    t = threading.Thread(target=drain)
    t.start()
    wait_until(q, lambda m: m.shutting_down)

    q.done("a")  # re-queued, even though shutting down
    assert not returned.wait(0.1)
    assert get_key(q) == "a"  # the worker drains it
    q.done("a")
    assert returned.wait(WAIT)
    t.join(WAIT)


def test_drain_times_out_or_is_cut_short_by_shut_down() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    get_key(q)
    assert q.shut_down_with_drain(timeout=0.01) is False

    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(q.shut_down_with_drain()))
    t.start()
    time.sleep(0.05)  # let it wait; the result is the same either way
    q.shut_down()  # client-go: forces a drain in progress to stop waiting
    t.join(WAIT)
    assert not t.is_alive()
    assert result == [False]  # "a" was still processing


def test_drain_returns_at_once_when_nothing_is_processing() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")  # queued but not handed out: client-go does not wait for it
    assert q.shut_down_with_drain(timeout=WAIT) is True
    assert get_key(q) == "a"


# -- observability --------------------------------------------------------------


def test_metrics_snapshot_is_frozen_and_listeners_see_changes() -> None:
    q: WorkQueue[str] = WorkQueue("panel")
    seen: list[QueueMetrics] = []

    def broken(_: QueueMetrics) -> None:
        raise RuntimeError("a broken widget must not break the controller")

    q.add_listener(broken)
    q.add_listener(seen.append)
    q.add("a")
    get_key(q)
    q.done("a")
    q.remove_listener(seen.append)
    q.add("b")

    assert [(m.depth, m.processing, m.processed) for m in seen] == [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    assert seen[0].name == "panel"
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen[0].depth = 5  # type: ignore[misc]
    with pytest.raises(ValueError):
        q.remove_listener(seen.append)


# -- concurrency ----------------------------------------------------------------


def test_many_workers_never_share_a_key_and_process_every_last_add() -> None:
    """4 workers, 2 producers, 10k adds over 200 keys.

    Each producer bumps a per-key version *before* adding; each worker reads
    the version *after* get. client-go's guarantee is that every add is
    followed by a get, so the last version a worker saw for a key must equal
    its final version. Meanwhile no key may be in two workers at once.
    """
    q: WorkQueue[str] = WorkQueue("stress")
    keys = [f"ns/obj-{i}" for i in range(200)]
    adds_per_producer = 5_000
    lock = threading.Lock()
    version = dict.fromkeys(keys, 0)
    seen_version = dict.fromkeys(keys, -1)
    in_flight: set[str] = set()
    overlaps: list[str] = []
    gets = [0]

    def producer(seed: int) -> None:
        rnd = random.Random(seed)
        for i in range(adds_per_producer):
            key = rnd.choice(keys)
            with lock:
                version[key] += 1
            q.add(key)
            if i % 10 == 0:
                time.sleep(0)  # yield, so adds interleave with gets and dones

    def worker() -> None:
        while True:
            key, shutdown = q.get(timeout=WAIT * 3)
            if shutdown:
                return
            assert key is not None
            with lock:
                if key in in_flight:
                    overlaps.append(key)
                in_flight.add(key)
                seen_version[key] = max(seen_version[key], version[key])
                gets[0] += 1
            time.sleep(0)  # yield, so other workers run while this key is held
            with lock:
                in_flight.discard(key)
            q.done(key)

    workers = [threading.Thread(target=worker) for _ in range(4)]
    producers = [threading.Thread(target=producer, args=(seed,)) for seed in (1, 2)]
    for t in workers + producers:
        t.start()
    for t in producers:
        t.join(60)
    assert not any(t.is_alive() for t in producers)
    q.shut_down()  # workers still drain what is queued, then see shutdown
    for t in workers:
        t.join(60)
    assert not any(t.is_alive() for t in workers)

    assert overlaps == []
    assert sum(version.values()) == 2 * adds_per_producer
    stale = {k: (seen_version[k], version[k]) for k in keys if version[k] and seen_version[k] != version[k]}
    assert stale == {}
    m = q.metrics()
    assert (m.depth, m.queued, m.processing) == (0, 0, 0)
    assert m.adds + m.deduplicated == 2 * adds_per_producer
    assert m.adds == m.processed == gets[0]
    assert m.requeued_while_processing <= m.adds
    assert m.deduplicated > 0  # 10k adds over 200 keys must have collided
