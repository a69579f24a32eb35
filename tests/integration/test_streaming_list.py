"""A streaming list (sendInitialEvents) on the real API server: the reflector's watch_list mode and lesson 13's measure.

The reflector talks through the fault proxy, whose record of each request (its query included)
shows what was sent: one WATCH with the streaming list's parameters and no LIST; and, when the
proxy refuses that WATCH with a 400 as an API server without ``WatchList`` would, one LIST at once.
The objects are KopfPeerings in a namespace of the test's own, which no operator of the session watches.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from operatorlab.controllers import sync_cost
from operatorlab.controllers.listwatch import ListWatch, Reflector, Resource
from operatorlab.exercises.watching import without_retries
from operatorlab.faults.proxy import FaultProxy
from operatorlab.wait import eventually
from tests.unit.scripted import RecordingSink


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[FaultProxy]:
    started = FaultProxy(Path(os.environ["KUBECONFIG"]), tmp_path, name="streaming").start()
    yield started
    started.stop()


def peering(name: str) -> dict:
    return {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": name}}


def requests_to(proxy: FaultProxy, namespace: str) -> list[dict]:
    return [r for r in proxy.stats()["requests"] if f"/namespaces/{namespace}/kopfpeerings" in r["path"]]


def test_one_watch_streams_the_state_then_goes_on_and_a_refusal_gets_a_list(proxy, custom, namespace) -> None:
    for i in range(5):
        custom.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", peering(f"p-{i}"))
    resource = Resource("kopf.dev", "v1", "kopfpeerings", namespace=namespace)
    sink = RecordingSink()
    reflector = Reflector(ListWatch(without_retries(proxy.kubeconfig), resource), sink, watch_list=True,
                          watch_timeout=60).start()
    try:
        assert reflector.wait_for_sync(30)
        assert sink.lists[0][0] == [f"p-{i}" for i in range(5)]
        custom.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", peering("later"))
        eventually(lambda: any(e.name == "later" for e in sink.applied), timeout=15, message="the later one applied")
        sent = requests_to(proxy, namespace)
        assert [r["watch"] for r in sent] == [True], sent  # the same stream: no LIST, no second WATCH
        query = sent[0]["query"]
        assert (query["sendInitialEvents"], query["resourceVersionMatch"], query["allowWatchBookmarks"]) == (
            "true", "NotOlderThan", "true")
        assert "resourceVersion" not in query  # a consistent read
        assert sink.lists[0][1] and reflector.streamed_lists == 1 and reflector.list_requests == 0
    finally:
        reflector.stop(10)

    refused = proxy.set_rules([{"action": "status", "status": 400, "method": "GET", "watch": True,
                                "path": f"/namespaces/{namespace}/kopfpeerings$", "times": 1}])
    assert refused["rules"]
    since = len(requests_to(proxy, namespace))
    fallback = RecordingSink()
    reflector = Reflector(ListWatch(without_retries(proxy.kubeconfig), resource), fallback, watch_list=True,
                          watch_timeout=60).start()
    try:
        assert reflector.wait_for_sync(30)
        assert fallback.lists[0][0] == ["later", *(f"p-{i}" for i in range(5))]  # a LIST is in key order
        sent = requests_to(proxy, namespace)[since:]
        assert [(r["watch"], r["status"]) for r in sent[:2]] == [(True, 400), (False, 200)]  # at once, no backoff
        assert reflector.backoffs == 0 and reflector.streamed_lists == 0
    finally:
        reflector.stop(10)


def test_a_list_and_a_streaming_list_sync_to_the_same_objects(api_client, core, namespace) -> None:
    sync_cost.fill(core, namespace, 20, payload_bytes=64)

    def names() -> set[str]:
        return {i.metadata.name for i in core.list_namespaced_config_map(namespace).items}

    # The root CA is published a moment after the namespace is made: wait, so nothing changes between the syncs.
    eventually(lambda: "kube-root-ca.crt" in names(), timeout=30, message="the root CA published")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    by_list = sync_cost.measure(api_client, path, "LIST")
    streamed = sync_cost.measure(api_client, path, "streaming list", traced=True)
    assert by_list.objects == streamed.objects == 21  # and the namespace's root CA
    assert by_list.resource_version and streamed.resource_version
    assert streamed.client_peak_mib > 0 and by_list.seconds > 0
    with pytest.raises(ValueError, match="mode must be one of"):
        sync_cost.measure(api_client, path, "paged")
    with pytest.raises(client.ApiException):
        sync_cost.measure(api_client, "/api/v1/namespaces/no-such-namespace-here/nonsense", "streaming list")
