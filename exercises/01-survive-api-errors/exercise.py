"""Lesson 01: a polling loop that survives a failing API server, graded with real faults.

The learner's ``run_polling(tick, stop, interval=..., max_delay=...)`` calls ``tick`` (one
tick of the lesson's ``PollingController``: LIST the Tenants, reconcile each) every
``interval`` seconds until ``stop`` is set. The check runs it on a thread, the controller
talking to the real API server through the fault proxy, and fails the LIST on purpose:
a 500, an answer cut off mid-response, a 429 with ``Retry-After``, then a 503 lasting 1.5
seconds. The loop must keep going, wait longer while the failures last (the proxy counts
the LISTs), come back to its interval once they end, still reconcile a Tenant created
afterwards, and return promptly when told to stop, even in the middle of a wait.

The check's client does not retry by itself (urllib3's retries are off; by default urllib3
repeats a GET answered 429 or 503 with a ``Retry-After`` header, hiding it), so
every error reaches the loop.
"""

from __future__ import annotations

import functools
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from kubernetes import client

from operatorlab import tenants
from operatorlab.controllers.polling import PollingController
from operatorlab.controllers.reconciler import TenantReconciler
from operatorlab.exercises import Exercise
from operatorlab.exercises.watching import without_retries
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check, converges, loop_ended

# Why the learner's loop stopped running, in words (empty while it runs).
_ended = functools.partial(
    loop_ended, returned="your loop returned although stop was not set: a polling loop runs until it is told to stop")

INTERVAL = 0.2  # seconds between ticks: short, so that hammering shows in a few seconds
MAX_DELAY = 1.0  # the longest wait the loop may choose after failures in a row
OUTAGE = 1.5  # seconds every LIST answers 503
RETRY_AFTER = 1.0
LIST = {"method": "GET", "path": "/tenants$", "watch": False}


