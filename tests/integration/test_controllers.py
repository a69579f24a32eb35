"""The hand-written controllers on the real cluster: convergence, API cost, dropped watches, 410 Gone.

Every number asserted is measured: the controllers' own request counts come
from their CountingApiClient, the server's from its /metrics.
"""

from __future__ import annotations

import itertools
import time

import kopf
import pytest
from kubernetes import client

from operatorlab.controllers.informer import InformerController
from operatorlab.controllers.listwatch import TENANTS, ListWatchController, Reflector, WatchEvent
from operatorlab.controllers.metrics import ApiRequest, read_apiserver_requests
from operatorlab.controllers.polling import PollingController
from operatorlab.controllers.reconciler import TenantReconciler
from operatorlab.controllers.workqueue import ItemExponentialFailureRateLimiter
from operatorlab.operators import load_module
from operatorlab.wait import eventually
from tests.unit.scripted import RecordingSink

pytestmark = pytest.mark.xdist_group("tenant-operator")

namespace_of = load_module("tenant").namespace_name  # the operator's own rule: tenant-<name>

N = 10


def touches(request: ApiRequest, names: list[str]) -> bool:
    """The request is about one of these Tenants' namespaces or what is in them."""
    spaces = {namespace_of(n) for n in names}
    return request.namespace in spaces or (request.resource == "namespaces" and request.name in spaces)


def writes_for(controller, names: list[str]) -> list[ApiRequest]:
    return [r for r in controller.api.requests() if r.is_write and touches(r, names)]


# -- polling ----------------------------------------------------------------------------


def test_polling_converges_and_costs_one_list_plus_two_gets_per_tenant_per_tick(api_client, tenant_set) -> None:
    names = [tenant_set.name(i) for i in range(N)]
    for name in names:
        tenant_set.create(name, "2")
    controller = PollingController(api_client, interval=1.0)

    first = controller.tick()
    assert first.failed == 0
    tenant_set.wait_converged(names, "2", timeout=10)  # converged by that one tick
    assert len([r for r in writes_for(controller, names) if r.verb == "create"]) == 2 * N

    server_before, server_before_time = read_apiserver_requests(api_client), time.time()
    steady = controller.tick()
    server_window = read_apiserver_requests(api_client) - server_before

    # Steady state: nothing to change, still a LIST plus a GET of namespace and quota per Tenant,
    # plus the orphan sweep's LIST of namespaces. (The cluster may hold other tests' leftover
    # Tenants: they count too; one being deleted costs a DELETE of its namespace instead.)
    assert steady.reconciled >= N and steady.failed == 0
    expected = {
        ("list", "tenants"): 1,
        ("list", "namespaces"): 1,
        ("get", "namespaces"): steady.reconciled,
        ("get", "resourcequotas"): steady.reconciled,
        ("delete", "namespaces"): steady.cleaned_up,
    }
    assert steady.requests.by_verb_resource == {k: n for k, n in expected.items() if n}
    assert steady.requests.writes == steady.cleaned_up
    assert not [r for r in writes_for(controller, names) if r.time > server_before_time]
    # The server saw at least our requests (it also serves the control plane's own).
    assert server_window.count("list", "tenants") >= 1
    assert server_window.count("get", "namespaces") >= steady.reconciled
    assert server_window.count("get", "resourcequotas") >= steady.reconciled


def test_polling_thread_converges_updates_and_sweeps_deleted_tenants(api_client, tenant_set) -> None:
    names = [tenant_set.name(i) for i in range(3)]
    for name in names:
        tenant_set.create(name, "1")
    with PollingController(api_client, interval=0.5) as controller:
        tenant_set.wait_converged(names, "1")
        tenant_set.set_cpu(names[0], "3")
        tenant_set.wait_converged(names[:1], "3")
        tenant_set.delete(names[1])
        # The sweep deletes it, unless the garbage collector got there first (the
        # namespace's owner reference names the deleted Tenant): either is right.
        eventually(lambda: tenant_set.namespace_gone_or_terminating(names[1]), message="orphan namespace removed")
    assert controller.ticks >= 2


