"""LIST against a streaming list (KEP-3157) at scale: time to synced, the client's memory, the API server's.

On a private cluster ``bench-streaming`` (deleted afterwards): ``--streaming-objects`` ConfigMaps (default
10,000) of ``--streaming-payload`` bytes (default 1 KiB) in one namespace, then each way of getting
in sync (:mod:`operatorlab.controllers.sync_cost`, the code lesson 13 measures with) run
``RUNS`` times timed, the fastest kept, and once traced for the client's peak memory. The API
server's memory is its VmRSS sampled every 10 ms during the timed runs, its growth over the
RSS before (the largest of the runs). Writes the section ``## LIST against a streaming list`` of
``bench/results/latest.md``, ``bench/results/streaming.json`` and ``bench/results/streaming.png``.

Run alone: ``.venv/bin/python -m bench --only streaming [--streaming-objects N]``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.proc import machine

HEADING = "## LIST against a streaming list"
RUNS = 3
NAMESPACE = "bench-streaming"
CLUSTER = "bench-streaming"  # its own: the rest of the bench uses "bench"


def run(objects: int, payload: int, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure on a fresh cluster of its own; return the results (also what ``streaming.json`` holds)."""
    from kubernetes import client, config

    from operatorlab.cluster import LocalCluster
    from operatorlab.controllers import sync_cost

    cluster = LocalCluster(CLUSTER)
    cluster.down(purge=True, log=lambda _: None)
    cluster.up(log=lambda _: None)
    try:
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        started = time.monotonic()
        sync_cost.fill(client.CoreV1Api(api), NAMESPACE, objects, payload_bytes=payload, workers=8)
        log(f"[bench] streaming: {objects} ConfigMaps of {payload} bytes made in {time.monotonic() - started:.0f} s")
        pid = next(row.pid for row in cluster.status() if row.name == "kube-apiserver")
        path = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
        modes: dict[str, Any] = {}
        for mode in sync_cost.MODES:
            timed = [sync_cost.measure(api, path, mode, apiserver_pid=pid) for _ in range(RUNS)]
            traced = sync_cost.measure(api, path, mode, traced=True)
            modes[mode] = {"seconds": [t.seconds for t in timed], "objects": timed[0].objects,
                           "client_peak_mib": traced.client_peak_mib,
                           "apiserver_peak_mib": max(t.apiserver_peak_mib for t in timed),
                           "example": asdict(timed[0])}
            log(f"[bench] streaming: {mode}: {min(modes[mode]['seconds']):.2f} s, client peak "
                f"{traced.client_peak_mib:.0f} MiB, apiserver +{modes[mode]['apiserver_peak_mib']:.0f} MiB")
        versions = _versions(api)
    finally:
        cluster.down(purge=True, log=lambda _: None)
    return {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
            "load_average": round(os.getloadavg()[0], 1), "objects": objects, "payload_bytes": payload,
            "runs": RUNS, "versions": versions, "modes": modes}


def _versions(api: Any) -> dict[str, str]:
    from importlib.metadata import version

    from kubernetes import client

    return {"kubernetes": client.VersionApi(api).get_code().git_version, "kubernetes-python": version("kubernetes")}


def save(results: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(results, indent=1) + "\n")


def markdown(results: dict[str, Any]) -> str:
    rows = [f"| way to sync | objects | synced in (fastest of {results['runs']}) | client peak (tracemalloc) "
            "| kube-apiserver RSS growth |", "|---|---|---|---|---|"]
    for mode, m in results["modes"].items():
        rows.append(f"| {mode} | {m['objects']:,} | {min(m['seconds']):.2f} s | {m['client_peak_mib']:.0f} MiB "
                    f"| {m['apiserver_peak_mib']:.0f} MiB |")
    v = results["versions"]
    return (f"{HEADING}\n\n{results['measured']}, {results['machine']}, load average {results['load_average']}; "
            f"Kubernetes {v['kubernetes']}, kubernetes Python client {v['kubernetes-python']}. "
            f"{results['objects']:,} ConfigMaps of {results['payload_bytes']:,} bytes in one namespace, "
            "synced once each way by `operatorlab.controllers.sync_cost` (lesson 13's code): a LIST at "
            "resourceVersion \"\" (unpaged), or a WATCH with sendInitialEvents=true read to its "
            "initial-events-end bookmark. The client's store is the same either way.\n\n" + "\n".join(rows)
            + "\n\n![LIST against a streaming list](streaming.png)\n")


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = results["modes"]
    fig, axes = plt.subplots(1, 3, figsize=(10, 3))
    for axis, (label, value) in zip(axes, (("synced in (s)", lambda m: min(m["seconds"])),
                                           ("client peak (MiB)", lambda m: m["client_peak_mib"]),
                                           ("kube-apiserver RSS growth (MiB)", lambda m: m["apiserver_peak_mib"])),
                                    strict=True):
        axis.bar(list(modes), [value(m) for m in modes.values()], color=["#888", "#1565c0"])
        axis.set_title(label, fontsize=10)
    fig.suptitle(f"{results['objects']:,} ConfigMaps of {results['payload_bytes']:,} bytes "
                 f"({results['versions']['kubernetes']}, {results['machine']}, {results['measured']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
