"""Tenants at scale: N Tenants created at once, four implementations side by side.

For each implementation, on a fresh local cluster of its own (``bench-scale``, purged
before and after), with the CRDs applied and the implementation started and idle:

1. create N Tenants (``cpuQuota: "1"``) as fast as the bench's client can (16 threads);
2. **converge time**: from the first create sent until every namespace ``tenant-<name>``
   carries its label and owner reference, every ResourceQuota ``tenant-quota`` has
   ``requests.cpu`` and ``limits.cpu`` equal to the spec and, for the implementations
   that write status, every Tenant says ``Ready=True`` for its current generation;
   observed by watches (the moment the API server reports each change);
3. **API requests and writes per Tenant**: the API server's own
   ``apiserver_request_total``, its delta over the run, by verb, resource and
   subresource, minus the bench's own requests (counted by its
   :class:`~operatorlab.controllers.metrics.CountingApiClient`), and only for what the
   implementation touches: tenants, namespaces, resourcequotas (not their status, which
   the quota controller writes) and events. Namespaces also make the controller-manager
   write (a ServiceAccount, the ``kube-root-ca.crt`` ConfigMap, the quota's status):
   those are the cluster's cost, the same for all four, and left out;
4. **steady-state writes**: the same delta over the following ``steady`` seconds (with
   nothing changing, it should be 0);
5. **peak RSS**: ``VmHWM`` of the implementation's process from ``/proc/<pid>/status``.

The implementations: ``kopf`` (``operators/tenant/tenant_operator.py`` as a process,
:class:`~operatorlab.operators.OperatorProcess`), ``handwritten`` and ``official``
(:mod:`bench.scale_controllers`), ``go`` (``bench/go-tenant``, controller-runtime, built
here when its binary is missing; the build time is recorded).

Run alone: ``python -m bench --only scale --tenants 1000``.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.proc import status_mib

IMPLEMENTATIONS = ("kopf", "handwritten", "official", "go")
LABELS = {
    "kopf": "kopf Tenant operator",
    "handwritten": "lesson 03 informer + work queue",
    "official": "kubernetes.informer.SharedInformer + work queue",
    "go": "Go controller-runtime reference",
}
WRITES_STATUS = {"kopf": True, "handwritten": False, "official": False, "go": True}
CLUSTER = "bench-scale"
HEADING = "## Tenants at scale"
RESULTS = Path(__file__).parent / "results"
GO_DIR = Path(__file__).parent / "go-tenant"
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}
CLIENT_VERBS = {"create": "POST", "update": "PUT", "patch": "PATCH", "delete": "DELETE",
                "deletecollection": "DELETECOLLECTION", "get": "GET", "list": "LIST", "watch": "WATCH"}
# What the implementations touch; the rest (serviceaccounts, configmaps, the quota's
# status, leases, nodes...) other controllers write for every namespace, whoever made it.
OURS = {("tenants", ""), ("tenants", "status"), ("namespaces", ""), ("resourcequotas", ""), ("events", "")}

Log = Callable[[str], None]

# What a new Tenant costs through kopf 1.45.2, and whose cost each write is; read from
# kopf's source (kopf/_core/reactor/processing.py, kopf/_cogs/clients/patching.py).
KOPF_COSTS = """What each Tenant costs through kopf (1.45.2), write by write:

