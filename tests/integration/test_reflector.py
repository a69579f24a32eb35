"""The reflector against the real API server: paged LISTs, and faults through the fault proxy.

The fault proxy (:class:`~operatorlab.faults.proxy.FaultProxy`) sits between the
reflector and kube-apiserver and answers chosen requests itself (a 429) or cuts
them (a watch stream dropped at once); everything else is the real server's
answer. Timings are asserted against client-go's backoff (800 ms doubling, up to
100 % jitter on top): lower bounds from the base steps, upper bounds from the
jittered ones.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from operatorlab.cluster import process
from operatorlab.controllers.listwatch import TENANTS, ListWatch, Reflector, WatchEvent
from operatorlab.controllers.reflector_policy import Attempt, Outcome, RequestFailed, decide
from operatorlab.faults.proxy import FaultProxy
from operatorlab.wait import eventually
from tests.unit.scripted import RecordingSink

pytestmark = pytest.mark.xdist_group("tenant-operator")

WATCH_PATH = r"/apis/hedronite\.io/v1/tenants$"


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[FaultProxy]:
    started = FaultProxy(Path(os.environ["KUBECONFIG"]), tmp_path, name="reflector").start()
    yield started
    started.stop()


def through(proxy: FaultProxy) -> client.ApiClient:
    """A client that talks to the API server through the proxy, without urllib3's own retries."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(proxy.kubeconfig), client_configuration=configuration)
    configuration.retries = False  # urllib3 would otherwise retry a cut request up to 3 times by itself
    return client.ApiClient(configuration)


def watch_requests(proxy: FaultProxy, since: float) -> list[dict]:
    return [r for r in proxy.stats()["requests"] if r["watch"] and "tenants" in r["path"] and r["t"] >= since]


def test_a_small_page_size_lists_in_pages_and_resource_version_0_ignores_the_limit(api_client, tenant_set) -> None:
    names = [tenant_set.name(i) for i in range(5)]
    for name in names:
        tenant_set.create(name, "1")
    custom = client.CustomObjectsApi(api_client)
    # The watch cache serves resourceVersion "0" whole, whatever the limit (k8s.io/apiserver computeListLimit),
    # and as it is: possibly a moment behind the Tenants just created, so ask until it has them all ...
    def from_cache() -> dict | None:
        body = TENANTS.list(custom, resource_version="0", limit=2)
        return body if len(body["items"]) >= 5 else None

    cached = eventually(from_cache, timeout=10, message="the watch cache caught up")
    assert not cached["metadata"].get("continue")
    # ... while a consistent read ("") honours it, with a continue token for the rest.
    first = TENANTS.list(custom, limit=2)
    assert len(first["items"]) == 2 and first["metadata"]["continue"]

    timeline: list[WatchEvent] = []
    sink = RecordingSink()
    reflector = Reflector.for_resource(api_client, TENANTS, sink, page_size=2, first_list_resource_version="",
                                       watch_timeout=60)
    reflector.on_event(timeline.append)
    with_pages = reflector.start()
    try:
        assert with_pages.wait_for_sync(30)
    finally:
        reflector.stop()
    listed, resource_version = sink.lists[0]
    assert set(listed) >= set(names) and resource_version
    assert reflector.list_requests == (len(listed) + 1) // 2 >= 3  # pages of 2: ceil(n / 2) requests
    assert f"in {reflector.list_requests} page(s)" in timeline[0].detail


def test_the_servers_own_410_and_too_large_answers_are_classified_as_the_rules_expect(api_client) -> None:
    lw = ListWatch(api_client, TENANTS)
    with pytest.raises(RequestFailed) as raised:  # a state the server has not reached: it waits ~3 s, then says so
        lw.list(resource_version="999999999", limit=0, continue_token="", timeout=10)
    too_large = raised.value.failure
    assert too_large.code == 504 and too_large.causes == ("ResourceVersionTooLarge",)
    assert decide(Outcome(Attempt.LIST, too_large, resource_version="999999999")).row == 3
    received = lw.watch(resource_version="1", timeout=10).events()  # long compacted away
    try:
        first = next(received)
    finally:
        received.close()
    assert first["type"] == "ERROR" and first["object"]["reason"] == "Expired" and first["object"]["code"] == 410