# -- list + watch -------------------------------------------------------------------------


def test_reflector_follows_bookmarks_and_rewatches_when_the_server_ends_the_stream(api_client, tenant_set) -> None:
    sink, events = RecordingSink(), []
    reflector = Reflector.for_resource(api_client, TENANTS, sink, watch_timeout=8)  # the server ends each watch in 8 s
    reflector.on_event(events.append)
    reflector.start()
    try:
        assert reflector.wait_for_sync(30)
        # kube-apiserver's watch cache sends a BOOKMARK about 2 s before the timeout, but only
        # once its resourceVersion has moved past the one the watch started from: make a change.
        # On a loaded machine a stream can end before its bookmark goes out (the cache's bookmark
        # timer ticks once a second); then the next stream gets a change of its own.
        for attempt in range(3):
            ended = sum(e.type == "CLOSED" for e in events)
            tenant_set.create(tenant_set.name(f"bookmark-{attempt}"))
            eventually(lambda: len(_streams(events)) > ended, timeout=30,  # noqa: B023 - used at once
                       message="a stream ended by the server, and a new watch")
            if _with_a_bookmark(_streams(events)):
                break
    finally:
        reflector.stop()
    assert len(sink.lists) == 1 and reflector.lists == 1  # a normal end needs no relist
    marked = _with_a_bookmark(_streams(events))
    assert marked, [e.type for e in events]
    stream, rewatch = marked
    added = next(e for e in stream if e.type == "ADDED")
    bookmarks = [e for e in stream if e.type == "BOOKMARK"]
    assert all(b.name == "" and int(b.resource_version) >= int(added.resource_version) for b in bookmarks)
    assert any(e.type == "BOOKMARK" for e in sink.applied)
    # the re-watch starts where the stream ended: at the last bookmark's resourceVersion
    assert rewatch.type == "WATCH" and rewatch.resource_version == bookmarks[-1].resource_version
    assert events[-1].type == "CLOSED" and not reflector.running


def _streams(events: list[WatchEvent]) -> list[tuple[list[WatchEvent], WatchEvent]]:
    """Each watch stream the server ended (its events) with the request that followed its end."""
    ended, start = [], 0
    for i, e in enumerate(events[:-1]):
        if e.type == "CLOSED":
            ended.append((events[start:i], events[i + 1]))
            start = i + 1
    return ended


def _with_a_bookmark(streams: list[tuple[list[WatchEvent], WatchEvent]]) -> tuple[list[WatchEvent], WatchEvent] | None:
    """The first ended stream that carried a change of the test's and a BOOKMARK after it."""
    return next((s for s in streams if any(e.type == "ADDED" and "bookmark" in e.name for e in s[0])
                 and any(e.type == "BOOKMARK" for e in s[0])), None)


