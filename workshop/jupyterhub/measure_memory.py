"""Measure what one learner's server holds in memory, to size ``singleuser.memory`` in values.yaml.

A learner's pod runs, besides JupyterLab, the whole lab cluster as child processes (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kwok), a notebook kernel, and the
kopf operator that kernel starts. Kubernetes kills the pod's biggest process (the
kube-apiserver) when the pod passes its memory limit, so the limit is sized from what
these processes really hold, measured here on a real cluster, not guessed.

Method, in order (``python workshop/jupyterhub/measure_memory.py``, from the checkout's venv):

1. ``operatorlab cluster up --name hubmeasure`` (the CLI a learner's start script runs);
2. a Jupyter server (``jupyter lab``, what ``jupyterhub-singleuser`` runs) and an ipykernel
   started through it the way JupyterLab starts one, which imports what the lessons import,
   starts the Tenant operator as a child (as lesson 04 does), creates Tenants and waits
   until each is Ready, then deletes them;
3. every second during that work: the resident set (``VmRSS`` in ``/proc/<pid>/status``) of
   each process, summed; at the end each process's peak (``VmHWM``), summed;
4. everything is stopped and the cluster deleted (``cluster down --purge``).

RSS counts the pages a process touched, its own binary's pages included: what the pod's
memory cgroup is charged for them, bar page cache (etcd's files), which the kernel can
reclaim before it kills anything. Prints a Markdown table for workshop/jupyterhub/README.md.
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

#: What the kernel runs: the lessons' imports, then lesson 04's loop (operator as a child, Tenants).
KERNEL_WORK = """
import matplotlib.pyplot, ipywidgets, kopf, kubernetes
from operatorlab.operators import OperatorProcess, operator_path
from operatorlab.tenants import Tenants
from operatorlab.wait import eventually
tenants = Tenants()
operator = OperatorProcess(operator_path("tenant")).start()
names = [f"measure-{i}" for i in range(COUNT)]
for name in names:
    tenants.create(name, cpu_quota="1")
for name in names:
    eventually(lambda: tenants.phase(name) == "Ready", timeout=60, message=f"Tenant {name} Ready")
tenants.remove(names)
print("operator pid", operator.identity.pid)
"""


def _status_kib(pid: int, field: str) -> int:
    """One ``kB`` field of ``/proc/<pid>/status`` (0 if the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in lines if line.startswith(f"{field}:")), 0)


def _cpu_seconds(pid: int) -> float:
    """CPU time ``pid`` used so far, user + system (``/proc/<pid>/stat`` fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    """``pid``'s children, grandchildren, ... (from ``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                kids = [int(k) for k in task.read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def _name(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode() for a in argv if a]
    if "ipykernel_launcher" in " ".join(words):
        return "ipykernel (notebook kernel)"
    if "kopf" in words:
        return "kopf Tenant operator (kernel's child)"
    if any(w.endswith("jupyter-lab") for w in words):
        return "jupyter lab server"
    return Path(words[0]).name if words else "?"


