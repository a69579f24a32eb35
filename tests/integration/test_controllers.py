"""The hand-written controllers on the real cluster: convergence, API cost, dropped watches, 410 Gone.

Every number asserted is measured: the controllers' own request counts come
from their CountingApiClient, the server's from its /metrics.
"""

from __future__ import annotations

import kopf
import pytest
from tenant_helpers import Tenants, namespace_of, tenants  # noqa: F401 - fixture

from operatorlab.controllers.controller import TenantReconciler
from operatorlab.controllers.informer import InformerController
from operatorlab.controllers.listwatch import ListWatchController, WatchEvent
from operatorlab.controllers.metrics import ApiRequest, read_apiserver_requests
from operatorlab.controllers.polling import PollingController
from operatorlab.controllers.workqueue import ItemExponentialFailureRateLimiter
from operatorlab.wait import eventually

pytestmark = pytest.mark.xdist_group("tenant-operator")

N = 10


def touches(request: ApiRequest, names: list[str]) -> bool:
    """The request is about one of these Tenants' namespaces or what is in them."""
    spaces = {namespace_of(n) for n in names}
    return request.namespace in spaces or (request.resource == "namespaces" and request.name in spaces)


def writes_for(controller, names: list[str]) -> list[ApiRequest]:
    return [r for r in controller.api.requests() if r.is_write and touches(r, names)]


# -- polling ----------------------------------------------------------------------------


def test_polling_converges_and_costs_one_list_plus_two_gets_per_tenant_per_tick(api_client, tenants: Tenants) -> None:
    names = [tenants.name(i) for i in range(N)]
    for name in names:
        tenants.create(name, cpu="2")
    controller = PollingController(api_client, interval=1.0)

    first = controller.tick()
    assert first.failed == 0
    tenants.wait_converged(names, "2", timeout=10)  # converged by that one tick
    assert len([r for r in writes_for(controller, names) if r.verb == "create"]) == 2 * N

    server_before = read_apiserver_requests(api_client)
    steady = controller.tick()
    server_window = read_apiserver_requests(api_client) - server_before

    # Steady state: nothing to change, still a LIST plus a GET of namespace and quota per Tenant,
    # plus the orphan sweep's LIST of namespaces. (steady.tenants may include other tests' leftovers.)
    assert steady.tenants >= N and steady.failed == 0
    assert steady.requests.by_verb_resource == {
        ("list", "tenants"): 1,
        ("list", "namespaces"): 1,
        ("get", "namespaces"): steady.tenants,
        ("get", "resourcequotas"): steady.tenants,
    }
    assert steady.requests.writes == 0
    # The server saw at least our requests (it also serves the control plane's own).
    assert server_window.count("list", "tenants") >= 1
    assert server_window.count("get", "namespaces") >= steady.tenants
    assert server_window.count("get", "resourcequotas") >= steady.tenants


def test_polling_thread_converges_updates_and_sweeps_deleted_tenants(api_client, tenants: Tenants) -> None:
    names = [tenants.name(i) for i in range(3)]
    for name in names:
        tenants.create(name, cpu="1")
    with PollingController(api_client, interval=0.5) as controller:
        tenants.wait_converged(names, "1")
        tenants.set_cpu(names[0], "3")
        tenants.wait_converged(names[:1], "3")
        tenants.delete(names[1])
        eventually(lambda: tenants.namespace_gone_or_terminating(names[1]), message="orphan namespace swept")
    assert controller.stats().cleanups >= 1
    assert controller.ticks >= 2


# -- list + watch -------------------------------------------------------------------------


class RecordingSink:
    """A reflector sink that only remembers what it was given."""

    def __init__(self) -> None:
        self.lists: list[tuple[int, str]] = []
        self.applied: list[WatchEvent] = []

    def replace(self, objects, resource_version) -> None:
        self.lists.append((len(objects), resource_version))

    def apply(self, event) -> None:
        self.applied.append(event)


def test_reflector_follows_bookmarks_and_rewatches_when_the_server_ends_the_stream(api_client) -> None:
    from operatorlab.controllers.listwatch import TENANTS, Reflector

    sink, events = RecordingSink(), []
    reflector = Reflector(api_client, TENANTS, sink, watch_timeout=8)  # the server ends each watch after 8 s
    reflector.on_event(events.append)
    reflector.start()
    try:
        assert reflector.wait_for_sync(30)
        # kube-apiserver sends a BOOKMARK about 2 s before a watch's timeout, then ends the stream
        eventually(lambda: "WATCH" in [e.type for e in events][[e.type for e in events].index("CLOSED"):]
                   if "CLOSED" in [e.type for e in events] else False,
                   timeout=30, message="a stream ended by the server, and a new watch")
    finally:
        reflector.stop()
    assert len(sink.lists) == 1 and reflector.lists == 1  # a normal end needs no relist
    first_close = next(i for i, e in enumerate(events) if e.type == "CLOSED")
    bookmarks = [e for e in events[:first_close] if e.type == "BOOKMARK"]
    assert bookmarks and all(b.name == "" and b.resource_version for b in bookmarks), [e.type for e in events]
    assert any(e.type == "BOOKMARK" for e in sink.applied)
    # the re-watch starts from where the stream ended: the last bookmark's resourceVersion
    assert events[first_close].resource_version == bookmarks[-1].resource_version
    assert events[first_close + 1].type == "WATCH"
    assert events[first_close + 1].resource_version == bookmarks[-1].resource_version
    assert events[-1].type == "CLOSED" and not reflector.running