def resume_and_relist(controller, tenant_set, names: list[str], events: list[WatchEvent]) -> None:
    """Shared by list-watch and informer: a dropped stream resumes, a 410 backs off, then relists."""
    reflector = controller.reflector

    # 1. A dropped connection: re-watch from the last resourceVersion, no relist.
    lists, watches = reflector.lists, reflector.watches
    assert reflector.break_watch()
    eventually(lambda: reflector.watches > watches, message="re-watched after the drop")
    assert reflector.lists == lists
    dropped = next(e for e in events if e.type == "DROPPED")
    rewatch = next(e for e in events[events.index(dropped):] if e.type == "WATCH")
    assert rewatch.resource_version == dropped.resource_version != ""  # resumed where it was
    tenant_set.set_cpu(names[0], "2")
    tenant_set.wait_converged(names[:1], "2")

    # 2. Resuming from an older resourceVersion replays exactly the events after it.
    before_change = reflector.resource_version
    tenant_set.set_cpu(names[1], "3")
    tenant_set.wait_converged(names[1:2], "3")
    seen = [e.resource_version for e in events if e.type == "MODIFIED" and e.name == names[1]]
    reconciles, replay_started = controller.stats().reconciles, time.time()
    mark = len(events)
    reflector.rewatch_from(before_change)
    eventually(lambda: [e.resource_version for e in events[mark:] if e.type == "MODIFIED" and e.name == names[1]]
               == seen,
               message="the change after the old resourceVersion was delivered again")
    eventually(lambda: controller.stats().reconciles > reconciles, message="the replayed event was reconciled")
    assert reflector.lists == lists  # no relist needed
    # replayed event, converged state: nothing written (a write still in flight before the replay started is not it)
    assert not [r for r in writes_for(controller, names) if r.time >= replay_started]

    # 3. A resourceVersion the server no longer keeps: 410 Gone, a backoff, then a relist.
    mark = len(events)
    reflector.rewatch_from("1")
    eventually(lambda: reflector.lists == lists + 1, message="relisted after 410")
    gone = [e for e in events[mark:] if e.type == "ERROR"]
    assert gone and gone[0].code == 410, [(e.type, e.code, e.detail) for e in events[mark:]]
    start = events.index(gone[0])
    # The watch re-opens just after the relist: wait for its marker rather than race it.
    after = eventually(lambda: "WATCH" in [e.type for e in events[start:]] and [e.type for e in events[start:]],
                       message="a new watch after the relist")
    assert after[:3] == ["ERROR", "BACKOFF", "LIST"]
    relisted = events[start + 2]
    assert relisted.time - gone[0].time >= 0.8 * 0.95  # client-go's first backoff step: 800 ms or more
    assert controller.stats().relists >= 1
    # and it still works: a change after the relist converges
    tenant_set.set_cpu(names[2], "4")
    tenant_set.wait_converged(names[2:3], "4")


