"""``make bench``: measure the lab's speed and memory on the real control plane.

Measures, on a private cluster named ``bench`` (deleted afterwards):

- ``cluster up`` from nothing (fresh PKI and etcd) and again with a running cluster (reuse),
  taken from the cluster-start comparison below;
- resident memory (RSS) of each control-plane process, idle after start-up;
- Tenant create → namespace observed latency through the kopf Tenant operator, timed by
  a watch on namespaces (the moment the API server reports ADDED);
- API requests of the hand-written controllers (polling vs informer) at 10/100/1,000
  Tenants: ``bench/controllers.py``, appended as its own section;
- cluster start side by side, ours vs ``kwokctl`` vs an envtest-style start, with our
  start's steps: ``bench/cluster_start.py``, its own section and ``cluster-start.png``
  (builds kwokctl from the pinned kwok module first, if missing);
- 1,000 Tenants created at once, four implementations side by side (kopf, lesson 03's
  informer, the kubernetes client's informer, a Go controller-runtime reference):
  ``bench/scale.py``, its own section and ``bench/results/tenants-at-scale.png``;
- LIST against a streaming list (KEP-3157) at 10,000 ConfigMaps: time to synced, the client's
  peak memory, the API server's RSS: ``bench/streaming.py``, its own section and
  ``bench/results/streaming.png``.

Writes ``bench/results/latest.md`` (a table) and ``bench/results/tenant-latency.png``.
Control-plane build times come from ``controlplane/build.sh``'s own log, not from here.

Run: ``make bench`` (or ``.venv/bin/python -m bench [--tenants N] [--start-runs N]``); one part
alone: ``.venv/bin/python -m bench --only cluster [--start-runs N]`` (the cluster start) or
``.venv/bin/python -m bench --only scale --tenants 1000`` (Tenants at scale) or
``.venv/bin/python -m bench --only streaming`` (LIST against a streaming list).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench import report, scale, streaming
from bench.proc import machine, status_mib

if TYPE_CHECKING:
    from operatorlab.cluster import LocalCluster

RESULTS = Path(__file__).parent / "results"


def bench_memory() -> tuple[LocalCluster, dict[str, float]]:
    """Start the ``bench`` cluster from nothing; each component's RSS once start-up settled."""
    from operatorlab.cluster import LocalCluster

    cluster = LocalCluster("bench")
    cluster.down(purge=True, log=lambda _: None)
    cluster.up(log=lambda _: None)
    time.sleep(10)  # let start-up allocations settle before reading memory
    return cluster, {row.name: status_mib(row.pid) for row in cluster.status() if row.pid}


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
    parser.add_argument("--tenants", type=int, default=None,
                        help="Tenants to time (default 30); with --only scale: the scale part's size (default 1000)")
    parser.add_argument("--controller-tenants", default="10,100,1000",
                        help="Tenant counts for the controllers' API requests (default 10,100,1000)")
    parser.add_argument("--start-runs", type=int, default=3,
                        help="starts of each kind to time: ours cold and warm, kwokctl, envtest-style (default 3)")
    parser.add_argument("--only", choices=["cluster", "scale", "streaming"],
                        help="cluster: only the cluster-start comparison (ours, kwokctl, envtest-style); "
                             "scale: only Tenants at scale (--tenants is then its size); "
                             "streaming: only LIST against a streaming list")
    parser.add_argument("--streaming-objects", type=int, default=10000,
                        help="streaming part: ConfigMaps to sync (default 10000)")
    parser.add_argument("--streaming-payload", type=int, default=1024,
                        help="streaming part: bytes of payload per ConfigMap (default 1024)")
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
    if args.only == "streaming":
        run_streaming(args)
        return
    from bench import cluster_start

    start_results = cluster_start.run(args.start_runs, log=lambda line: print(line, flush=True))
    cluster_start.plot(start_results, RESULTS / "cluster-start.png")
    start_section = cluster_start.markdown(start_results)
    print(start_section)
    if args.only == "cluster":
        report.write_section(cluster_start.HEADING, start_section)
        print(f"[bench] written to {RESULTS / 'latest.md'}")
        return
    cold, reuse = start_results.kinds[0].times, start_results.kinds[1].times
    print("[bench] memory of each component, idle after start-up...", flush=True)
    cluster, memory = bench_memory()
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
        measured = controllers.stamp()  # when and under what load: as the run ends
    finally:
        cluster.down(purge=True, log=lambda _: None)
    plot(latencies, RESULTS / "tenant-latency.png")
    rows = [
        ("cluster up, cold (fresh PKI + etcd), median", f"{statistics.median(cold):.1f} s",
         f"n={len(cold)}, all: " + ", ".join(f"{x:.1f}" for x in cold)),
        ("cluster up, already running (reuse), median", f"{statistics.median(reuse):.2f} s", f"n={len(reuse)}"),
        *[(f"RSS {name}", f"{mib:.0f} MiB", "idle, 10 s after start") for name, mib in memory.items()],
        ("RSS control plane total", f"{sum(memory.values()):.0f} MiB", ""),
        ("Tenant create → namespace, p50", f"{1000 * percentile(latencies, 0.5):.0f} ms", f"n={len(latencies)}"),
        ("Tenant create → namespace, p95", f"{1000 * percentile(latencies, 0.95):.0f} ms", ""),
    ]
    table = "| measure | value | notes |\n|---|---|---|\n" + "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    (RESULTS / "latest.md").write_text(
        f"# Operator Lab benchmarks\n\n{time.strftime('%Y-%m-%d %H:%M')}, {machine()}\n\n{table}\n\n"
        "![Tenant latency](tenant-latency.png)\n")
    print(table)
    section = controllers.markdown(controller_rows, measured)
    report.write_section(controllers.HEADING, section)
    controllers.save(controller_rows, measured)
    print(section)
    report.write_section(cluster_start.HEADING, start_section)
    run_scale(args.scale_tenants, args)
    run_streaming(args)
    print(f"[bench] written to {RESULTS / 'latest.md'}")


def run_scale(tenants: int, args: argparse.Namespace) -> None:
    """The scale part (``bench/scale.py``): run, save the raw numbers, write the section and figure."""
    names = [n for n in args.implementations.split(",") if n]
    print(f"[bench] scale: {tenants} Tenants at once, {', '.join(names)}...", flush=True)
    results = scale.run(names, tenants, steady=args.steady, save_to=RESULTS / f"scale-{tenants}.json",
                        log=lambda line: print(line, flush=True))
    before = [r for r in scale.load(args.before) if r.name == "kopf"] if args.before else []
    scale.plot(results, RESULTS / "tenants-at-scale.png", before=before)
    section = scale.markdown(results, machine=machine(), before=before)
    report.write_section(scale.HEADING, section)
    print(section)


def run_streaming(args: argparse.Namespace) -> None:
    """The streaming part (``bench/streaming.py``): run, save the raw numbers, write the section and figure."""
    print(f"[bench] streaming: LIST against a streaming list at {args.streaming_objects} ConfigMaps...", flush=True)
    results = streaming.run(args.streaming_objects, args.streaming_payload, log=lambda line: print(line, flush=True))
    streaming.save(results, RESULTS / "streaming.json")
    streaming.plot(results, RESULTS / "streaming.png")
    section = streaming.markdown(results)
    report.write_section(streaming.HEADING, section)
    print(section)


if __name__ == "__main__":
    main()
