"""API requests of the hand-written controllers at 10, 100 and 1,000 Tenants.

For each size, on a real cluster, with the Tenants created directly (no operator running):

- **polling** (:class:`~operatorlab.controllers.polling.PollingController`): one tick
  that converges the new Tenants, then one steady-state tick (nothing to change),
  whose requests and duration are the "per tick" numbers;
- **informer** (:class:`~operatorlab.controllers.informer.InformerController`, a fresh
  one per size, 2 workers, no periodic resync), the same work split into its phases:
  *start* (LIST + WATCH + the first reconcile of every Tenant, all already converged),
  *idle* (``IDLE_SECONDS`` with no change: one polling interval's worth),
  *one change* (one Tenant's ``cpuQuota`` patched, until its quota follows) and
  *one resync* (every cached Tenant re-queued and reconciled).

Requests are counted by each controller's own
:class:`~operatorlab.controllers.metrics.CountingApiClient` (every HTTP request it
sent), so other clients of the cluster do not blur them.

Used by ``python -m bench`` (``make bench``), which appends :func:`markdown` to
``bench/results/latest.md``. Alone: ``python -m bench.controllers [--sizes 10,100]``
starts (or reuses) the ``bench`` cluster, runs, prints the section and replaces it
in ``latest.md``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import report
from bench.proc import machine

if TYPE_CHECKING:
    from operatorlab.controllers.informer import InformerController
    from operatorlab.controllers.metrics import RequestCounts
    from operatorlab.tenants import Tenants

SIZES = (10, 100, 1000)
IDLE_SECONDS = 5.0
PREFIX = "bench-ctl-"
HEADING = "## Hand-written controllers: API requests"
RESULTS = Path(__file__).parent / "results"

Log = Callable[[str], None]


@dataclass(frozen=True)
class Row:
    """What one size measured. Requests are totals of one phase; seconds are wall time."""

    tenants: int
    create_seconds: float
    converge_requests: int
    converge_seconds: float
    tick_requests: int
    tick_detail: str
    tick_seconds: float
    start_requests: int
    start_detail: str
    start_seconds: float
    idle_requests: int
    change_requests: int
    change_detail: str
    resync_requests: int
    resync_seconds: float


def _detail(counts: RequestCounts) -> str:
    """``1 list tenants, 100 get namespaces, ...`` from a RequestCounts."""
    return ", ".join(f"{n:.0f} {verb} {resource}" for (verb, resource), n in sorted(counts.by_verb_resource.items()))


def run(api_client, sizes: Sequence[int] = SIZES, *, cleanup: bool = True, log: Log = print) -> list[Row]:
    """Measure both controllers at each size (ascending); return one :class:`Row` per size.

    Creates Tenants ``bench-ctl-<i>`` on the cluster of ``api_client``. With
    ``cleanup`` it deletes them and their namespaces at the end (the namespace
    controller takes minutes for 1,000); skip that when the cluster is deleted next.

    Raises:
        AssertionError: a controller did not converge in time.
    """
    from operatorlab.controllers.informer import InformerController
    from operatorlab.controllers.polling import PollingController
    from operatorlab.tenants import Tenants

    tenants = Tenants(api_client)
    poller = PollingController(api_client, interval=3600.0)  # ticked by hand
    rows: list[Row] = []
    made = 0
    try:
        for size in sorted(sizes):
            started = time.monotonic()
            for i in range(made, size):
                tenants.create(f"{PREFIX}{i}", cpu_quota="1")
                if (i + 1) % 100 == 0 or i + 1 == size:
                    log(f"[bench] controllers: {i + 1}/{size} Tenants created ({time.monotonic() - started:.1f} s)")
            create_seconds = time.monotonic() - started
            made = size

            converge = poller.tick()
            if converge.failed:
                raise AssertionError(f"polling: {converge.failed} reconciles failed while converging {size} Tenants")
            log(f"[bench] controllers: polling converged {size} Tenants in {converge.seconds:.1f} s "
                f"({converge.requests.total:.0f} requests)")
            tick = poller.tick()
            log(f"[bench] controllers: polling steady tick at {size}: "
                f"{tick.requests.total:.0f} requests, {tick.seconds:.2f} s")

            informer = InformerController(api_client, workers=2, resync_period=None)
            try:
                phases = _informer_phases(informer, tenants, size)
            finally:
                informer.stop()
            log(f"[bench] controllers: informer at {size}: start {phases.start.total:.0f}, "
                f"idle {phases.idle.total:.0f}, change {phases.change.total:.0f}, "
                f"resync {phases.resync.total:.0f} requests")
            rows.append(Row(
                tenants=size, create_seconds=create_seconds,
                converge_requests=int(converge.requests.total), converge_seconds=converge.seconds,
                tick_requests=int(tick.requests.total), tick_detail=_detail(tick.requests), tick_seconds=tick.seconds,
                start_requests=int(phases.start.total), start_detail=_detail(phases.start),
                start_seconds=phases.start_seconds,
                idle_requests=int(phases.idle.total),
                change_requests=int(phases.change.total), change_detail=_detail(phases.change),
                resync_requests=int(phases.resync.total), resync_seconds=phases.resync_seconds,
            ))
    finally:
        poller.stop()
        if cleanup:
            started = time.monotonic()
            tenants.remove([f"{PREFIX}{i}" for i in range(made)], force=True, timeout=1200)
            log(f"[bench] controllers: {made} Tenants and namespaces removed ({time.monotonic() - started:.0f} s)")
    return rows


@dataclass(frozen=True)
class _InformerPhases:
    """The requests of each informer phase at one size, and the wall time of the long ones."""

    start: RequestCounts
    start_seconds: float
    idle: RequestCounts
    change: RequestCounts
    resync: RequestCounts
    resync_seconds: float


def _informer_phases(informer: InformerController, tenants: Tenants, size: int) -> _InformerPhases:
    """Start ``informer`` on ``size`` converged Tenants, then idle, change one, resync all.

    A function of its own so that each closure below sees this size's informer and
    Tenant count, never a later loop iteration's. The caller stops the informer.

    Raises:
        AssertionError: a phase did not finish in time.
    """
    from kubernetes.utils import parse_quantity

    from operatorlab.wait import eventually

    def reconciles() -> int:
        return informer.stats().reconciles

    def idle() -> None:
        eventually(lambda: (m := informer.queue_metrics()).depth == 0 and m.processing == 0,
                   timeout=600, message="informer queue idle")

    def phase(action: Callable[[], None]) -> tuple[RequestCounts, float]:
        before, t0 = informer.api.counts(), time.monotonic()
        action()
        return informer.api.counts() - before, time.monotonic() - t0

    def start() -> None:
        informer.start()
        eventually(lambda: informer.reflector.watches >= 1, timeout=60, message="informer WATCH open")
        eventually(lambda: reconciles() >= size, timeout=600, message="first reconcile of every Tenant")
        idle()

    cpu = str(size)  # a new value at every size

    def change() -> None:
        before = reconciles()
        tenants.patch_spec(f"{PREFIX}0", cpuQuota=cpu)
        # as quantities: the API server stores 1000 as "1k"
        eventually(lambda: parse_quantity(tenants.quota(f"{PREFIX}0")["limits.cpu"]) == parse_quantity(cpu),
                   timeout=60, message="change reconciled")
        eventually(lambda: reconciles() > before, timeout=60, message="change counted")
        idle()

    def resync() -> None:
        before = reconciles()
        informer.informer.resync()
        eventually(lambda: reconciles() >= before + size, timeout=600, message="resync reconciled")
        idle()

    start_counts, start_seconds = phase(start)
    idle_counts, _ = phase(lambda: time.sleep(IDLE_SECONDS))
    change_counts, _ = phase(change)
    resync_counts, resync_seconds = phase(resync)
    return _InformerPhases(start=start_counts, start_seconds=start_seconds, idle=idle_counts,
                           change=change_counts, resync=resync_counts, resync_seconds=resync_seconds)


def stamp() -> dict[str, Any]:
    """When, on what machine and under what load (the 1-minute load average) a run measured."""
    import os

    return {"measured": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(),
            "load_average": round(os.getloadavg()[0], 1)}


def markdown(rows: Sequence[Row], measured: dict[str, Any]) -> str:
    """The results as a markdown section (heading, when and where, table, notes)."""
    table = [
        "| Tenants | polling: requests per tick | polling: s per tick | informer: start (LIST+WATCH+reconcile) "
        "| informer: idle "
        f"{IDLE_SECONDS:.0f} s | informer: one change | informer: one resync |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        table.append(
            f"| {r.tenants:,} | {r.tick_requests:,} | {r.tick_seconds:.2f} "
            f"| {r.start_requests:,} ({r.start_seconds:.1f} s) "
            f"| {r.idle_requests:,} | {r.change_requests:,} "
            f"| {r.resync_requests:,} ({r.resync_seconds:.1f} s) |")
    details = [
        "| Tenants | created in | polling: converging tick | polling: steady tick "
        "| informer: start | informer: one change |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        details.append(
            f"| {r.tenants:,} | {r.create_seconds:.1f} s "
            f"| {r.converge_requests:,} requests, {r.converge_seconds:.1f} s "
            f"| {r.tick_detail} | {r.start_detail} | {r.change_detail} |")
    return "\n".join([
        HEADING, "",
        f"{measured['measured']}, {measured['machine']}, load average {measured['load_average']} while it ran "
        "(load stretches the seconds, not the request counts); also in `controllers.json`, which lessons 01 "
        "and 03 quote.", "",
        "Requests counted by each controller's own `CountingApiClient`. Polling pays its tick every "
        "interval whether or not anything changed; the informer pays its start once, nothing while "
        "idle, a constant per change, and a resync only when one is configured (none by default here).",
        "", *table, "", "Breakdown:", "", *details, "",
    ])


def save(rows: Sequence[Row], measured: dict[str, Any], path: Path = RESULTS / "controllers.json") -> None:
    """The rows as JSON, with :func:`stamp`'s when, where and load: lessons 01 and 03 quote them."""
    import json

    path.write_text(json.dumps({**measured, "idle_seconds": IDLE_SECONDS, "rows": [asdict(r) for r in rows]},
                               indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.controllers", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="Tenant counts (default 10,100,1000)")
    parser.add_argument("--keep-cluster", action="store_true", help="leave the bench cluster running")
    args = parser.parse_args()
    from kubernetes import config

    from operatorlab import paths
    from operatorlab.cluster import LocalCluster, manifests

    started = time.monotonic()
    cluster = LocalCluster("bench")
    cluster.up(log=lambda _: None)
    try:
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        manifests.apply_crds(api, paths.crds_dir())
        rows = run(api, [int(s) for s in args.sizes.split(",")], cleanup=args.keep_cluster)
    finally:
        if not args.keep_cluster:
            cluster.down(purge=True, log=lambda _: None)
    measured = stamp()
    section = markdown(rows, measured)
    report.write_section(HEADING, section)
    save(rows, measured)
    print(section)
    print(f"[bench] controllers: done in {time.monotonic() - started:.0f} s; written to {RESULTS / 'latest.md'}")


if __name__ == "__main__":
    main()