def test_429_on_the_watch_backs_off_and_rewatches_from_the_same_version(proxy, tenant_set) -> None:
    tenant_set.create(tenant_set.name("rv"), "1")
    timeline: list[WatchEvent] = []
    sink = RecordingSink()
    reflector = Reflector.for_resource(through(proxy), TENANTS, sink, watch_timeout=60)
    reflector.on_event(timeline.append)
    reflector.start()
    try:
        assert reflector.wait_for_sync(30)
        eventually(lambda: reflector.watches == 1, message="first watch open")
        rv = reflector.resource_version
        proxy.set_rules([{"action": "status", "status": 429, "method": "GET", "path": WATCH_PATH, "watch": True,
                          "times": 2}])
        mark = len(timeline)
        assert reflector.break_watch()
        eventually(lambda: reflector.watches == 2, timeout=20, message="watching again after two 429s")
    finally:
        reflector.stop()
    after = [e for e in timeline[mark:] if e.type in ("ERROR", "BACKOFF", "WATCH", "LIST")]
    assert [e.type for e in after] == ["ERROR", "BACKOFF", "ERROR", "BACKOFF", "WATCH"], [
        (e.type, e.detail) for e in after]
    assert all(e.code == 429 for e in after if e.type == "ERROR")
    assert after[-1].resource_version == rv  # from the same resourceVersion ...
    assert reflector.lists == 1 and len(sink.lists) == 1  # ... and no relist
    # two backoff steps: [0.8, 1.6) then [1.6, 3.2) seconds (and a little for the requests)
    waited = after[-1].time - after[0].time
    assert waited + 0.05 >= 0.8 + 1.6 and waited < 1.6 + 3.2 + 2, waited


def test_a_proxy_that_cuts_every_watch_at_once_causes_no_hot_loop(proxy, tenant_set) -> None:
    tenant_set.create(tenant_set.name("cut"), "1")
    reflector = Reflector.for_resource(through(proxy), TENANTS, RecordingSink(), watch_timeout=60)
    reflector.start()
    try:
        assert reflector.wait_for_sync(30)
        eventually(lambda: reflector.watches == 1, message="first watch open")
        started = time.time()
        proxy.set_rules([{"action": "cut", "after": 0, "path": WATCH_PATH, "watch": True}])  # drops the open one too
        time.sleep(10)
        requests = watch_requests(proxy, started)
        decisions = list(reflector.decisions)
    finally:
        reflector.stop()
    # Each cut stream is very short (under 1 s, no event): back off, relist. The base steps 0.8, 1.6, 3.2
    # and 6.4 s add up to 12 s, so in 10 s at most 4 watches can start (the one right after the cut
    # included); a loop without backoff would have sent hundreds.
    assert 2 <= len(requests) <= 4, requests
    assert reflector.backoffs >= 2
    assert {d.row for d in decisions[-3:]} <= {2, 6, 10}  # very short watch (or its request cut): relist after backoff


def test_a_proxy_port_taken_before_the_proxy_binds_it_is_chosen_again(tmp_path: Path, monkeypatch) -> None:
    """Between choosing its port and binding it, another process may take it (a busy test run)."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        choices = iter([taken])
        real_free_port = process.free_port
        monkeypatch.setattr(process, "free_port", lambda: next(choices, None) or real_free_port())
        proxy = FaultProxy(Path(os.environ["KUBECONFIG"]), tmp_path, name="squatted").start()
        try:
            assert proxy.port != taken
            assert "address already in use" in proxy.log_path.read_text().lower()
            assert proxy.stats() is not None
        finally:
            proxy.stop()