class SurviveApiErrors(Exercise):
    lesson = "01"
    title = "run_polling: keep ticking through API errors, back off, stop when told"
    subject = "run_polling"
    budget = 3.0
    xdist_group = "tenant-operator"  # it reconciles Tenants: no other Tenant operator may run beside it
    hints = (
        "What happens to your loop when tick() raises? And what would a thousand copies of it do to a "
        "server that is already failing?",
        "Catch every error a tick can raise (an ApiException, but also a connection cut off: urllib3's "
        "errors), wait longer after each failure in a row, honour a 429's Retry-After header, and go back "
        "to the interval after a tick that works. Wait on the stop event, not with time.sleep.",
        "Shape: delay = interval; loop while not stop.is_set(): try tick(); on any Exception double delay "
        "(capped at max_delay) and wait max(delay, Retry-After of an ApiException); on success reset delay "
        "and wait interval; stop.wait(wait).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        run_polling = learner.run_polling
        name = f"ex01s-{uuid.uuid4().hex[:6]}"
        workdir = Path(tempfile.mkdtemp(prefix="ex01s-"))
        proxy = FaultProxy(self.kubeconfig_path, workdir, name="ex01s").start()
        through = without_retries(proxy.kubeconfig)
        poller = PollingController(through, interval=INTERVAL, sweep_orphans=False,
                                   reconciler=_OnlyTenant(name, through))
        ticks: list[tuple[float, str]] = []  # (time.time(), "ok" or the error), every tick your loop ran
        stop = threading.Event()
        ended: list[BaseException | None] = []

        def tick() -> None:
            try:
                poller.tick()
            except Exception as e:
                ticks.append((time.time(), type(e).__name__))
                raise
            ticks.append((time.time(), "ok"))

        def run() -> None:
            try:
                run_polling(tick, stop, interval=INTERVAL, max_delay=MAX_DELAY)
                ended.append(None)
            except BaseException as e:  # noqa: BLE001 - the learner's loop died: that is the evidence
                ended.append(e)

        thread = threading.Thread(target=run, name="ex01s-learner", daemon=True)
        tenant_api = tenants.Tenants(self.api)
        try:
            thread.start()
            first = converges(lambda: any(t[1] == "ok" for t in ticks), budget=5, give_up=lambda: bool(ended))
            if ended and isinstance(ended[0], NotImplementedError):
                raise ended[0]
            if not first.ok:
                yield Check("your loop ticks", False, _ended(ended) or f"no tick succeeded in 5 s; ticks: {ticks}")
                return
            yield self._survives(proxy, ticks, ended, thread, "a 500 on the LIST: the loop carries on",
                                 {"action": "status", "status": 500, **LIST, "times": 1})
            yield self._survives(proxy, ticks, ended, thread,
                                 "a connection cut off mid-answer (no status at all): the loop carries on",
                                 {"action": "cut", "after": 0, **LIST, "times": 1})
            yield self._retry_after(proxy, thread, ended)
            yield from self._outage(proxy, ticks, thread, ended)
            yield self._reconciles(tenant_api, name, thread, ended)
            yield self._stops(proxy, stop, thread, ended)
        finally:
            stop.set()
            proxy.stop()
            poller.api.close()
            tenant_api.delete(name)

    def _survives(self, proxy: FaultProxy, ticks: list[tuple[float, str]], ended: list, thread: threading.Thread,
                  name: str, rule: dict) -> Check:
        if not thread.is_alive():
            return Check(name, False, _ended(ended) or "your loop is not running")
        since = time.time()
        proxy.set_rules([rule])
        hit = converges(lambda: _hits(proxy, since), budget=3, give_up=lambda: not thread.is_alive())
        recovered = converges(lambda: hit.ok and any(t > hit.last[0] and what == "ok" for t, what in ticks),
                              budget=self.budget + MAX_DELAY, give_up=lambda: not thread.is_alive())
        proxy.clear()
        failed = [what for t, what in ticks if hit.ok and t >= hit.last[0] - 0.5 and what != "ok"]
        if recovered.ok and thread.is_alive():
            return Check(name, True, f"the tick raised {', '.join(failed) or 'an error'}; the next tick "
                                     f"succeeded {recovered.seconds:.1f} s later")
        return Check(name, False, _ended(ended) or f"no tick succeeded after the fault; ticks since: {failed}")

    def _retry_after(self, proxy: FaultProxy, thread: threading.Thread, ended: list) -> Check:
        name = f"a 429 with Retry-After: {RETRY_AFTER:g}: the next LIST waits at least that long"
        if not thread.is_alive():
            return Check(name, False, _ended(ended) or "your loop is not running")
        since = time.time()
        proxy.set_rules([{"action": "status", "status": 429, "retry_after": RETRY_AFTER, **LIST, "times": 1}])
        hit = converges(lambda: _hits(proxy, since), budget=3, give_up=lambda: not thread.is_alive())
        after = converges(lambda: [t for t in _list_times(proxy) if hit.ok and t > hit.last[0] + 0.05],
                          budget=RETRY_AFTER + MAX_DELAY + 1, give_up=lambda: not thread.is_alive())
        proxy.clear()
        if not (hit.ok and after.ok):
            return Check(name, False, _ended(ended) or "no LIST after the 429")
        gap = after.last[0] - hit.last[0]
        return Check(name, gap >= RETRY_AFTER - 0.1 and thread.is_alive(),
                     f"the next LIST came {gap:.2f} s after the 429 (the server asked for {RETRY_AFTER:g} s)")

    def _outage(self, proxy: FaultProxy, ticks: list[tuple[float, str]], thread: threading.Thread,
                ended: list) -> list[Check]:
        name = f"a 503 lasting {OUTAGE:g} s: fewer and fewer LISTs, never stopping"
        back = f"after the outage: back to a tick every {INTERVAL:g} s"
        if not thread.is_alive():
            not_running = _ended(ended) or "your loop is not running"
            return [Check(name, False, not_running), Check(back, False, not_running)]
        started = time.time()
        proxy.set_rules([{"action": "status", "status": 503, **LIST}])
        time.sleep(OUTAGE)
        proxy.clear()
        ended_at = time.time()
        sent = [t - started for t in _list_times(proxy) if started <= t <= ended_at]
        hammering = len(sent) > 5  # every 0.2 s would be 7 or 8; doubling from 0.2 s to 1 s is 3
        outage = Check(name, len(sent) >= 2 and not hammering and thread.is_alive(),
                       f"{len(sent)} LISTs in {OUTAGE:g} s, at " + ", ".join(f"{t:.1f}" for t in sent)
                       + (f" s: without backing off that is one every {INTERVAL:g} s" if hammering else " s"))
        recovered = converges(lambda: [t for t, what in ticks if t > ended_at and what == "ok"],
                              budget=MAX_DELAY + 1, give_up=lambda: not thread.is_alive())
        if not recovered.ok:
            return [outage, Check(back, False, _ended(ended) or f"no tick succeeded within {MAX_DELAY + 1:g} s")]
        window = 0.8
        time.sleep(window)
        first_ok = recovered.last[0]
        steady = [t for t, what in ticks if first_ok < t <= first_ok + window and what == "ok"]
        return [outage, Check(back, len(steady) >= 2,
                              f"{len(steady)} ticks in the {window:g} s after the first success "
                              f"({round(window / INTERVAL)} expected at {INTERVAL:g} s)")]

    def _reconciles(self, tenant_api: tenants.Tenants, name: str, thread: threading.Thread, ended: list) -> Check:
        check = "a Tenant created after all that is reconciled: its namespace and quota appear"
        if not thread.is_alive():
            return Check(check, False, _ended(ended) or "your loop is not running")
        tenant_api.create(name, cpu_quota="1")
        done = converges(lambda: tenant_api.quota(name), budget=self.budget, give_up=lambda: not thread.is_alive())
        return Check(check, done.ok, f"tenant-{name} and its quota in {done.seconds:.1f} s" if done.ok
                     else _ended(ended) or f"not within {self.budget:g} s: {done.last!r}")

    def _stops(self, proxy: FaultProxy, stop: threading.Event, thread: threading.Thread, ended: list) -> Check:
        name = "stop: your loop returns within a second, even in the middle of a long wait"
        if not thread.is_alive():
            return Check(name, False, _ended(ended) or "your loop is not running")
        since = time.time()
        proxy.set_rules([{"action": "status", "status": 429, "retry_after": 5, **LIST, "times": 1}])
        converges(lambda: _hits(proxy, since), budget=3, give_up=lambda: not thread.is_alive())
        time.sleep(0.2)  # now waiting out the 5 s the server asked for
        stopped = time.monotonic()
        stop.set()
        thread.join(1.0)
        if thread.is_alive():
            return Check(name, False, "still running 1 s after stop was set, during a 5 s wait: wait on the "
                                      "event (stop.wait), which returns as soon as it is set")
        if ended and ended[0] is not None:
            return Check(name, False, _ended(ended))
        return Check(name, True, f"returned {time.monotonic() - stopped:.2f} s after stop was set")


class _OnlyTenant(TenantReconciler):
    """The Tenant reconcile, for the check's own Tenant only (the cluster may hold others)."""

    def __init__(self, name: str, api_client: client.ApiClient) -> None:
        super().__init__(api_client)
        self.only = name

    def sync(self, name: str, tenant: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return super().sync(name, tenant) if name == self.only else {}


def _hits(proxy: FaultProxy, since: float) -> list[float]:
    """When the proxy's rules answered since ``since`` (unix times), all rules together, oldest first."""
    return sorted(t for times in proxy.stats()["hits"].values() for t in times if t >= since)


def _list_times(proxy: FaultProxy) -> list[float]:
    """When the LISTs of Tenants reached the proxy (unix times)."""
    return [r["t"] for r in proxy.stats()["requests"]
            if r["method"] == "GET" and r["path"].endswith("/tenants") and not r["watch"]]


