"""Cluster start, side by side: our ``LocalCluster.up``, ``kwokctl`` and an envtest-style start.

All three run on this machine, one after another, from the same cached binaries
(``KUBEBUILDER_ASSETS`` or ``<cache>/<kubernetes-version>/bin``); nothing is downloaded:

- **ours**: :meth:`LocalCluster.up <operatorlab.cluster.LocalCluster.up>` cold (fresh
  PKI and etcd data) and warm (the cluster already runs), with the time of each of its
  steps (:attr:`LocalCluster.steps`). Ready means what every lab needs: all five
  components healthy, the simulated Node Ready and the ``default`` ServiceAccount made.
- **kwokctl**: ``kwokctl create cluster --runtime binary --wait``, every binary pointed
  at the cached ones (built from the same pinned kwok module by ``controlplane/build.sh
  kwokctl``), in a temporary ``KWOK_WORKDIR``. Its binary runtime starts etcd,
  kube-apiserver, kube-controller-manager, kube-scheduler and kwok-controller by default
  (sigs.k8s.io/kwok ``pkg/config/vars.go``), fork-execs them group by group without
  waiting for each, and ``--wait`` returns when ``kubectl get --raw /healthz`` says ok
  (``pkg/kwokctl/runtime/cluster_status.go``): no Node, no ServiceAccount. So two times:
  when kwokctl returns, and when the ``default`` ServiceAccount exists (polled here).
- **envtest-style**: what controller-runtime's envtest starts, etcd then kube-apiserver,
  each waited for (``pkg/internal/testing/process``), until ``/readyz``; PKI included,
  as envtest makes its own too.

RSS is the sum over each start's control-plane processes (``VmRSS`` in
``/proc/<pid>/status``), read ``settle`` seconds after it was ready.

Used by ``python -m bench`` (``make bench``); alone: ``python -m bench --only cluster``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.proc import machine, status_mib

RESULTS = Path(__file__).parent / "results"
HEADING = "## Cluster start: ours, kwokctl, envtest-style"
Log = Callable[[str], None]


@dataclass
class Kind:
    """One kind of start: its name, what it runs and what ready means, and its measurements."""

    name: str
    components: str
    ready: str
    times: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


@dataclass
class Results:
    kinds: list[Kind]
    steps: dict[str, list[float]]  #: ours, cold: seconds from the start of up() to the end of each step
    versions: dict[str, str]
    machine: str
    date: str


def rss_mib(pids: list[int]) -> float:
    """Sum of the resident set sizes of ``pids`` in MiB."""
    return sum(status_mib(pid) for pid in pids)


def kwokctl_path() -> Path:
    """Where ``controlplane/build.sh kwokctl`` puts kwokctl: ``<cache>/<kubernetes-version>/bench/``."""
    from operatorlab import paths
    from operatorlab.cluster import binaries

    return paths.cache_root() / binaries.kubernetes_version() / "bench" / "kwokctl"


def ensure_kwokctl(log: Log = print) -> Path:
    """Build kwokctl from the pinned kwok module if it is missing (minutes, once)."""
    path = kwokctl_path()
    if not os.access(path, os.X_OK):
        from operatorlab import paths

        log("[bench] building kwokctl from the pinned kwok module (once)...")
        subprocess.run(["bash", str(paths.repo_root() / "controlplane" / "build.sh"), "kwokctl"],
                       check=True, stdout=subprocess.DEVNULL)
    return path


# -- ours ---------------------------------------------------------------------------------


def bench_ours(cold: Kind, warm: Kind, steps: dict[str, list[float]], settle: float, root: Path, log: Log) -> None:
    """One cold start (after ``down --purge``), then one more ``up`` of the running cluster."""
    from operatorlab.cluster import LocalCluster

    cluster = LocalCluster("bench-start", root=root)
    cluster.down(purge=True, log=lambda _: None)
    try:
        started = time.monotonic()
        cluster.up(log=lambda _: None)
        cold.times.append(time.monotonic() - started)
        for name, at in cluster.steps.items():
            steps.setdefault(name, []).append(at)
        time.sleep(settle)
        cold.rss_mib.append(rss_mib([row.pid for row in cluster.status() if row.pid]))
        started = time.monotonic()
        LocalCluster("bench-start", root=root).up(log=lambda _: None)
        warm.times.append(time.monotonic() - started)
        warm.rss_mib.append(cold.rss_mib[-1])
    finally:
        cluster.down(purge=True, log=lambda _: None)
    log(f"[bench]   ours: cold {cold.times[-1]:.2f} s ("
        + ", ".join(f"{k} {v:.2f}" for k, v in cluster.steps.items()) + f"), warm {warm.times[-1]:.2f} s")


# -- kwokctl --------------------------------------------------------------------------------


def bench_kwokctl(i: int, returned: Kind, with_sa: Kind, settle: float, root: Path, log: Log) -> None:
    """One ``kwokctl create cluster``, timed until it returns and until the ``default`` ServiceAccount; deleted."""
    from operatorlab.cluster import binaries

    bins = binaries.find()
    kwokctl = ensure_kwokctl(log)
    workdir = root / "kwok"
    # kwokctl runs the first kubectl on PATH (runtime/cluster_tools.go): ours, not whatever else is there.
    env = {**os.environ, "KWOK_WORKDIR": str(workdir), "KWOK_KUBECTL_BINARY": str(bins.path("kubectl")),
           "PATH": f"{bins.dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    name = f"bench-{i}"
    argv = [str(kwokctl), "create", "cluster", "--name", name, "--runtime", "binary", "--wait", "2m",
            "--kubeconfig", str(root / "kwok.kubeconfig"),
            f"--etcd-binary={bins.path('etcd')}",
            f"--kube-apiserver-binary={bins.path('kube-apiserver')}",
            f"--kube-controller-manager-binary={bins.path('kube-controller-manager')}",
            f"--kube-scheduler-binary={bins.path('kube-scheduler')}",
            f"--kwok-controller-binary={bins.path('kwok')}"]
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    returned.times.append(time.monotonic() - started)
    cluster_dir = workdir / "clusters" / name
    try:
        if done.returncode != 0 or "Cluster is ready" not in done.stderr + done.stdout:
            raise RuntimeError(f"kwokctl create cluster failed ({done.returncode}):\n{done.stderr[-3000:]}")
        if "Download" in done.stderr + done.stdout:
            raise RuntimeError(f"kwokctl downloaded something:\n{done.stderr[-3000:]}")
        _wait_default_service_account(cluster_dir / "kubeconfig.yaml")
        with_sa.times.append(time.monotonic() - started)
        time.sleep(settle)
        returned.rss_mib.append(rss_mib(_kwokctl_pids(cluster_dir)))
    finally:
        subprocess.run([str(kwokctl), "delete", "cluster", "--name", name], env=env,
                       capture_output=True, timeout=120, check=False)
    log(f"[bench]   kwokctl #{i + 1}: returned {returned.times[-1]:.2f} s, "
        f"default ServiceAccount {with_sa.times[-1]:.2f} s")
    with_sa.rss_mib = returned.rss_mib


def _kwokctl_pids(cluster_dir: Path) -> list[int]:
    """kwokctl's binary runtime writes each component's pid to ``<cluster>/pids/<binary>.pid``."""
    return [int(p.read_text().strip()) for p in (cluster_dir / "pids").glob("*.pid")]


def _wait_default_service_account(kubeconfig: Path, timeout: float = 60.0) -> None:
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    deadline = time.monotonic() + timeout
    while True:
        try:
            core.read_namespaced_service_account("default", "default")
            return
        except client.ApiException as e:
            if e.status != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


# -- envtest-style --------------------------------------------------------------------------


def bench_envtest(i: int, kind: Kind, settle: float, root: Path, log: Log) -> None:
    """etcd, wait for ``/health``; kube-apiserver, wait for ``/readyz`` (envtest polls every 100 ms)."""
    import ssl

    from operatorlab.cluster import binaries, pki, process

    bins = binaries.find()
    d = root / f"envtest-{i}"
    pids: list[int] = []
    started = time.monotonic()
    try:
        keys = pki.create(d / "pki")
        etcd_port, peer_port, api_port = process.free_port(), process.free_port(), process.free_port()
        pids.append(process.spawn([
            str(bins.path("etcd")), "--data-dir", str(d / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true"], d / "etcd.log"))
        etcd_health = f"http://127.0.0.1:{etcd_port}/health"
        _poll(lambda url=etcd_health: json.loads(_get(url)).get("health") == "true")
        pids.append(process.spawn([
            str(bins.path("kube-apiserver")), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", f"--secure-port={api_port}", f"--cert-dir={d / 'apiserver'}",
            f"--tls-cert-file={keys.cert('apiserver')}", f"--tls-private-key-file={keys.key('apiserver')}",
            f"--client-ca-file={keys.ca}", "--service-cluster-ip-range=10.0.0.0/24",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={keys.sa_pub}", f"--service-account-signing-key-file={keys.sa_key}",
            "--authorization-mode=RBAC", "--allow-privileged=true"], d / "kube-apiserver.log"))
        tls = ssl.create_default_context(cafile=str(keys.ca))
        tls.load_cert_chain(str(keys.cert("admin")), str(keys.key("admin")))
        readyz = f"https://127.0.0.1:{api_port}/readyz"
        _poll(lambda url=readyz, tls=tls: _get(url, context=tls) == "ok")
        kind.times.append(time.monotonic() - started)
        time.sleep(settle)
        kind.rss_mib.append(rss_mib(pids))
    finally:
        for pid in reversed(pids):
            process.stop(pid, sig=signal.SIGTERM)
        shutil.rmtree(d, ignore_errors=True)
    log(f"[bench]   envtest-style #{i + 1}: {kind.times[-1]:.2f} s")


def _get(url: str, *, context=None) -> str:
    with urllib.request.urlopen(url, context=context, timeout=2) as response:  # noqa: S310 (loopback)
        return response.read().decode()


def _poll(ok: Callable[[], bool], timeout: float = 60.0, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ok():
                return
        except (OSError, ValueError):
            pass
        time.sleep(interval)
    raise TimeoutError("not ready in time")


# -- all of it ------------------------------------------------------------------------------


def run(runs: int = 3, *, settle: float = 5.0, log: Log = print) -> Results:
    """Every start ``runs`` times; a temporary directory holds all their state and is removed."""
    import kubernetes.client  # noqa: F401 - imported before any timing: seconds of CPU, not the start's cost


    cold = Kind("ours, cold (fresh PKI + etcd)", "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, "
                "kwok", "all healthy, 1 Node Ready, `default` ServiceAccount")
    warm = Kind("ours, warm (already running)", "(reuses the running ones)", "`/readyz` ok")
    returned = Kind("kwokctl create cluster --runtime binary --wait", "etcd, kube-apiserver, "
                    "kube-controller-manager, kube-scheduler, kwok-controller", "kwokctl returns: `/healthz` ok")
    with_sa = Kind("kwokctl, until `default` ServiceAccount", "(same)", "`default` ServiceAccount exists")
    envtest = Kind("envtest-style (controller-runtime envtest)", "etcd, kube-apiserver", "`/readyz` ok")
    steps: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="operatorlab-bench-start-") as tmp:
        root = Path(tmp)
        log(f"[bench] cluster start x{runs}, in rounds of ours (cold, warm), kwokctl, envtest-style...")
        # Round by round, so a change in the machine's load falls on every kind alike.
        for i in range(runs):
            bench_ours(cold, warm, steps, settle, root, log)
            bench_kwokctl(i, returned, with_sa, settle, root, log)
            bench_envtest(i, envtest, settle, root, log)
    return Results([cold, warm, returned, with_sa, envtest], steps, versions(), machine(),
                   time.strftime("%Y-%m-%d %H:%M"))


def versions() -> dict[str, str]:
    from operatorlab.cluster import binaries

    bins = binaries.find()

    def first_line(argv: list[str]) -> str:
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]

    return {
        "Kubernetes": binaries.kubernetes_version(),
        "etcd": first_line([str(bins.path("etcd")), "--version"]).split()[-1],
        # "kwok version v0.8.0 go1.26.8 (linux/amd64)": the third word
        "kwok": first_line([str(bins.path("kwok")), "--version"]).split()[2],
        "kwokctl": first_line([str(kwokctl_path()), "--version"]).split()[2],
    }


def markdown(results: Results, figure: str = "cluster-start.png") -> str:
    ours = results.kinds[0].median
    rows = "\n".join(
        f"| {k.name} | {k.components} | {k.ready} | {k.median:.2f} s (n={len(k.times)}: "
        + ", ".join(f"{t:.2f}" for t in k.times) + f") | {k.median / ours:.2f}x | "
        + (f"{statistics.median(k.rss_mib):.0f} MiB" if k.rss_mib else "") + " |"
        for k in results.kinds)
    ordered = sorted(results.steps.items(), key=lambda item: statistics.median(item[1]))
    step_rows = "\n".join(f"| {name} | {statistics.median(ats):.2f} s | " + ", ".join(f"{t:.2f}" for t in ats) + " |"
                          for name, ats in ordered)
    v = results.versions
    return (
        f"{HEADING}\n\n"
        f"{results.date}, {results.machine}; Kubernetes {v['Kubernetes']}, etcd {v['etcd']}, "
        f"kwok {v['kwok']}, kwokctl {v['kwokctl']}. Same machine, same cached binaries, one start after "
        "another, in rounds (ours, kwokctl, envtest-style) so that the machine's load falls on each alike; "
        "RSS: sum over the start's control-plane processes, a few seconds after ready. "
        "Ratio: median time over ours (cold).\n\n"
        "| start | components | ready means | median time | ratio to ours | RSS |\n|---|---|---|---|---|---|\n"
        f"{rows}\n\n"
        "Ours, cold, step by step: seconds from the start of `up()` until each step was done "
        "(`LocalCluster.steps`). etcd starts while the PKI is made, the apiserver as soon as etcd "
        "accepts connections; once the apiserver is ready the other three start together with the "
        "Nodes created, and their waits overlap.\n\n"
        "| step | done at (median) | each run |\n|---|---|---|\n"
        f"{step_rows}\n\n"
        f"![Cluster start]({figure})\n")


def plot(results: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    kinds = list(reversed(results.kinds))
    ax.barh([k.name for k in kinds], [k.median for k in kinds], color="#326ce5")
    for y, k in enumerate(kinds):
        ax.plot(k.times, [y] * len(k.times), "k|", markersize=10)
        ax.text(k.median, y, f" {k.median:.2f} s", va="center", fontsize=8)
    ax.set_xlabel("time to ready (s); bar: median, ticks: each run")
    v = results.versions
    ax.set_title(f"Cluster start, {results.date}: {results.machine}\n"
                 f"Kubernetes {v['Kubernetes']}, etcd {v['etcd']}, kwok and kwokctl {v['kwok']}", fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