def resume_and_relist(controller, tenants: Tenants, names: list[str], events: list[WatchEvent]) -> None:
    """Shared by list-watch and informer: a dropped stream resumes, a 410 relists."""
    reflector = controller.reflector if hasattr(controller, "reflector") else controller.informer.reflector

    # 1. A dropped connection: re-watch from the last resourceVersion, no relist.
    lists, watches = reflector.lists, reflector.watches
    assert controller._drop_stream()
    eventually(lambda: reflector.watches > watches, message="re-watched after the drop")
    assert reflector.lists == lists
    dropped = next(e for e in events if e.type == "DROPPED")
    rewatch = next(e for e in events[events.index(dropped):] if e.type == "WATCH")
    assert rewatch.resource_version == dropped.resource_version != ""  # resumed where it was
    tenants.set_cpu(names[0], "2")
    tenants.wait_converged(names[:1], "2")

    # 2. Resuming from an older resourceVersion replays exactly the events after it.
    before_change = reflector.resource_version
    tenants.set_cpu(names[1], "3")
    tenants.wait_converged(names[1:2], "3")
    seen = [e.resource_version for e in events if e.type == "MODIFIED" and e.name == names[1]]
    writes, reconciles = controller.stats().writes, controller.stats().reconciles
    mark = len(events)
    reflector.rewatch_from(before_change)
    eventually(lambda: [e.resource_version for e in events[mark:] if e.type == "MODIFIED" and e.name == names[1]] == seen,
               message="the change after the old resourceVersion was delivered again")
    eventually(lambda: controller.stats().reconciles > reconciles, message="the replayed event was reconciled")
    assert reflector.lists == lists  # no relist needed
    assert controller.stats().writes == writes  # replayed event, converged state: nothing written

    # 3. A resourceVersion the server no longer keeps: 410 Gone, then a relist.
    mark = len(events)
    reflector.rewatch_from("1")
    eventually(lambda: reflector.lists == lists + 1, message="relisted after 410")
    gone = [e for e in events[mark:] if e.type == "ERROR"]
    assert gone and gone[0].code == 410, [(e.type, e.code, e.detail) for e in events[mark:]]
    after = [e.type for e in events[events.index(gone[0]):]]
    assert after[:2] == ["ERROR", "LIST"] and "WATCH" in after
    assert controller.stats().relists >= 1
    # and it still works: a change after the relist converges
    tenants.set_cpu(names[2], "4")
    tenants.wait_converged(names[2:3], "4")


