"""The simplest controller: every ``interval`` seconds, LIST all Tenants and reconcile each.

Level-triggered by construction -- each tick looks at the whole world as it is
now -- and so it needs no memory, survives any restart, and never misses a
change for longer than one interval. Its price is the lesson: every tick costs
one LIST plus the reconcile's reads for *every* Tenant (``reconcile_tenant``
GETs the namespace and the quota), whether anything changed or not, so the API
cost grows with the number of Tenants times the tick rate. :meth:`PollingController.tick`
returns that cost per tick, measured.

Deletion: a poll only sees what exists, so a deleted Tenant simply stops
appearing. The controller finds what it left behind with an **orphan sweep**:
each tick it also LISTs the namespaces labelled ``hedronite.io/tenant`` and
deletes the ones whose Tenant is no longer listed (one more LIST per tick;
``sweep_orphans=False`` turns it off). Being level-triggered, the sweep also
cleans up after Tenants deleted while no controller ran. (The kopf operator
solves deletion differently, with a finalizer on each Tenant.)
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from kubernetes import client

from operatorlab.controllers.listwatch import TENANTS
from operatorlab.controllers.metrics import ControllerStats, CountingApiClient, RequestCounts
from operatorlab.controllers.reconciler import TenantReconciler, is_being_deleted

__all__ = ["PollingController", "Tick"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tick:
    """What one polling tick did and cost.

    Attributes:
        tenants: Tenants listed.
        reconciled: Tenants reconciled without error.
        cleaned_up: namespaces deleted (Tenant gone or being deleted).
        failed: reconciles or cleanups that raised (retried next tick).
        requests: the API requests of this tick, by verb and resource, as
            counted by the controller's client.
        seconds: how long the tick took.
    """

    tenants: int
    reconciled: int
    cleaned_up: int
    failed: int
    requests: RequestCounts
    seconds: float


class PollingController:
    """LIST every ``interval`` seconds and reconcile each Tenant.

    Args:
        api_client: whose cluster and credentials to use (``None``: the current
            kubeconfig); requests go through the controller's own
            :class:`~operatorlab.controllers.metrics.CountingApiClient`.
        interval: seconds from the end of one tick to the start of the next.
        sweep_orphans: also delete namespaces of Tenants that no longer exist.
        list_timeout: seconds for each LIST.
        reconciler: the reconcile to drive (default: the Tenant operator's).

    Use as a context manager, or :meth:`start` / :meth:`stop`; or call
    :meth:`tick` yourself to run and measure one tick.
    """

    def __init__(
        self,
        api_client: client.ApiClient | None = None,
        *,
        interval: float = 5.0,
        sweep_orphans: bool = True,
        list_timeout: float = 30.0,
        reconciler: TenantReconciler | None = None,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval}")
        self.api = CountingApiClient.wrap(api_client)
        self.reconciler = reconciler or TenantReconciler(self.api)
        self.interval = interval
        self.sweep_orphans = sweep_orphans
        self.list_timeout = list_timeout
        self._custom = client.CustomObjectsApi(self.api)
        self._core = client.CoreV1Api(self.api)
        self._tick_lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.ticks = 0
        self.last_tick: Tick | None = None

    def tick(self) -> Tick:
        """One poll: LIST Tenants, reconcile each, sweep orphans; return what it did and cost.

        A failing reconcile is logged and counted, not raised: the next tick retries it.

        Raises:
            kubernetes.client.ApiException, urllib3 errors: the LIST itself failed.
        """
        with self._tick_lock:
            before, started = self.api.counts(), time.monotonic()
            tenants = TENANTS.list(self._custom, _request_timeout=self.list_timeout)["items"]
            reconciled = cleaned = failed = 0
            live: set[str] = set()
            for tenant in tenants:
                name = tenant["metadata"]["name"]
                if not is_being_deleted(tenant):
                    live.add(name)
                try:
                    if self.reconciler.sync(name, tenant) is None:
                        cleaned += 1
                    else:
                        reconciled += 1
                except Exception as e:  # noqa: BLE001 - counted, retried next tick
                    failed += 1
                    log.warning("polling: tenant %s: %s", name, e)
            if self.sweep_orphans:
                swept, sweep_failed = self._sweep(live)
                cleaned += swept
                failed += sweep_failed
            result = Tick(
                tenants=len(tenants), reconciled=reconciled, cleaned_up=cleaned, failed=failed,
                requests=self.api.counts() - before, seconds=time.monotonic() - started,
            )
            self.ticks += 1
            self.last_tick = result
            return result

    def _sweep(self, live: set[str]) -> tuple[int, int]:
        """Delete the namespaces of Tenants not in ``live``; return (deleted, failed)."""
        label = self.reconciler.tenant_label
        namespaces = self._core.list_namespace(label_selector=label, _request_timeout=self.list_timeout).items
        deleted = failed = 0
        for ns in namespaces:
            meta = ns.metadata
            if meta is None:  # never from a real server; the model types allow it
                continue
            owner = (meta.labels or {}).get(label, "")
            if owner in live or meta.deletion_timestamp:
                continue
            try:
                if self.reconciler.namespace_name(owner) != meta.name:
                    continue  # labelled by someone else, not a Tenant's namespace
                if self.reconciler.cleanup(owner):  # False: not that Tenant's (no owner reference)
                    deleted += 1
            except Exception as e:  # noqa: BLE001 - counted, retried next tick
                failed += 1
                log.warning("polling: sweeping namespace %s: %s", meta.name, e)
        return deleted, failed

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> PollingController:
        """Start ticking on a background thread (the first tick runs at once)."""
        if self._thread is not None:
            raise RuntimeError("polling: already started")
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="polling", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the current tick and join the thread.

        Raises:
            TimeoutError: the tick in progress did not finish within ``timeout`` s.
        """
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"polling: tick still running after {timeout}s")
        self.api.close()  # its connections; tick() or start() opens new ones

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.tick()
            except Exception as e:  # noqa: BLE001 - the LIST failed: try again next interval
                log.warning("polling: tick failed: %s", e)
            self._stopping.wait(self.interval)

    def stats(self) -> ControllerStats:
        """Counters since creation; requests as measured by the controller's own client."""
        return ControllerStats.measure(self.api.counts(), **self.reconciler.counters())

    def __enter__(self) -> PollingController:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