def test_listwatch_converges_survives_a_dropped_watch_and_recovers_from_410(api_client, tenant_set) -> None:
    names = [tenant_set.name(i) for i in range(N)]
    for name in names[: N // 2]:  # these the first LIST finds ...
        tenant_set.create(name, "1")
    events: list[WatchEvent] = []
    controller = ListWatchController(api_client, watch_timeout=60)
    controller.on_event(events.append)
    with controller:
        for name in names[N // 2 :]:  # ... these arrive as ADDED events
            tenant_set.create(name, "1")
        tenant_set.wait_converged(names, "1")
        assert controller.stats().lists == 1 and controller.stats().watches == 1
        resume_and_relist(controller, tenant_set, names, events)
        tenant_set.delete(names[3])
        eventually(lambda: tenant_set.namespace_gone_or_terminating(names[3]), message="namespace of deleted tenant")
    assert not controller.reflector.running
    assert {e.type for e in events} >= {"LIST", "WATCH", "ADDED", "MODIFIED", "DELETED", "DROPPED", "ERROR"}


def test_listwatch_retries_a_failed_reconcile_only_at_the_next_relist(api_client, core, tenant_set) -> None:
    name = tenant_set.name("held")
    namespace = namespace_of(name)
    hold_terminating(core, namespace)  # reconcile_tenant raises TemporaryError while it exists
    try:
        events: list[WatchEvent] = []
        with ListWatchController(api_client, watch_timeout=60, relist_period=1.0) as controller:
            controller.on_event(events.append)
            tenant_set.create(name, "1")
            eventually(lambda: controller.stats().failures >= 1, message="the reconcile failed")
            release(core, namespace)
            tenant_set.wait_converged([name], "1", timeout=30)
            # no queue, no retry: what fixed it was a periodic relist (a LIST, then a reconcile of everything)
            assert controller.stats().relists >= 1
            assert [e.type for e in events].count("LIST") >= 1
    finally:
        release(core, namespace)


# -- informer + work queue ------------------------------------------------------------------


def test_informer_converges_survives_a_dropped_watch_and_recovers_from_410(api_client, tenant_set) -> None:
    names = [tenant_set.name(i) for i in range(N)]
    for name in names[: N // 2]:
        tenant_set.create(name, "1")
    events: list[WatchEvent] = []
    controller = InformerController(api_client, workers=2, watch_timeout=60)
    controller.on_event(events.append)
    with controller:
        for name in names[N // 2 :]:
            tenant_set.create(name, "1")
        tenant_set.wait_converged(names, "1")
        assert len(controller.informer.list()) >= N
        resume_and_relist(controller, tenant_set, names, events)
        # the cache followed every change
        assert controller.informer.get(names[2])["spec"]["cpuQuota"] == "4"
        tenant_set.delete(names[3])
        eventually(lambda: tenant_set.namespace_gone_or_terminating(names[3]), message="namespace of deleted tenant")
        eventually(lambda: controller.informer.get(names[3]) is None, message="deleted from the cache")
    assert controller.stats().failures == 0


def test_informer_writes_at_most_once_per_changed_object(api_client, tenant_set) -> None:
    names = [tenant_set.name(i) for i in range(N)]
    with InformerController(api_client, workers=2, resync_period=0.5) as controller:
        for name in names:
            tenant_set.create(name, "1")
        tenant_set.wait_converged(names, "1")
        created = writes_for(controller, names)
        # exactly one create per namespace and one per quota
        assert sorted((r.verb, r.resource) for r in created) == sorted(
            [("create", "namespaces"), ("create", "resourcequotas")] * N)

        # resyncs reconcile everything again (reads) but write nothing
        resyncs, reconciles = controller.informer.resyncs, controller.stats().reconciles
        eventually(lambda: controller.informer.resyncs >= resyncs + 3, message="three resyncs")
        eventually(lambda: controller.stats().reconciles >= reconciles + N, message="resync reconciles")
        assert writes_for(controller, names) == created

        # one change per Tenant -> one PATCH of its quota, nothing else
        changed = names[:5]
        for name in changed:
            tenant_set.set_cpu(name, "2")
        tenant_set.wait_converged(changed, "2")
        eventually(lambda: controller.informer.resyncs >= resyncs + 5, message="more resyncs")
        new = writes_for(controller, names)[len(created):]
        assert sorted((r.verb, r.resource, r.namespace) for r in new) == sorted(
            ("patch", "resourcequotas", namespace_of(n)) for n in changed)
    tenant_set.wait_converged(names[5:], "1")


def test_informer_collapses_rapid_updates_into_one_reconcile(api_client, tenant_set) -> None:
    name = tenant_set.name("rapid")
    controller = InformerController(api_client, workers=0, resync_period=None)  # we drain the queue by hand
    with controller:
        tenant_set.create(name, "1")
        eventually(lambda: controller.informer.get(name) is not None, message="tenant in the cache")
        assert controller.informer.wait_for_handlers(10)
        controller.drain()
        tenant_set.wait_converged([name], "1")

        before, queue_before = controller.stats(), controller.queue_metrics()
        for cpu in ("2", "3", "4", "5", "6"):
            tenant_set.set_cpu(name, cpu)
        eventually(lambda: controller.informer.get(name)["spec"]["cpuQuota"] == "6",
                   message="cache has the last update")
        assert controller.informer.wait_for_handlers(10)  # the handlers run on their own thread
        queue = controller.queue_metrics()
        assert queue.adds - queue_before.adds == 1  # five updates, one queued key ...
        assert queue.deduplicated - queue_before.deduplicated == 4  # ... four adds absorbed
        assert controller.drain() == 1
        after = controller.stats()
        assert after.reconciles - before.reconciles == 1
        assert after.writes - before.writes == 1  # one PATCH, straight to the newest value
        tenant_set.wait_converged([name], "6", timeout=5)


def test_informer_retries_a_temporary_error_with_growing_backoff(api_client, core, tenant_set) -> None:
    name = tenant_set.name("held")
    namespace = namespace_of(name)
    hold_terminating(core, namespace)  # reconcile_tenant raises TemporaryError while it exists
    try:
        limiter = ItemExponentialFailureRateLimiter(base_delay=0.05, max_delay=1.0)
        with InformerController(api_client, workers=1, resync_period=None, rate_limiter=limiter) as controller:
            tenant_set.create(name, "1")
            eventually(lambda: controller.queue.num_requeues(name) >= 4, message="retried with backoff")
            assert controller.stats().retries >= 4 and controller.stats().failures >= 4
            # each retry waits base * 2**n: the GETs of the namespace are never closer than that
            reads = [r.time for r in controller.api.requests() if r.verb == "get" and r.name == namespace]
            gaps = [b - a for a, b in itertools.pairwise(reads)]
            for n, gap in enumerate(gaps[:4]):
                assert gap >= 0.05 * 2**n * 0.9, gaps
            release(core, namespace)
            tenant_set.wait_converged([name], "1", timeout=30)
            eventually(lambda: controller.queue.num_requeues(name) == 0, message="forgotten after success")
            assert not controller.permanent_failures
    finally:
        release(core, namespace)


def hold_terminating(core, namespace: str) -> None:
    """A namespace that stays Terminating: deleted, but held by a finalizer nobody removes.

    For it reconcile_tenant raises kopf.TemporaryError, for real, until :func:`release`.
    """
    metadata = client.V1ObjectMeta(name=namespace, finalizers=["operatorlab.test/hold"])
    core.create_namespace(client.V1Namespace(metadata=metadata))
    core.delete_namespace(namespace)


def release(core, namespace: str) -> None:
    """Remove the namespace's finalizers (a JSON merge patch: a strategic one would merge the list)."""
    try:
        core.patch_namespace(namespace, {"metadata": {"finalizers": None}},
                             _content_type="application/merge-patch+json")
    except client.ApiException as e:
        if e.status != 404:
            raise


class RefusingReconciler(TenantReconciler):
    """The real reconcile, except one Tenant is refused as if its spec could never work."""

    def __init__(self, api_client, refuse: str) -> None:
        super().__init__(api_client)
        self.refuse = refuse

    def reconcile(self, tenant):
        if tenant["metadata"]["name"] == self.refuse:
            with self._lock:
                self.reconciles += 1
                self.failures += 1
            raise kopf.PermanentError(f"tenant {self.refuse} refused by the test")
        return super().reconcile(tenant)


def test_informer_drops_a_permanent_error_and_records_it(api_client, tenant_set) -> None:
    bad, good = tenant_set.name("bad"), tenant_set.name("good")
    controller = InformerController(api_client, workers=1, resync_period=None)
    controller.reconciler = RefusingReconciler(controller.api, refuse=bad)
    with controller:
        tenant_set.create(bad, "1")
        tenant_set.create(good, "1")
        tenant_set.wait_converged([good], "1")
        eventually(lambda: bad in controller.permanent_failures, message="permanent failure recorded")
        assert "refused by the test" in controller.permanent_failures[bad]
        assert controller.queue.num_requeues(bad) == 0  # dropped, not retried
        assert controller.stats().retries == 0
    assert not tenant_set.converged(bad, "1")


# -- ownership: the hand-written controllers follow the operator's rule ----------------------


def test_the_reconciler_never_takes_over_or_deletes_a_namespace_it_did_not_create(api_client, core, tenant_set) -> None:
    """TenantReconciler drives reconcile_tenant, so a foreign namespace of the Tenant's name is
    left untouched (NameTaken), and a cleanup, by uid or by name, does not delete it."""
    name = tenant_set.name("foreign")
    namespace = namespace_of(name)
    core.create_namespace({"metadata": {"name": namespace, "labels": {"hedronite.io/tenant": name}}})
    try:
        before = core.read_namespace(namespace).metadata.resource_version
        tenant = tenant_set.create(name, "1")
        reconciler = TenantReconciler(api_client)
        with pytest.raises(kopf.TemporaryError, match=f"Namespace {namespace} exists and was not created"):
            reconciler.sync(name, tenant)
        assert reconciler.cleanup(name, tenant["metadata"]["uid"]) is False
        assert reconciler.cleanup(name) is False  # the Tenant gone, its uid unknown: an owner reference by name
        assert core.read_namespace(namespace).metadata.resource_version == before
        assert not core.list_namespaced_resource_quota(namespace).items
    finally:
        core.delete_namespace(namespace)