- **finalizer** (1 PATCH tenants): kopf adds it in a processing cycle of its own and runs no
  handler in that cycle (`process_resource_causes`: "Adding the finalizer, thus preventing the
  actual deletion", then `changing_cause = None`); the handler runs on the MODIFIED event the
  patch causes. Needed: the on.delete handler deletes the namespace. kopf's cost, as is the cycle.
- **last-handled-configuration** (1 PATCH tenants): kopf's diff base, an annotation, which kopf
  needs to tell an update from a resume. `patch_obj` sends the body and the status as two PATCH
  requests when the resource has a status subresource (ours has), so this annotation and our
  status are two writes of one Tenant. kopf's cost; moving the diff base into status
  (`kopf.StatusDiffBaseStorage`) would merge them, but lesson 04 teaches the annotation and
  `operatorlab why` reads it, so it stays.
- **status** (1 PATCH tenants/status): ours, written only when it differs (`record_status`).
- **namespace, quota** (1 POST each): ours, the work itself.
- **Events** NamespaceCreated and QuotaCreated (2 POST events): ours, one per object created,
  promised by the operator (its tests and lesson 04 show them); `settings.posting.level =
  logging.WARNING` would drop them and kopf.info's others.

A resume of an unchanged Tenant writes nothing (measured: one GET of the namespace and one of
the quota per Tenant, no PATCH); a spec change costs the quota PATCH, the annotation PATCH, the
status PATCH and one Event: the Tenant is written twice, by kopf's split above. Every PATCH comes
back as a MODIFIED event that kopf processes (diff base rebuilt, with deep copies): four
processing cycles per new Tenant. A pyinstrument profile of the operator's event loop at 500
Tenants: of 91 s of loop, 45 s in `process_resource_event` (8 s finding causes, 20 s sending
kopf's PATCHes), 14 s posting Events, 5 s idle; the loop, one thread, is the bottleneck.

What was ours and is changed: `reconcile_tenant` built a new `CoreV1Api()` (a new ApiClient:
the configuration deep-copied, the CA loaded, a new TLS connection) for every reconcile, about
25 ms of CPU against 2 ms for a GET on a shared client (kubernetes 37.0.2); it now shares one.
The bench runs kopf without `--verbose` (the labs' debug log is not part of the operator)."""
Key = tuple[str, str, str]  # verb (server's), resource, subresource


@dataclass
class Result:
    """What one implementation measured at one size."""

    name: str
    tenants: int
    converge_seconds: float
    create_seconds: float
    requests: dict[Key, float]
    steady: dict[Key, float]
    steady_seconds: float
    peak_rss_mib: float
    cpu_seconds: float = 0.0
    build_seconds: float | None = None
    notes: list[str] = field(default_factory=list)

    def total(self, counts: dict[Key, float] | None = None, *, writes: bool = False) -> float:
        counts = self.requests if counts is None else counts
        return sum(n for (verb, _, _), n in counts.items() if not writes or verb in WRITE_VERBS)

    def per_tenant(self, *, writes: bool = False) -> float:
        return self.total(writes=writes) / self.tenants

    def steady_writes_per_minute(self) -> float:
        return self.total(self.steady, writes=True) * 60 / self.steady_seconds

    def detail(self, counts: dict[Key, float] | None = None) -> str:
        counts = self.requests if counts is None else counts
        return ", ".join(f"{n / self.tenants:.2f} {verb} {res}{'/' + sub if sub else ''}"
                         for (verb, res, sub), n in sorted(counts.items(), key=lambda kv: -kv[1]) if n)


# --- the API server's own counts ---------------------------------------------------


def server_counts(api_client: Any) -> dict[Key, float]:
    """``apiserver_request_total`` by (verb, resource, subresource), for what the implementations touch."""
    from operatorlab.controllers.metrics import _get_text, parse_prometheus_samples

    totals: dict[Key, float] = {}
    for labels, value in parse_prometheus_samples(_get_text(api_client, "/metrics", timeout=10),
                                                  "apiserver_request_total"):
        key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
        if key[1:] in OURS:
            totals[key] = totals.get(key, 0.0) + value
    return totals


def client_counts(api: Any) -> dict[Key, float]:
    """The bench's own requests, keyed as the server keys them."""
    totals: dict[Key, float] = {}
    for r in api.requests():
        key = (CLIENT_VERBS.get(r.verb, r.verb.upper()), r.resource, r.subresource)
        totals[key] = totals.get(key, 0.0) + 1
    return totals


def delta(after: dict[Key, float], before: dict[Key, float], minus: dict[Key, float]) -> dict[Key, float]:
    keys = set(after) | set(before)
    out = {k: after.get(k, 0.0) - before.get(k, 0.0) - minus.get(k, 0.0) for k in keys}
    return {k: v for k, v in out.items() if v > 0}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far, from ``/proc/<pid>/stat``; 0 if it is gone.

    Unlike wall time, it hardly moves when other work shares the machine's cores.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def peak_rss_mib(pid: int) -> float:
    """``VmHWM`` (the peak resident set) of ``pid`` in MiB; 0 if it is gone."""
    return status_mib(pid, "VmHWM")


# --- convergence, observed by watches ------------------------------------------------


class Convergence:
    """Watches namespaces, quotas and Tenants; knows when all ``names`` match their spec."""

    def __init__(self, api_client: Any, names: Sequence[str], cpu: str, *, status: bool) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.names = set(names)
        self.cpu = cpu
        self.status = status
        self.ok: dict[str, set[str]] = {"ns": set(), "quota": set(), "status": set()}
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.done_at = 0.0
        self.streams: list[Any] = []
        self.errors: list[str] = []
        self.stopped = False

    def start(self) -> None:
        from operatorlab.tenants import TENANT_LABEL

        self._watch("ns", self.core.list_namespace, self._ns_ok, label_selector=TENANT_LABEL)
        self._watch("quota", self.core.list_resource_quota_for_all_namespaces, self._quota_ok,
                    label_selector=TENANT_LABEL)
        if self.status:
            self._watch("status", lambda **kw: self.custom.list_cluster_custom_object(
                "hedronite.io", "v1", "tenants", **kw), self._status_ok)

    def _watch(self, kind: str, func: Callable[..., Any], ok: Callable[[dict[str, Any]], str | None],
               **kwargs: Any) -> None:
        from kubernetes import watch

        def run() -> None:
            while not self.stopped:
                stream = watch.Watch()
                self.streams.append(stream)
                try:
                    # From no resourceVersion: a (re)start replays every object as ADDED.
                    for event in stream.stream(func, timeout_seconds=3600, _request_timeout=3700, **kwargs):
                        self._observe(kind, ok, event)
                except Exception as e:  # noqa: BLE001 - a broken stream is opened again
                    if not self.stopped:
                        self.errors.append(f"{kind} watch: {type(e).__name__}: {e}"[:300])
                        time.sleep(0.5)

        threading.Thread(target=run, daemon=True).start()

    def _observe(self, kind: str, ok: Callable[[dict[str, Any]], str | None], event: dict[str, Any]) -> None:
        obj = event["raw_object"]
        if event["type"] == "ERROR" or "metadata" not in obj:
            raise RuntimeError(f"watch error: {obj}")
        name = ok(obj)
        meta = obj["metadata"]
        tenant = meta["name"] if kind == "status" else (meta.get("labels") or {}).get("hedronite.io/tenant")
        with self.lock:
            if name is not None and event["type"] != "DELETED":
                self.ok[kind].add(name)
            elif tenant:
                self.ok[kind].discard(tenant)
            self._check()

    def _check(self) -> None:
        kinds = ("ns", "quota", "status") if self.status else ("ns", "quota")
        if not self.done.is_set() and all(self.names <= self.ok[k] for k in kinds):
            self.done_at = time.monotonic()
            self.done.set()

    def _ns_ok(self, obj: dict[str, Any]) -> str | None:
        meta = obj["metadata"]
        name = (meta.get("labels") or {}).get("hedronite.io/tenant")
        owned = any(ref.get("kind") == "Tenant" for ref in meta.get("ownerReferences") or [])
        return name if owned and meta["name"] == f"tenant-{name}" else None

    def _quota_ok(self, obj: dict[str, Any]) -> str | None:
        from kubernetes.utils import parse_quantity

        meta = obj["metadata"]
        name = (meta.get("labels") or {}).get("hedronite.io/tenant")
        hard = (obj.get("spec") or {}).get("hard") or {}
        want = parse_quantity(self.cpu)
        if all(k in hard and parse_quantity(hard[k]) == want for k in ("requests.cpu", "limits.cpu")):
            return name
        return None

    def _status_ok(self, obj: dict[str, Any]) -> str | None:
        meta, status = obj["metadata"], obj.get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        if ready.get("status") == "True" and ready.get("observedGeneration") == meta.get("generation"):
            return str(meta["name"])
        return None

    def stop(self) -> None:
        self.stopped = True
        for stream in self.streams:
            stream.stop()


# --- the implementations as processes ----------------------------------------------


def build_go(log: Log) -> tuple[Path, float | None]:
    """``bench/go-tenant/go-tenant``, built if missing; returns (binary, build seconds or None)."""
    binary = GO_DIR / "go-tenant"
    if binary.exists():
        return binary, None
    log("[bench] scale: building bench/go-tenant (go build, modules through the Go module proxy)...")
    started = time.monotonic()
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=GO_DIR, check=True)
    return binary, time.monotonic() - started


def _die_with_parent() -> None:
    """In the child, before exec: the kernel SIGTERMs it when the bench dies (Linux PR_SET_PDEATHSIG).

    A controller left running would keep reconciling, and deleting, on the next cluster
    of the same name.
    """
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


class Implementation:
    """One implementation running against a cluster, as a process whose pid we know."""

    def __init__(self, name: str, cluster: Any, *, log: Log, workers: int, kopf_file: Path | None = None) -> None:
        self.name, self.cluster, self.log, self.workers = name, cluster, log, workers
        self.kopf_file = kopf_file
        self.proc: subprocess.Popen[bytes] | None = None
        self.operator: Any = None
        self.build_seconds: float | None = None
        self.log_path = cluster.dir / "logs" / f"scale-{name}.log"

    @property
    def pid(self) -> int:
        if self.operator is not None:
            return int(self.operator.pid)
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        if self.name == "kopf":
            from operatorlab.operators import OperatorProcess, operator_path

            self.operator = OperatorProcess(self.kopf_file or operator_path("tenant"),
                                            kubeconfig=self.cluster.kubeconfig, log_path=self.log_path, verbose=False)
            self.operator.start()
            return
        if self.name == "go":
            binary, self.build_seconds = build_go(self.log)
            argv = [str(binary), f"--workers={self.workers}"]
        else:
            argv = [sys.executable, "-m", "bench.scale_controllers", self.name, f"--workers={self.workers}"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         cwd=Path(__file__).parent.parent, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 60
        while "started" not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.operator is not None:
            self.operator.stop()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --- one run -------------------------------------------------------------------------


def run_one(name: str, tenants: int, cluster: Any, *, steady: float, workers: int, log: Log,
            prefix: str = "scale-", timeout: float = 600.0, kopf_file: Path | None = None) -> Result:
    """Measure implementation ``name`` creating ``tenants`` Tenants ``<prefix><i>`` on ``cluster`` (up, CRDs applied).

    The implementation is started first and given time to settle (its LIST, WATCH and
    first reconcile of whatever Tenants exist already), so that only the new Tenants'
    work falls into the measured window.
    """
    from kubernetes import client

    from operatorlab.controllers.metrics import CountingApiClient
    from operatorlab.tenants import manifest

    impl = Implementation(name, cluster, log=log, workers=workers, kopf_file=kopf_file)
    api = CountingApiClient.from_kubeconfig(str(cluster.kubeconfig))
    try:
        impl.start()
        time.sleep(2)  # its LIST and WATCH are open, its start-up is done
        names = [f"{prefix}{i}" for i in range(tenants)]
        watcher = Convergence(api, names, "1", status=WRITES_STATUS[name])
        watcher.start()
        time.sleep(1)  # the watches are open before the first create
        custom = client.CustomObjectsApi(api)
        mine_before, server_before = client_counts(api), server_counts(api)
        cpu_before = cpu_seconds(impl.pid)
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda n: custom.create_cluster_custom_object(
                "hedronite.io", "v1", "tenants", manifest(n, "1")), names))
        create_seconds = time.monotonic() - started
        if not watcher.done.wait(timeout):
            missing = {k: len(watcher.names - v) for k, v in watcher.ok.items()}
            raise AssertionError(f"{name}: {tenants} Tenants not converged in {timeout:.0f} s; missing {missing}; "
                                 f"watch errors: {watcher.errors[-3:]}")
        converge_seconds = watcher.done_at - started
        cpu = cpu_seconds(impl.pid) - cpu_before
        for error in watcher.errors:
            log(f"[bench] scale: {name}: {error} (reopened)")
        time.sleep(2)  # requests still in flight (a status patch after the last quota) are counted
        mine, after = client_counts(api), server_counts(api)
        requests = delta(after, server_before, delta(mine, mine_before, {}))
        time.sleep(steady)
        mine_end, end = client_counts(api), server_counts(api)
        steady_counts = delta(end, after, delta(mine_end, mine, {}))
        rss = peak_rss_mib(impl.pid)
        watcher.stop()
    finally:
        impl.stop()
        api.close()
    result = Result(name=name, tenants=tenants, converge_seconds=converge_seconds, create_seconds=create_seconds,
                    requests=requests, steady=steady_counts, steady_seconds=steady, peak_rss_mib=rss,
                    cpu_seconds=cpu, build_seconds=impl.build_seconds)
    log(f"[bench] scale: {name} at {tenants}: converged in {converge_seconds:.1f} s "
        f"(created in {create_seconds:.1f} s), {result.per_tenant():.2f} requests and "
        f"{result.per_tenant(writes=True):.2f} writes per Tenant, "
        f"{result.steady_writes_per_minute():.0f} steady writes/min, peak RSS {rss:.0f} MiB, "
        f"{cpu:.1f} s CPU while converging")
    log(f"[bench] scale: {name} per Tenant: {result.detail()}")
    if steady_counts:
        log(f"[bench] scale: {name} steady: {result.detail(steady_counts)}")
    return result


def run(names: Sequence[str], tenants: int, *, steady: float = 60.0, workers: int = 4, fresh: bool = True,
        cluster_name: str = CLUSTER, save_to: Path | None = None, kopf_file: Path | None = None,
        log: Log = print) -> list[Result]:
    """:func:`run_one` for each implementation in ``names``, in order.

    ``fresh``: each on a new cluster (purged before and after: what ``make bench`` does,
    so that no implementation inherits another's thousand namespaces). Otherwise one
    cluster for all, each with its own Tenant names (``<name>-<i>``): quicker, for a
    small smoke run; the Tenants an earlier implementation left are already converged,
    and a later one only reads them while it settles, before its window opens.
    ``kopf_file``: run this operator file as ``kopf`` (an earlier version, to compare).
    """
    from operatorlab import paths
    from operatorlab.cluster import LocalCluster, manifests

    results: list[Result] = []
    for i, name in enumerate(names):
        if fresh or i == 0:
            cluster = LocalCluster(cluster_name)  # a new object: a purged one keeps its old state
            cluster.down(purge=True, log=lambda _: None)
            cluster.up(log=lambda _: None)
            from kubernetes import config

            manifests.apply_crds(config.new_client_from_config(config_file=str(cluster.kubeconfig)),
                                 paths.crds_dir())
        try:
            results.append(run_one(name, tenants, cluster, steady=steady, workers=workers, log=log,
                                   prefix=f"{name}-" if not fresh else "scale-", kopf_file=kopf_file))
            if save_to is not None:
                save(results, save_to)  # after each one: a later failure keeps the earlier numbers
        finally:
            if fresh or i == len(names) - 1:
                cluster.down(purge=True, log=lambda _: None)
    return results


# --- presenting ----------------------------------------------------------------------


def versions() -> str:
    from importlib.metadata import version

    go = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True).stdout.strip() or "no go"
    mod = (GO_DIR / "go.mod").read_text()
    pins = [line.split()[0].split("/")[-1] + " " + line.split()[1] for line in mod.splitlines()
            if line.strip().startswith(("sigs.k8s.io/controller-runtime ", "k8s.io/client-go "))]
    return (f"Python {sys.version.split()[0]}, kopf {version('kopf')}, kubernetes {version('kubernetes')}, "
            f"{go}, {', '.join(pins)}")


