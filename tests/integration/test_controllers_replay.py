"""Replay: the measurable meaning of level-triggered.

Real watch events (recorded from the cluster while Tenants were created and
changed twice) are fed to the informer controller's event path duplicated,
reordered and with most of them dropped. Each event triggers a reconcile of
its key, which reads the Tenant *from the cache* (kept current by the real
LIST + WATCH), not from the event. So every variant must end in the same state
with the same writes as the events in order: one create of each namespace and
one of each quota, and nothing else.

An edge-triggered handler, which applies the event's own copy of the Tenant,
gets the reordered variant wrong; that run shows the check can fail.

Needs the cluster (the reconcile is the real one, against the real API), so it
lives with the integration tests.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client

from operatorlab.controllers.informer import InformerController, deletion_handling_key
from operatorlab.controllers.listwatch import WatchEvent
from operatorlab.controllers.metrics import CountingApiClient
from operatorlab.operators import load_module
from operatorlab.wait import eventually

namespace_of = load_module("tenant").namespace_name  # the operator's own rule: tenant-<name>

pytestmark = pytest.mark.xdist_group("tenant-operator")

HISTORY = ("1", "2", "3")  # each Tenant's cpuQuota over time; "3" is what it asks for now
PER_VARIANT = 3


def in_order(events: list[WatchEvent]) -> list[WatchEvent]:
    return list(events)


def duplicated(events: list[WatchEvent]) -> list[WatchEvent]:
    return [e for e in events for _ in range(2)]


def reordered(events: list[WatchEvent]) -> list[WatchEvent]:
    return list(reversed(events))  # newest first: the most misleading order


def dropped(events: list[WatchEvent]) -> list[WatchEvent]:
    # Keep only each Tenant's oldest event (ADDED, cpuQuota "1"): both updates are lost.
    first: dict[str, WatchEvent] = {}
    for e in events:
        first.setdefault(e.name, e)
    return list(first.values())


VARIANTS: dict[str, Callable[[list[WatchEvent]], list[WatchEvent]]] = {
    "in_order": in_order, "duplicated": duplicated, "reordered": reordered, "dropped": dropped,
}


def write_counts(api: CountingApiClient, names: list[str]) -> list[tuple[str, str, str]]:
    spaces = {namespace_of(n) for n in names}
    return sorted(
        (r.verb, r.resource, r.namespace or r.name) for r in api.requests()
        if r.is_write and (r.namespace in spaces or r.name in spaces)
    )


def test_replayed_events_duplicated_reordered_or_dropped_give_the_same_state_and_writes(
    api_client, tenant_set,
) -> None:
    groups = {v: [tenant_set.name(f"{v.replace('_', '')}-{i}") for i in range(PER_VARIANT)]
              for v in [*VARIANTS, "edge"]}
    everyone = [n for names in groups.values() for n in names]
    recorded: list[WatchEvent] = []

    # workers=0 and no resync: nothing reconciles unless the test says so.
    controller = InformerController(api_client, workers=0, resync_period=None)
    controller.on_event(
        lambda e: recorded.append(e) if e.name in everyone and e.type in ("ADDED", "MODIFIED") else None)
    with controller:
        for name in everyone:
            tenant_set.create(name, HISTORY[0])
        for cpu in HISTORY[1:]:
            for name in everyone:
                tenant_set.set_cpu(name, cpu)
        eventually(lambda: all((controller.informer.get(n) or {}).get("spec", {}).get("cpuQuota") == HISTORY[-1]
                               for n in everyone),
                   message="the cache holds every Tenant's newest state")
        assert all(not tenant_set.converged(n, HISTORY[-1]) for n in everyone)  # nothing reconciled yet
        assert len(recorded) == len(everyone) * len(HISTORY)  # an ADDED and two MODIFIED each
        expected_writes = {
            v: sorted([("create", "namespaces", namespace_of(n)) for n in names]
                      + [("create", "resourcequotas", namespace_of(n)) for n in names])
            for v, names in groups.items()
        }

        for variant, transform in VARIANTS.items():
            names = groups[variant]
            events = transform([e for e in recorded if e.name in names])
            assert len({e.name for e in events}) == PER_VARIANT
            before = controller.stats().reconciles
            for event in events:  # the event path: key of the event -> reconcile from the cache
                controller.sync_handler(deletion_handling_key(event.object))
            assert controller.stats().reconciles - before == len(events)
            for name in names:
                assert tenant_set.converged(name, HISTORY[-1]), f"{variant}: {name} not at cpuQuota {HISTORY[-1]}"
            assert write_counts(controller.api, names) == expected_writes[variant], variant

        # The contrast: an edge-triggered handler trusts each event's copy of the Tenant.
        edge_api = CountingApiClient.wrap(api_client)
        core = client.CoreV1Api(edge_api)
        for event in reordered([e for e in recorded if e.name in groups["edge"]]):
            load_module("tenant").reconcile_tenant(event.name, event.object["spec"],
                                                   uid=event.object["metadata"]["uid"], core=core)
        for name in groups["edge"]:
            assert tenant_set.converged(name, HISTORY[0])  # stale: the oldest event came last
            assert not tenant_set.converged(name, HISTORY[-1])
        assert len(write_counts(edge_api, groups["edge"])) > len(expected_writes["edge"])  # and extra writes