def test_listwatch_converges_survives_a_dropped_watch_and_recovers_from_410(api_client, tenants: Tenants) -> None:
    names = [tenants.name(i) for i in range(N)]
    for name in names[: N // 2]:  # these the first LIST finds ...
        tenants.create(name, cpu="1")
    events: list[WatchEvent] = []
    controller = ListWatchController(api_client, watch_timeout=60)
    controller.on_event(events.append)
    with controller:
        for name in names[N // 2 :]:  # ... these arrive as ADDED events
            tenants.create(name, cpu="1")
        tenants.wait_converged(names, "1")
        assert controller.stats().lists == 1 and controller.stats().watches == 1
        resume_and_relist(controller, tenants, names, events)
        tenants.delete(names[3])
        eventually(lambda: tenants.namespace_gone_or_terminating(names[3]), message="namespace of deleted tenant")
    assert not controller.reflector.running
    assert {e.type for e in events} >= {"LIST", "WATCH", "ADDED", "MODIFIED", "DELETED", "DROPPED", "ERROR"}


# -- informer + work queue ------------------------------------------------------------------


def test_informer_converges_survives_a_dropped_watch_and_recovers_from_410(api_client, tenants: Tenants) -> None:
    names = [tenants.name(i) for i in range(N)]
    for name in names[: N // 2]:
        tenants.create(name, cpu="1")
    events: list[WatchEvent] = []
    controller = InformerController(api_client, workers=2, watch_timeout=60)
    controller.on_event(events.append)
    with controller:
        for name in names[N // 2 :]:
            tenants.create(name, cpu="1")
        tenants.wait_converged(names, "1")
        assert len(controller.informer.list()) >= N
        resume_and_relist(controller, tenants, names, events)
        # the cache followed every change
        assert controller.informer.get(names[2])["spec"]["cpuQuota"] == "4"
        tenants.delete(names[3])
        eventually(lambda: tenants.namespace_gone_or_terminating(names[3]), message="namespace of deleted tenant")
        eventually(lambda: controller.informer.get(names[3]) is None, message="deleted from the cache")
    assert controller.stats().failures == 0


def test_informer_writes_at_most_once_per_changed_object(api_client, tenants: Tenants) -> None:
    names = [tenants.name(i) for i in range(N)]
    with InformerController(api_client, workers=2, resync_period=0.5) as controller:
        for name in names:
            tenants.create(name, cpu="1")
        tenants.wait_converged(names, "1")
        created = writes_for(controller, names)
        # exactly one create per namespace and one per quota
        assert sorted((r.verb, r.resource) for r in created) == sorted([("create", "namespaces"), ("create", "resourcequotas")] * N)

        # resyncs reconcile everything again (reads) but write nothing
        resyncs, reconciles = controller.informer.resyncs, controller.stats().reconciles
        eventually(lambda: controller.informer.resyncs >= resyncs + 3, message="three resyncs")
        eventually(lambda: controller.stats().reconciles >= reconciles + N, message="resync reconciles")
        assert writes_for(controller, names) == created

        # one change per Tenant -> one PATCH of its quota, nothing else
        changed = names[:5]
        for name in changed:
            tenants.set_cpu(name, "2")
        tenants.wait_converged(changed, "2")
        eventually(lambda: controller.informer.resyncs >= resyncs + 5, message="more resyncs")
        new = writes_for(controller, names)[len(created):]
        assert sorted((r.verb, r.resource, r.namespace) for r in new) == sorted(
            ("patch", "resourcequotas", namespace_of(n)) for n in changed)
    tenants.wait_converged(names[5:], "1")


def test_informer_collapses_rapid_updates_into_one_reconcile(api_client, tenants: Tenants) -> None:
    name = tenants.name("rapid")
    controller = InformerController(api_client, workers=0, resync_period=None)  # we drain the queue by hand
    with controller:
        tenants.create(name, cpu="1")
        eventually(lambda: controller.informer.get(name) is not None, message="tenant in the cache")
        controller.drain()
        tenants.wait_converged([name], "1")

        before, queue_before = controller.stats(), controller.queue_metrics()
        for cpu in ("2", "3", "4", "5", "6"):
            tenants.set_cpu(name, cpu)
        eventually(lambda: controller.informer.get(name)["spec"]["cpuQuota"] == "6", message="cache has the last update")
        queue = controller.queue_metrics()
        assert queue.adds - queue_before.adds == 1  # five updates, one queued key ...
        assert queue.deduplicated - queue_before.deduplicated == 4  # ... four adds absorbed
        assert controller.drain() == 1
        after = controller.stats()
        assert after.reconciles - before.reconciles == 1
        assert after.writes - before.writes == 1  # one PATCH, straight to the newest value
        tenants.wait_converged([name], "6", timeout=5)


def test_informer_retries_a_temporary_error_with_growing_backoff(api_client, core, tenants: Tenants) -> None:
    from kubernetes import client

    name = tenants.name("held")
    namespace = namespace_of(name)
    # A namespace that stays Terminating (a finalizer nobody removes): reconcile_tenant
    # raises kopf.TemporaryError for it, for real, until it is gone.
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace, finalizers=["operatorlab.test/hold"])))
    try:
        core.delete_namespace(namespace)
        limiter = ItemExponentialFailureRateLimiter(base_delay=0.05, max_delay=1.0)
        with InformerController(api_client, workers=1, resync_period=None, rate_limiter=limiter) as controller:
            tenants.create(name, cpu="1")
            eventually(lambda: controller.queue.num_requeues(name) >= 4, message="retried with backoff")
            assert controller.stats().retries >= 4 and controller.stats().failures >= 4
            # each retry waits base * 2**n: the GETs of the namespace are never closer than that
            reads = [r.time for r in controller.api.requests() if r.verb == "get" and r.name == namespace]
            gaps = [b - a for a, b in zip(reads, reads[1:])]
            for n, gap in enumerate(gaps[:4]):
                assert gap >= 0.05 * 2**n * 0.9, gaps
            release(core, namespace)
            tenants.wait_converged([name], "1", timeout=30)
            eventually(lambda: controller.queue.num_requeues(name) == 0, message="forgotten after success")
            assert not controller.permanent_failures
    finally:
        release(core, namespace)


def release(core, namespace: str) -> None:
    """Remove the namespace's finalizers (a JSON merge patch: a strategic one would merge the list)."""
    from kubernetes import client

    try:
        core.patch_namespace(namespace, {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json")
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


def test_informer_drops_a_permanent_error_and_records_it(api_client, tenants: Tenants) -> None:
    bad, good = tenants.name("bad"), tenants.name("good")
    controller = InformerController(api_client, workers=1, resync_period=None)
    controller.reconciler = RefusingReconciler(controller.api, refuse=bad)
    with controller:
        tenants.create(bad, cpu="1")
        tenants.create(good, cpu="1")
        tenants.wait_converged([good], "1")
        eventually(lambda: bad in controller.permanent_failures, message="permanent failure recorded")
        assert "refused by the test" in controller.permanent_failures[bad]
        assert controller.queue.num_requeues(bad) == 0  # dropped, not retried
        assert controller.stats().retries == 0
    assert not tenants.converged(bad, "1")