def markdown(results: Sequence[Result], *, machine: str, before: Sequence[Result] = (), note: str = "") -> str:
    go = next((r for r in results if r.name == "go"), None)

    def row(r: Result, label: str) -> str:
        ratio = f"{r.converge_seconds / go.converge_seconds:.1f}x" if go and go.converge_seconds else "n/a"
        return (f"| {label} | {r.converge_seconds:.1f} s | {r.per_tenant():.2f} | {r.per_tenant(writes=True):.2f} "
                f"| {r.steady_writes_per_minute():.0f} | {r.peak_rss_mib:.0f} MiB "
                f"| {f'{r.cpu_seconds:.1f} s' if r.cpu_seconds else 'not measured'} "
                f"| {ratio} |")

    n = results[0].tenants if results else 0
    lines = [
        HEADING, "",
        f"{time.strftime('%Y-%m-%d %H:%M')}, {machine}; {versions()}. {n:,} Tenants created at once "
        "(16 client threads), each implementation on a fresh local cluster (v1.36). Requests and writes "
        "per Tenant: the API server's `apiserver_request_total`, minus the bench's own, on tenants, "
        "namespaces, resourcequotas (not their status) and events. Steady: the following "
        f"{results[0].steady_seconds:.0f} s with nothing changing, per minute." if results else "",
        "",
        "| implementation | converge | requests/Tenant | writes/Tenant | steady writes/min | peak RSS "
        "| CPU while converging | converge vs Go |",
        "|---|---|---|---|---|---|---|---|",
        *[row(r, "kopf, before tuning") for r in before],
        *[row(r, LABELS[r.name] + (", after tuning" if before and r.name == "kopf" else "")) for r in results],
        "", "Per Tenant, by verb and resource:", "",
        *[f"- {LABELS[r.name]}{' (before tuning)' if r in before else ''}: {r.detail()}"
          for r in [*before, *results]],
        "",
    ]
    if note:
        lines += [note, ""]
    lines += [KOPF_COSTS, ""]
    builds = [r.build_seconds for r in results if r.build_seconds is not None]
    if builds:
        lines += [f"Go reference built in {builds[0]:.0f} s (`go build`, module cache as found).", ""]
    lines += ["![Tenants at scale](tenants-at-scale.png)", ""]
    return "\n".join(lines)