def _mib(kib: int) -> float:
    return kib / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="hubmeasure", help="the cluster to start and delete (default hubmeasure)")
    parser.add_argument("--tenants", type=int, default=5, help="Tenants the kernel creates (default 5)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to wait after start-up (default 15)")
    args = parser.parse_args(argv)

    from jupyter_client import BlockingKernelClient

    from operatorlab.cluster import LocalCluster
    from operatorlab.cluster.process import free_port

    cli = [sys.executable, "-m", "operatorlab.cli"]
    started = time.monotonic()
    subprocess.run([*cli, "cluster", "up", "--name", args.name], check=True, stdout=subprocess.DEVNULL)
    up_seconds = time.monotonic() - started
    cluster = LocalCluster(args.name)  # reads the state `cluster up` wrote: pids and ports
    env = {**os.environ, **cluster.env()}
    port, token = free_port(), "measure"
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("jupyter")), "lab", "--no-browser", f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", "--allow-root", f"--ServerApp.root_dir={Path.cwd()}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    peak_sum = 0
    samples: list[dict[int, int]] = []

    def pids() -> list[int]:
        return [row.pid for row in cluster.status() if row.pid] + [server.pid, *_descendants(server.pid)]

    def sample() -> None:
        nonlocal peak_sum
        rss = {pid: _status_kib(pid, "VmRSS") for pid in pids()}
        samples.append(rss)
        peak_sum = max(peak_sum, sum(rss.values()))

    def cpu() -> tuple[float, float]:
        """(seconds of CPU used by every process so far, now)."""
        return sum(_cpu_seconds(pid) for pid in pids()), time.monotonic()

    try:
        kernel_id = _start_kernel(port, token)
        idle_from = cpu()
        time.sleep(args.settle)
        idle_to = cpu()
        sample()
        idle = dict(samples[-1])
        connection = _connection_file(env, kernel_id)
        client = BlockingKernelClient(connection_file=str(connection))
        client.load_connection_file()
        client.start_channels()
        done = _execute(client, KERNEL_WORK.replace("COUNT", str(args.tenants)), on_wait=sample)
        busy_to = cpu()  # the operator, a child of the kernel, still counts: attached, it lives as long as it
        client.stop_channels()
        busy = {pid: max(s.get(pid, 0) for s in samples) for pid in samples[-1]}
        hwm = {pid: _status_kib(pid, "VmHWM") for pid in busy}
        names = {pid: _name(pid) for pid in busy}
    finally:
        server.terminate()
        server.wait(timeout=30)
        subprocess.run([*cli, "cluster", "down", "--name", args.name, "--purge"], check=True, stdout=subprocess.DEVNULL)

    idle_cores = (idle_to[0] - idle_from[0]) / (idle_to[1] - idle_from[1])
    busy_cores = (busy_to[0] - idle_to[0]) / (busy_to[1] - idle_to[1])
    print(f"cluster up in {up_seconds:.1f}s; kernel: {done.strip()}")
    print(f"CPU: {idle_cores:.2f} cores idle ({args.settle:.0f} s), {busy_cores:.2f} cores while the kernel "
          f"worked ({busy_to[1] - idle_to[1]:.0f} s)")
    print("\n| process | RSS idle (MiB) | RSS max while busy (MiB) | peak VmHWM (MiB) |\n|---|---:|---:|---:|")
    for pid in sorted(busy, key=lambda p: -busy[p]):
        print(f"| {names[pid]} | {_mib(idle.get(pid, 0)):.0f} | {_mib(busy[pid]):.0f} | {_mib(hwm[pid]):.0f} |")
    print(f"| **sum** | {_mib(sum(idle.values())):.0f} | {_mib(peak_sum):.0f} (highest sampled sum) "
          f"| {_mib(sum(hwm.values())):.0f} |")
    return 0


def _start_kernel(port: int, token: str) -> str:
    """Start a python3 kernel through the server's REST API, as JupyterLab does; return its id."""
    import json
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/kernels", data=b'{"name": "python3"}', method="POST",
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (a fixed loopback URL)
                return str(json.load(response)["id"])
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _connection_file(env: dict[str, str], kernel_id: str) -> Path:
    runtime = subprocess.run([str(Path(sys.executable).with_name("jupyter")), "--runtime-dir"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
    return Path(runtime) / f"kernel-{kernel_id}.json"


def _execute(client, code: str, *, on_wait: Callable[[], None]) -> str:
    """Run ``code`` in the kernel, calling ``on_wait`` about every second until it finishes; its stdout."""
    msg_id = client.execute(code)
    out: list[str] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        on_wait()
        try:
            msg = client.get_iopub_msg(timeout=1)
        except queue.Empty:  # nothing printed this second
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            raise RuntimeError("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out)
    raise TimeoutError("the kernel's work did not finish in 300 s")


if __name__ == "__main__":
    sys.exit(main())
