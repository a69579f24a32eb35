"""Lesson 03: the worker step of a controller, graded with the real informer and the real reconcile.

The learner's ``process_next_work_item(queue, sync)`` drives a rate-limited work queue fed by
an informer on Tenants. The check creates Tenants of its own (fresh names: nothing made by
hand can stand in for them) and watches what the worker does: bursts of updates collapse
into few reconciles and the Tenant converges, a failing key is retried with growing delays
and then forgotten, no key is left "processing", and shutdown ends the worker.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from types import ModuleType

from kubernetes import client

from operatorlab import tenants
from operatorlab.controllers.informer import Informer, deletion_handling_key
from operatorlab.controllers.keys import split_meta_namespace_key
from operatorlab.controllers.reconciler import TenantReconciler
from operatorlab.controllers.workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue
from operatorlab.exercises import Exercise
from operatorlab.grading import Check, converges, within

BASE_DELAY = 0.1  # the check's rate limiter: 0.1 s doubling, so the delays can be measured


class ProcessNextWorkItem(Exercise):
    lesson = "03"
    title = "process_next_work_item: get, reconcile, forget or retry later, always done"
    subject = "process_next_work_item"
    budget = 10.0
    xdist_group = "tenant-operator"  # it reconciles Tenants, as every Tenant operator does
    hints = (
        "A worker step takes one key from the queue and hands it to sync. What must the queue hear "
        "afterwards, whether sync worked or not?",
        "queue.get() returns (key, shutdown). After sync, success and failure differ: one resets the key's "
        "backoff, the other asks for the key again later. One call is owed in every case.",
        "Shape: key, shutdown = queue.get(); if shutdown: return False; try sync(key); on an exception "
        "queue.add_rate_limited(key), else queue.forget(key); finally queue.done(key); return True.",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        step = learner.process_next_work_item
        suffix = uuid.uuid4().hex[:6]
        ok_name, failing_name = f"ex03-{suffix}-a", f"ex03-{suffix}-b"
        ours = {ok_name, failing_name}
        custom = client.CustomObjectsApi(self.api)
        queue: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(BASE_DELAY, 5.0))
        informer = Informer.for_resource(self.api, resync_period=None)
        reconciler = TenantReconciler(self.api)
        calls: list[tuple[str, float]] = []
        failures_left = {failing_name: 3}

        def sync(key: str) -> None:
            _, name = split_meta_namespace_key(key)
            calls.append((name, time.monotonic()))
            if failures_left.get(name, 0) > 0:
                failures_left[name] -= 1
                raise RuntimeError(f"the check fails {name} on purpose ({failures_left[name]} more)")
            reconciler.sync(name, informer.get(key))

        notified: list[str] = []  # every add the handlers made (the queue's own count skips duplicates)

        def enqueue(obj) -> None:
            key = deletion_handling_key(obj)
            if split_meta_namespace_key(key)[1] in ours:
                queue.add(key)
                notified.append(key)

        informer.add_event_handler(on_add=enqueue, on_update=lambda _old, new: enqueue(new), on_delete=enqueue)
        worker_exited = threading.Event()
        returned: list[object] = []
        errors: list[BaseException] = []

        stop = threading.Event()  # ends a worker whose step never returns False (it would spin)

        def work() -> None:
            try:
                while (result := step(queue, sync)) is True and not stop.is_set():
                    pass
                returned.append(result)
            except BaseException as e:  # noqa: BLE001 - reported as evidence
                errors.append(e)
            finally:
                worker_exited.set()

        tenants_api = tenants.Tenants(self.api)
        informer.start()
        worker = threading.Thread(target=work, name="learner-worker", daemon=True)
        try:
            if not converges(informer.has_synced, budget=10).ok:
                yield Check("the informer syncs", False, "the Tenant informer did not sync in 10 s")
                return
            # The worker is not running yet: five updates queue one key.
            tenants_api.create(ok_name, "1", "exercise 03")
            for cpu in ("2", "3", "4", "5", "6"):
                tenants_api.patch_spec(ok_name, cpuQuota=cpu)
            # Wait until every one of the six notifications (an add, five updates) reached the queue:
            # the cache is updated before the handlers run, on their own threads.
            converges(lambda: len(notified) >= 6, budget=10)
            worker.start()
            yield within(
                f"Tenant {ok_name} converges (namespace and quota cpu 6)",
                lambda: _quota_cpu(self.api, ok_name) == "6", budget=self.budget, give_up=worker_exited.is_set,
                evidence=lambda last: f"quota cpu {last!r}; reconciles so far: {_count(calls, ok_name)}")
            if errors:
                raise errors[0]  # the learner's step raised: the runner shows where
            n = _count(calls, ok_name)
            yield Check("six writes of one Tenant before the worker ran become one reconcile", n == 1,
                        f"{n} reconcile(s) of {ok_name}" + ("" if n == 1 else
                        " (the queue de-duplicates a key waiting in it; so the worker asked for it again)"))

            tenants_api.create(failing_name, "1", "exercise 03, failing thrice")
            converged = converges(lambda: _quota_cpu(self.api, failing_name) == "1", budget=self.budget,
                                  give_up=worker_exited.is_set)
            attempts = [t for name, t in calls if name == failing_name]
            gaps = [round(b - a, 2) for a, b in itertools.pairwise(attempts)]
            growing = len(gaps) >= 3 and all(g >= 0.8 * BASE_DELAY * 2**i for i, g in enumerate(gaps[:3]))
            yield Check(
                "a key whose reconcile fails is retried, each time later (rate limited), until it converges",
                converged.ok and len(attempts) == 4 and growing,
                f"{len(attempts)} attempts of {failing_name} (3 fail on purpose), gaps {gaps} s; "
                f"expected 4 attempts with gaps >= {[BASE_DELAY * 2**i for i in range(3)]} s; "
                f"converged: {converged.ok}")
            # The quota is written inside sync; forget follows a moment later, on the worker's thread.
            converges(lambda: queue.num_requeues(failing_name) == 0, budget=2)
            requeues = queue.num_requeues(failing_name)
            yield Check("after a success the key's backoff is forgotten", requeues == 0,
                        f"num_requeues({failing_name!r}) = {requeues}")
            tenants_api.patch_spec(ok_name, cpuQuota="7")
            yield within("a key done once is handed out again on the next change (always done)",
                         lambda: _quota_cpu(self.api, ok_name) == "7", budget=self.budget,
                         give_up=worker_exited.is_set,
                         evidence=lambda last: f"quota cpu {last!r}; queue {queue.metrics()}")
            converges(lambda: queue.metrics().processing == 0, budget=2)  # done follows sync's write
            processing = queue.metrics().processing
            yield Check("no key is left processing", processing == 0, f"{processing} key(s) processing")
            queue.shut_down()
            exited = worker_exited.wait(5)
            yield Check(
                "once the queue shuts down the step returns False and the worker exits",
                exited and returned == [False] and not errors,
                f"worker exited: {exited}; returned {returned}; raised {errors[:1]}")
        finally:
            stop.set()
            queue.shut_down()
            informer.stop()
            for name in ours:
                _delete(custom, name)


def _count(calls: list[tuple[str, float]], name: str) -> int:
    return sum(1 for n, _ in calls if n == name)


def _quota_cpu(api, tenant: str) -> str | None:
    quota = client.CoreV1Api(api).read_namespaced_resource_quota(tenants.QUOTA_NAME, tenants.namespace_of(tenant))
    return (quota.spec.hard or {}).get("limits.cpu")


def _delete(custom: client.CustomObjectsApi, name: str) -> None:
    try:
        custom.delete_cluster_custom_object(tenants.GROUP, tenants.VERSION, tenants.PLURAL, name)
    except client.ApiException as e:
        if e.status != 404:
            raise
    try:
        client.CoreV1Api(custom.api_client).delete_namespace(tenants.namespace_of(name))
    except client.ApiException as e:
        if e.status != 404:
            raise