def plot(results: Sequence[Result], path: Path, *, before: Sequence[Result] = ()) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [("kopf\n(before)", r) for r in before] + [
        (LABELS[r.name].replace(" + ", "\n+ ").replace("Go controller-runtime reference", "Go\ncontroller-runtime")
         .replace("kubernetes.informer.SharedInformer", "SharedInformer"), r) for r in results]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    colors = ["#999999" if "(before)" in label else "#326ce5" for label, _ in rows]
    for ax, (title, value) in zip(axes, [
            ("converge (s)", lambda r: r.converge_seconds),
            ("writes per Tenant", lambda r: r.per_tenant(writes=True)),
            ("peak RSS (MiB)", lambda r: r.peak_rss_mib)], strict=True):
        ax.barh([label for label, _ in rows], [value(r) for _, r in rows], color=colors)
        ax.set_title(title)
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
    n = results[0].tenants if results else 0
    fig.suptitle(f"{n:,} Tenants created at once, local cluster")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def save(results: Sequence[Result], path: Path) -> None:
    """The raw numbers as JSON (a later run can show them as "before")."""
    path.write_text(json.dumps([{**r.__dict__, "requests": [[*k, v] for k, v in r.requests.items()],
                                 "steady": [[*k, v] for k, v in r.steady.items()]} for r in results], indent=1))


def load(path: Path) -> list[Result]:
    rows = json.loads(path.read_text())
    return [Result(**{**r, "requests": {tuple(x[:3]): x[3] for x in r["requests"]},
                      "steady": {tuple(x[:3]): x[3] for x in r["steady"]}}) for r in rows]
