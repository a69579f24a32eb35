"""One behaviour suite, four implementations: polling, list-watch, informer, and the kopf operator.

Every implementation runs the same reconcile (the Tenant operator's
``reconcile_tenant``); this suite checks that the machinery around it delivers
the same observable behaviour on the real cluster:

* **create** -- a new Tenant gets its namespace and quota;
* **update** -- a new ``spec.cpuQuota`` reaches the quota;
* **delete** -- the Tenant goes away and so does its namespace (gone, or
  Terminating while the namespace controller empties it). How differs: the
  kopf operator holds the Tenant with a finalizer until it has deleted the
  namespace; the hand-written controllers put no finalizer and react after
  the fact (polling: its orphan sweep; list-watch: the DELETED event;
  informer: the key's cache miss). Observable result: the same;
* **restart with a gap** -- while the controller is down its namespace is
  deleted by hand and the Tenant changed; a new instance (like a restarted
  process, no memory) closes both gaps;
* **many at once** -- 30 Tenants created together all converge.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab.controllers.informer import InformerController
from operatorlab.controllers.listwatch import ListWatchController
from operatorlab.controllers.polling import PollingController
from operatorlab.operators import OperatorProcess, operator_path
from operatorlab.wait import eventually

pytestmark = pytest.mark.xdist_group("tenant-operator")

IMPLEMENTATIONS = ("polling", "listwatch", "informer", "kopf")
TIMEOUT = 60.0  # seconds for anything to converge


class Implementation:
    """Start and stop one implementation; every start is a fresh instance, as a restarted process would be."""

    def __init__(self, kind: str, api_client) -> None:
        self.kind = kind
        self.api_client = api_client
        self._running = None

    def start(self) -> None:
        assert self._running is None, "already running"
        if self.kind == "kopf":
            self._running = OperatorProcess(operator_path("tenant")).start(timeout=TIMEOUT)
        elif self.kind == "polling":
            self._running = PollingController(self.api_client, interval=0.5).start()
        elif self.kind == "listwatch":
            self._running = ListWatchController(self.api_client, watch_timeout=60).start()
        elif self.kind == "informer":
            self._running = InformerController(self.api_client, workers=2, resync_period=5.0, watch_timeout=60).start()
        else:
            raise ValueError(self.kind)

    def stop(self) -> None:
        running, self._running = self._running, None
        if running is not None:
            running.stop()


@pytest.fixture(params=IMPLEMENTATIONS)
def controller(request, api_client, tenant_set) -> Iterator[Implementation]:
    """The implementation under test, running; stopped before the test's Tenants are cleaned up."""
    implementation = Implementation(request.param, api_client)
    implementation.start()
    try:
        yield implementation
    finally:
        implementation.stop()


def test_create(controller: Implementation, tenant_set) -> None:
    name = tenant_set.name("create")
    tenant_set.create(name, "2")
    tenant_set.wait_converged([name], "2", timeout=TIMEOUT)


def test_update_cpu_quota(controller: Implementation, tenant_set) -> None:
    name = tenant_set.name("update")
    tenant_set.create(name, "1")
    tenant_set.wait_converged([name], "1", timeout=TIMEOUT)
    tenant_set.set_cpu(name, "2500m")
    tenant_set.wait_converged([name], "2.5", timeout=TIMEOUT)


def test_delete(controller: Implementation, tenant_set) -> None:
    name, other = tenant_set.name("delete"), tenant_set.name("stays")
    tenant_set.create(name, "1")
    tenant_set.create(other, "1")
    tenant_set.wait_converged([name, other], "1", timeout=TIMEOUT)
    tenant_set.delete(name)
    eventually(lambda: tenant_set.find(name) is None, timeout=TIMEOUT, message=f"tenant {name} gone")
    eventually(lambda: tenant_set.namespace_gone_or_terminating(name), timeout=TIMEOUT,
               message=f"namespace of {name} gone or terminating")
    assert tenant_set.converged(other, "1")  # only that one


def test_restart_closes_the_gap(controller: Implementation, tenant_set) -> None:
    name, changed = tenant_set.name("gap"), tenant_set.name("changed")
    tenant_set.create(name, "1")
    tenant_set.create(changed, "1")
    tenant_set.wait_converged([name, changed], "1", timeout=TIMEOUT)

    controller.stop()
    tenant_set.delete_namespace(name)
    eventually(lambda: tenant_set.namespace_gone(name), timeout=TIMEOUT, message="namespace deleted by hand")
    tenant_set.set_cpu(changed, "3")
    assert not tenant_set.converged(name, "1") and not tenant_set.converged(changed, "3")  # nobody is fixing it

    controller.start()
    tenant_set.wait_converged([name], "1", timeout=TIMEOUT)
    tenant_set.wait_converged([changed], "3", timeout=TIMEOUT)


def test_many_tenants_at_once(controller: Implementation, tenant_set) -> None:
    names = [tenant_set.name(f"many-{i}") for i in range(30)]
    for i, name in enumerate(names):
        tenant_set.create(name, str(1 + i % 4))
    tenant_set.wait_converged(names, {n: str(1 + i % 4) for i, n in enumerate(names)}, timeout=TIMEOUT)
