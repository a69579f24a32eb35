"""``make bench``: measure the lab's speed and memory on the real control plane.

Measures, on a private cluster named ``bench`` (deleted afterwards):

- ``cluster up`` from nothing (fresh PKI and etcd) and again with a running cluster (reuse);
- resident memory (RSS) of each control-plane process, idle after start-up;
- Tenant create → namespace observed latency through the kopf Tenant operator, timed by
  a watch on namespaces (the moment the API server reports ADDED);
- API requests of the hand-written controllers (polling vs informer) at 10/100/1,000
  Tenants: ``bench/controllers.py``, appended as its own section;
- 1,000 Tenants created at once, four implementations side by side (kopf, lesson 03's
  informer, the kubernetes client's informer, a Go controller-runtime reference):
  ``bench/scale.py``, its own section and ``bench/results/tenants-at-scale.png``.

Writes ``bench/results/latest.md`` (a table) and ``bench/results/tenant-latency.png``.
Control-plane build times come from ``controlplane/build.sh``'s own log, not from here.

Run: ``make bench`` (or ``.venv/bin/python -m bench [--tenants N] [--ups N]``); the scale
part alone: ``.venv/bin/python -m bench --only scale --tenants 1000``.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

from bench import scale

RESULTS = Path(__file__).parent / "results"


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB, from ``/proc/<pid>/status`` (VmRSS, kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_cluster_up(ups: int) -> tuple[list[float], float, dict[str, float]]:
    from operatorlab.cluster import LocalCluster

    cold: list[float] = []
    for _ in range(ups):
        cluster = LocalCluster("bench")
        cluster.down(purge=True, log=lambda _: None)
        started = time.monotonic()
        cluster.up(log=lambda _: None)
        cold.append(time.monotonic() - started)
    started = time.monotonic()
    LocalCluster("bench").up(log=lambda _: None)
    reuse = time.monotonic() - started
    time.sleep(10)  # let start-up allocations settle before reading memory
    memory = {row.name: rss_mib(row.pid) for row in cluster.status()}
    return cold, reuse, memory


def bench_tenant_latency(cluster, count: int) -> list[float]:
    """Seconds from each Tenant's create call to its namespace's ADDED watch event."""
    from kubernetes import client, config, watch

    from operatorlab import paths
    from operatorlab.cluster import manifests
    from operatorlab.operators import OperatorProcess, operator_path
    from operatorlab.tenants import TENANT_LABEL, Tenants, namespace_of

    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    manifests.apply_crds(api, paths.crds_dir())
    tenants = Tenants(api)
    seen: dict[str, float] = {}
    stream = watch.Watch()

    def observe() -> None:
        try:
            for event in stream.stream(client.CoreV1Api(api).list_namespace, label_selector=TENANT_LABEL,
                                       timeout_seconds=300):
                if event["type"] == "ADDED":
                    seen.setdefault(event["object"].metadata.name, time.monotonic())
        except Exception:  # noqa: BLE001 - the stream breaks when the cluster stops at the end
            return

    watcher = threading.Thread(target=observe, daemon=True)
    watcher.start()
    time.sleep(1)  # the watch is open before the first create
    latencies = []
    with OperatorProcess(operator_path("tenant"), kubeconfig=cluster.kubeconfig,
                         log_path=cluster.dir / "logs" / "tenant-operator.log"):
        for i in range(count):
            name = f"bench-{i}"
            sent = time.monotonic()
            tenants.create(name, cpu_quota="1")
            deadline = sent + 30
            while namespace_of(name) not in seen and time.monotonic() < deadline:
                time.sleep(0.005)
            latencies.append(seen[namespace_of(name)] - sent)
        tenants.remove([f"bench-{i}" for i in range(count)])
    stream.stop()
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def plot(latencies: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist([1000 * x for x in latencies], bins=20, color="#326ce5")
    ax.set_xlabel("Tenant create → namespace ADDED (ms)")
    ax.set_ylabel("Tenants")
    ax.set_title(f"kopf Tenant operator, local cluster (n={len(latencies)})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--ups", type=int, default=3, help="cold cluster starts to time (default 3)")
    parser.add_argument("--tenants", type=int, default=None,
                        help="Tenants to time (default 30); with --only scale: the scale part's size (default 1000)")
    parser.add_argument("--controller-tenants", default="10,100,1000",
                        help="Tenant counts for the controllers' API requests (default 10,100,1000)")
    parser.add_argument("--only", choices=["scale"], help="run only this part (--tenants is then its size)")
    parser.add_argument("--scale-tenants", type=int, default=1000, help="Tenants of the scale part (default 1000)")
    parser.add_argument("--implementations", default=",".join(scale.IMPLEMENTATIONS),
                        help="scale part: which implementations, in order (default all four)")
    parser.add_argument("--steady", type=float, default=60.0,
                        help="scale part: seconds of steady state to count writes over (default 60)")
    parser.add_argument("--before", type=Path,
                        help="scale part: a JSON of an earlier run (kopf before tuning) to show beside this one")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    if args.only == "scale":
        run_scale(args.tenants or args.scale_tenants, args)
        return
    from operatorlab.cluster import LocalCluster

    RESULTS.mkdir(exist_ok=True)
    print(f"[bench] cluster up x{args.ups} (cold) and once more (reuse)...", flush=True)
    cold, reuse, memory = bench_cluster_up(args.ups)
    cluster = LocalCluster("bench")
    try:
        latency_tenants = args.tenants or 30
        print(f"[bench] Tenant create -> namespace latency x{latency_tenants}...", flush=True)
        latencies = bench_tenant_latency(cluster, latency_tenants)
        from kubernetes import config

        from bench import controllers

        sizes = [int(n) for n in args.controller_tenants.split(",")]
        print(f"[bench] hand-written controllers: API requests at {sizes} Tenants...", flush=True)
        controller_rows = controllers.run(config.new_client_from_config(config_file=str(cluster.kubeconfig)), sizes,
                                          cleanup=False, log=lambda line: print(line, flush=True))  # purged next
    finally:
        cluster.down(purge=True, log=lambda _: None)
    plot(latencies, RESULTS / "tenant-latency.png")
    rows = [
        ("cluster up, cold (fresh PKI + etcd), median", f"{statistics.median(cold):.1f} s",
         f"n={len(cold)}, all: " + ", ".join(f"{x:.1f}" for x in cold)),
        ("cluster up, already running (reuse)", f"{reuse:.2f} s", ""),
        *[(f"RSS {name}", f"{mib:.0f} MiB", "idle, 10 s after start") for name, mib in memory.items()],
        ("RSS control plane total", f"{sum(memory.values()):.0f} MiB", ""),
        ("Tenant create → namespace, p50", f"{1000 * percentile(latencies, 0.5):.0f} ms", f"n={len(latencies)}"),
        ("Tenant create → namespace, p95", f"{1000 * percentile(latencies, 0.95):.0f} ms", ""),
    ]
    table = "| measure | value | notes |\n|---|---|---|\n" + "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    (RESULTS / "latest.md").write_text(
        f"# Operator Lab benchmarks\n\n{time.strftime('%Y-%m-%d %H:%M')}, {_machine()}\n\n{table}\n\n"
        "![Tenant latency](tenant-latency.png)\n")
    print(table)
    section = controllers.markdown(controller_rows)
    controllers.write_section(section)
    print(section)
    run_scale(args.scale_tenants, args)
    print(f"[bench] written to {RESULTS / 'latest.md'}")


def run_scale(tenants: int, args: argparse.Namespace) -> None:
    """The scale part (``bench/scale.py``): run, save the raw numbers, write the section and figure."""
    names = [n for n in args.implementations.split(",") if n]
    print(f"[bench] scale: {tenants} Tenants at once, {', '.join(names)}...", flush=True)
    results = scale.run(names, tenants, steady=args.steady, save_to=RESULTS / f"scale-{tenants}.json",
                        log=lambda line: print(line, flush=True))
    before = [r for r in scale.load(args.before) if r.name == "kopf"] if args.before else []
    scale.plot(results, RESULTS / "tenants-at-scale.png", before=before)
    section = scale.markdown(results, machine=_machine(), before=before)
    scale.write_section(section)
    print(section)


def _machine() -> str:
    import os

    mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal:"))
    return f"{os.cpu_count()} CPUs, {mem / 1024 / 1024:.0f} GiB"


if __name__ == "__main__":
    main()
