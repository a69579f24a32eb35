"""The ``local`` provider: a real control plane as unprivileged child processes.

Five upstream programs, started in dependency order on free loopback ports, all
state under one directory (``<cache>/clusters/<name>/``)::

    etcd ──► kube-apiserver ──► kube-controller-manager   (namespace, GC, deployment, quota, SA... loops)
                           ├──► kube-scheduler            (binds Pods to Nodes)
                           └──► kwok                      (plays kubelet: simulated Nodes, Pods become Running)

Each waits only for what it needs, and the waits overlap (``make bench`` times each
step, :attr:`LocalCluster.steps`): etcd starts while the PKI is made, the apiserver as
soon as etcd accepts connections, and the other three together with the Nodes once
the apiserver is ready, which is when RBAC lets them in under their own identities.

Why our own small supervisor rather than ``kwokctl --runtime binary``: kwokctl
downloads any binary it is not told about, keeps its own state layout and
parses each binary's ``--version`` to pick flags; here every flag is visible in
one file a learner can read, each component can be stopped and restarted alone
(the labs do that), and ``status`` reports pid, port and health directly.

Flags follow envtest (controller-runtime ``pkg/internal/testing/controlplane``),
kubeadm's static-pod manifests and kwokctl's binary runtime
(sigs.k8s.io/kwok ``pkg/kwokctl/components``).
"""

from __future__ import annotations

import functools
import json
import shutil
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from operatorlab import paths
from operatorlab.cluster import binaries as binaries_mod
from operatorlab.cluster import kubeconfig, pki, process
from operatorlab.cluster.provider import ClusterError, ComponentStatus, Log

#: Start order; stop order is the reverse.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

#: Every port a local cluster listens on (all on 127.0.0.1).
_PORTS = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

#: Starts tried in all when a chosen port is taken before the component binds it.
_PORT_RACE_ATTEMPTS = 3

#: Components a lab may stop and start on its own (the rest hold the cluster up).
RESTARTABLE = ("kube-controller-manager", "kube-scheduler", "kwok")

class PortTaken(ClusterError):
    """A component exited because its port was taken after :func:`process.free_port` chose it."""

    def __init__(self, message: str, *, component: str) -> None:
        super().__init__(message)
        self.component = component


@dataclass(frozen=True)
class _Wait:
    """One condition :meth:`LocalCluster.up` waits for, and the component to blame if it never holds."""

    name: str
    component: str
    holds: Callable[[], bool]


@dataclass
class _State:
    """What ``state.json`` remembers between commands."""

    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    bin_dir: str = ""
    advertise_address: str | None = None


class LocalCluster:
    """A control plane of child processes under ``<cache>/clusters/<name>``.

    Args:
        name: the cluster's name; one directory and one kubeconfig per name.
        nodes: how many simulated (kwok) Nodes to create.
        root: the directory holding the cluster directories (default ``<cache>/clusters``).
    """

    provider: Literal["local"] = "local"

    def __init__(self, name: str = "lab", *, nodes: int = 1, root: Path | None = None) -> None:
        self.name = name
        self.nodes = nodes
        self.dir = (root or paths.cache_root() / "clusters") / name
        self.kubeconfig = self.dir / "kubeconfig"
        self.pki = pki.Pki(self.dir / "pki")
        self._state_file = self.dir / "state.json"
        self._state = self._load_state()
        #: Seconds from the start of the last :meth:`up` to the end of each of its steps, in
        #: order (``make bench`` reports them); empty when that ``up`` found the cluster running.
        self.steps: dict[str, float] = {}
        self._tls: tuple[tuple[int, ...], ssl.SSLContext] | None = None

    # -- public API ---------------------------------------------------------------

    def up(self, *, log: Log = print, wait_timeout: float = 120.0) -> LocalCluster:
        """Start whatever is not running, wait until the cluster serves, return self.

        Reuses running components, so a second ``up`` is quick and harmless.

        Raises:
            binaries.BinariesMissing: the binaries are not built (``make setup``).
            ClusterError: a component did not become healthy within ``wait_timeout`` s
                (the message includes the tail of its log and the log's path).
        """
        started = time.monotonic()
        self.steps = {}
        self._renew_outdated_certificates(log=log)
        if self.is_up():
            log(f"cluster {self.name!r} is already up: {self.server}")
            return self
        for attempt in range(1, _PORT_RACE_ATTEMPTS + 1):
            try:
                self._start_components(log=log, started=started, wait_timeout=wait_timeout)
                break
            except PortTaken as race:
                if attempt == _PORT_RACE_ATTEMPTS:
                    raise
                # Another program bound the port between our check and the component's own
                # bind (ports are chosen, not reserved). Nothing is half-made: stop what
                # started, keep PKI and etcd data, choose new ports, start again.
                log(f"  {race.component}: port {self._state.ports.get(race.component)} was taken "
                    f"after it was chosen; starting again on new ports")
                self.down(log=lambda _: None)
                self._state.ports = {}
        log(f"cluster {self.name!r} up in {time.monotonic() - started:.1f}s: {self.server}")
        log(f"  export KUBECONFIG={self.kubeconfig}")
        return self

    def _start_components(self, *, log: Log, started: float, wait_timeout: float) -> None:
        """One attempt of :meth:`up`: start what is not running and wait for each step."""
        def step(name: str) -> None:
            self.steps[name] = time.monotonic() - started

        bins = binaries_mod.find()
        running = [c for c in COMPONENTS if self._running(c)]
        if not running:
            # A clean start, same PKI and etcd data. Keep the old ports when they are all free,
            # so kubeconfigs already loaded (an operator, a notebook kernel) keep working.
            ports = self._state.ports
            if len(ports) != len(_PORTS) or not all(process.port_free(p) for p in ports.values()):
                if ports:
                    log("  the previous ports are taken: using new ones (reload kubeconfig in running clients)")
                ports = {k: process.free_port() for k in _PORTS}
            self._state = _State(ports=ports, bin_dir=str(bins.dir), advertise_address=_advertise_address())
        log(f"starting cluster {self.name!r} in {self.dir}")
        # etcd needs no certificate (plain HTTP on loopback): it starts while the PKI is made.
        if "etcd" not in running:
            self._spawn("etcd")
        if not running:
            extra = (self._state.advertise_address,) if self._state.advertise_address else ()
            pki.create(self.pki.dir, extra_ips=extra)
            self._write_config_files(bins)
        step("PKI and config files")
        # The apiserver as soon as etcd accepts connections, not once etcd reports healthy. Not
        # before: its etcd client backs off about a second after a refused connection (gRPC's
        # base delay), which costs more than the wait.
        self._wait_all([_Wait("etcd accepts", "etcd", functools.partial(_accepts, self._state.ports["etcd"]))],
                       alive=COMPONENTS[:1], step=step, timeout=wait_timeout)
        if "kube-apiserver" not in running:
            self._spawn("kube-apiserver")
        self._wait_all([
            _Wait("etcd healthy", "etcd", lambda: self._healthy("etcd")),
            _Wait("kube-apiserver ready", "kube-apiserver", lambda: self._healthy("kube-apiserver")),
        ], alive=COMPONENTS[:2], step=step, timeout=wait_timeout)
        # The others authenticate as themselves, which RBAC allows only once the apiserver's
        # bootstrap roles exist (part of /readyz): start them now, all at once, and make the
        # Nodes right away, so kwok finds them as soon as it watches.
        rest = [c for c in COMPONENTS[2:] if c not in running]
        for c in rest:
            self._spawn(c)
        names = [f"kwok-node-{i}" for i in range(self.nodes)]
        self._create_nodes(names)
        self._wait_all([
            *[_Wait(f"{c} healthy", c, functools.partial(self._healthy, c)) for c in rest],
            _Wait("nodes Ready", "kwok", lambda: self._nodes_ready(names)),
            _Wait("default ServiceAccount", "kube-controller-manager", self._default_service_account),
        ], alive=COMPONENTS, step=step, timeout=wait_timeout)
        for c in COMPONENTS:
            log(f"  {c:<24} ready (pid {self._state.pids[c]}, port {self._state.ports[c]})")
        log(f"  {len(names)} simulated node(s) Ready: {', '.join(names)}")

    def down(self, *, purge: bool = False, log: Log = print) -> None:
        """Stop every component (reverse order); with ``purge``, delete all state too."""
        if not self.dir.exists():
            log(f"no cluster {self.name!r} ({self.dir} does not exist): nothing to stop")
            return
        for component in reversed(COMPONENTS):
            pid = self._state.pids.get(component)
            if self._running(component):
                log(f"  stopping {component} (pid {pid})")
            process.stop(pid, self._binary(component))
        self._state.pids.clear()
        if self.dir.exists():
            self._save_state()
        if purge and self.dir.exists():
            shutil.rmtree(self.dir)
            log(f"cluster {self.name!r} deleted ({self.dir})")
        else:
            log(f"cluster {self.name!r} stopped (state kept in {self.dir})")

    def status(self) -> list[ComponentStatus]:
        """Each component's pid, port, whether it runs and whether its health endpoint says ok."""
        rows = []
        for c in COMPONENTS:
            running = self._running(c)
            rows.append(ComponentStatus(
                name=c, pid=self._state.pids.get(c) if running else None,
                port=self._state.ports.get(c), running=running,
                healthy=running and self._healthy(c), log=self._log(c),
            ))
        return rows

    def is_up(self) -> bool:
        """All components run and the apiserver answers ``/readyz``."""
        return all(self._running(c) for c in COMPONENTS) and self._healthy("kube-apiserver")

    def stop_component(self, name: str) -> None:
        """Stop one of :data:`RESTARTABLE` (for fault-injection labs).

        Raises:
            ValueError: ``name`` is not restartable.
        """
        self._check_restartable(name)
        process.stop(self._state.pids.get(name), self._binary(name))
        self._state.pids.pop(name, None)
        self._save_state()

    def start_component(self, name: str, *, timeout: float = 60.0) -> None:
        """Start one of :data:`RESTARTABLE` again and wait until it is healthy."""
        self._check_restartable(name)
        if not self._running(name):
            self._start(name, log=lambda _: None, timeout=timeout)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self._state.ports.get('kube-apiserver')}"

    def env(self) -> dict[str, str]:
        """Environment variables that point kubectl and clients at this cluster."""
        return {"KUBECONFIG": str(self.kubeconfig), "KUBEBUILDER_ASSETS": self._state.bin_dir}

    def log_path(self, component: str) -> Path:
        return self._log(component)

    # -- components -----------------------------------------------------------------

    def _argv(self, component: str) -> list[str]:
        p, d, k = self._state.ports, self.dir, self.pki
        exe = str(self._binary(component))
        comp = d / "components"
        if component == "etcd":
            return [
                exe, "--name", "operatorlab", "--data-dir", str(d / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{p['etcd']}",
                "--advertise-client-urls", f"http://127.0.0.1:{p['etcd']}",
                "--listen-peer-urls", f"http://127.0.0.1:{p['etcd-peer']}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{p['etcd-peer']}",
                "--initial-cluster", f"operatorlab=http://127.0.0.1:{p['etcd-peer']}",
                # A lab cluster trades durability for speed, as envtest does.
                "--unsafe-no-fsync=true", "--log-level=warn",
            ]
        if component == "kube-apiserver":
            argv = [
                exe, f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                "--bind-address=127.0.0.1", f"--secure-port={p['kube-apiserver']}",
                f"--tls-cert-file={k.cert('apiserver')}", f"--tls-private-key-file={k.key('apiserver')}",
                f"--client-ca-file={k.ca}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={k.sa_pub}", f"--service-account-signing-key-file={k.sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                "--profiling=false",
                f"--cert-dir={comp / 'kube-apiserver'}",
            ]
            if self._state.advertise_address:
                argv.append(f"--advertise-address={self._state.advertise_address}")
            return argv
        if component in ("kube-controller-manager", "kube-scheduler"):
            cfg = comp / f"{component}.kubeconfig"
            argv = [
                exe, f"--kubeconfig={cfg}", f"--authentication-kubeconfig={cfg}",
                f"--authorization-kubeconfig={cfg}",
                "--bind-address=127.0.0.1", f"--secure-port={p[component]}",
                f"--cert-dir={comp / component}", "--leader-elect=false",
            ]
            if component == "kube-controller-manager":
                argv += [
                    "--controllers=*",
                    # Each loop runs as its own ServiceAccount with its own RBAC, as kubeadm does.
                    "--use-service-account-credentials=true",
                    f"--service-account-private-key-file={k.sa_key}",
                    f"--root-ca-file={k.ca}",
                    f"--cluster-signing-cert-file={k.ca}", f"--cluster-signing-key-file={k.key('ca')}",
                    f"--cluster-name={self.name}",
                    # At start it creates ~40 per-controller ServiceAccounts and their tokens;
                    # the default client limit (20 requests/s, burst 30) queued them for seconds.
                    # One user's cluster on loopback, not a thousand-node fleet: let it go fast.
                    "--kube-api-qps=200", "--kube-api-burst=400",
                ]
            return argv
        if component == "kwok":
            return [
                exe, f"--kubeconfig={comp / 'kwok.kubeconfig'}", f"--config={comp / 'kwok.yaml'}",
                "--manage-all-nodes=true",
                f"--server-address=127.0.0.1:{p['kwok']}", f"--node-port={p['kwok']}",
                "--node-ip=10.0.1.1", "--cidr=10.0.2.0/24",
                # Renew each node's Lease like a kubelet. Without it the node-lifecycle
                # controller sees no heartbeat within its grace period (the heartbeat stage
                # only writes node status every ~10 min), marks the node NotReady and every
                # Pod on it Ready=False, which no kwok stage undoes. kwokctl passes 40 too.
                "--node-lease-duration-seconds=40",
            ]
        raise ValueError(f"unknown component {component!r}")

    def _healthy(self, component: str) -> bool:
        p = self._state.ports.get(component)
        try:
            if component == "etcd":
                body = _get(f"http://127.0.0.1:{p}/health")
                return json.loads(body).get("health") == "true"
            if component == "kube-apiserver":
                return _get(f"{self.server}/readyz", context=self._admin_tls()) == "ok"
            if component in ("kube-controller-manager", "kube-scheduler"):
                insecure = ssl.create_default_context()
                insecure.check_hostname = False  # self-signed serving cert made by the component
                insecure.verify_mode = ssl.CERT_NONE
                return _get(f"https://127.0.0.1:{p}/healthz", context=insecure) == "ok"
            if component == "kwok":
                return _get(f"http://127.0.0.1:{p}/healthz").strip() == "ok"
        except (OSError, ValueError):
            return False
        return False

    # -- helpers ----------------------------------------------------------------------

    def _start(self, component: str, *, log: Log, timeout: float) -> None:
        self._spawn(component)
        self._wait_healthy(component, timeout=timeout)
        log(f"  {component:<24} ready (pid {self._state.pids[component]}, port {self._state.ports[component]})")

    def _spawn(self, component: str) -> None:
        pid = process.spawn(self._argv(component), self._log(component))
        self._state.pids[component] = pid
        self._save_state()

    def _wait_healthy(self, component: str, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._running(component):
                raise ClusterError(self._failure(component, "exited during startup"))
            if self._healthy(component):
                return
            time.sleep(0.25)
        raise ClusterError(self._failure(component, f"not healthy after {timeout:.0f}s"))

    def _failure(self, component: str, what: str) -> str:
        log = self._log(component)
        return (
            f"{component} {what}. Last lines of its log:\n{process.tail(log)}\n"
            f"Full log: {log}\n"
            f"To start from scratch: operatorlab cluster down --purge && operatorlab cluster up"
        )

    def _renew_outdated_certificates(self, *, log: Log) -> None:
        """Re-issue certificates an older release made, which strict TLS clients refuse.

        Python 3.13+ verifies strictly by default, so a learner's cluster from before
        would lock it out; and a client certificate expires after a year, as kubeadm's
        do (``kubeadm certs renew``). Every component that presents or checks a renewed
        certificate is stopped first and started again by :meth:`up`; etcd talks plain HTTP on
        loopback, so it keeps running and its data is never touched. The keys stay
        (see :func:`pki.renew`): ServiceAccount tokens and the CA stay valid.
        """
        found = pki.outdated(self.pki)
        if not found:
            return
        restarting = _presenting(found)
        for component in restarting:
            process.stop(self._state.pids.pop(component, None), self._binary(component))
        self._save_state()
        extra = (self._state.advertise_address,) if self._state.advertise_address else ()
        pki.renew(self.pki, found, extra_ips=extra)
        log(f"re-issued {len(found)} certificate(s) of cluster {self.name!r} that the API server or strict TLS "
            f"clients (Python 3.13+) refuse ({pki.describe(found)}); restarting {', '.join(restarting) or 'nothing'}, "
            f"etcd data and all keys kept")

    def _wait_all(self, waits: list[_Wait], *, alive: tuple[str, ...], step: Callable[[str], None],
                  timeout: float) -> None:
        """Poll every pending condition every 0.1 s until all hold, recording when each did.

        The conditions progress in parallel (separate processes), so waiting for them
        together costs the slowest one, not their sum. Fails at once when a component in
        ``alive`` exits, with the tail of its log.
        """
        pending = list(waits)
        deadline = time.monotonic() + timeout
        while pending:
            for c in alive:
                if not self._running(c):
                    if process.lost_port_race(self._log(c)):
                        raise PortTaken(self._failure(c, "exited during startup"), component=c)
                    raise ClusterError(self._failure(c, "exited during startup"))
            for wait in list(pending):
                if wait.holds():
                    pending.remove(wait)
                    step(wait.name)
            if pending and time.monotonic() > deadline:
                raise ClusterError(self._failure(pending[0].component, f"{pending[0].name}: not after {timeout:.0f}s"))
            if pending:
                # As often as envtest polls; faster only adds TLS handshakes to a starting apiserver.
                time.sleep(0.1)

    def _create_nodes(self, names: list[str]) -> None:
        """Create the simulated Nodes kwok manages (a 409 means one exists from an earlier run)."""
        for name in names:
            try:
                self._request("POST", "/api/v1/nodes", _node_manifest(name))
            except urllib.error.HTTPError as e:
                if e.code != 409:
                    raise

    def _nodes_ready(self, names: list[str]) -> bool:
        """kwok has set every Node in ``names`` Ready (as a kubelet would)."""
        try:
            items = json.loads(self._request("GET", "/api/v1/nodes"))["items"]
        except (OSError, ValueError, KeyError):
            return False
        ready = {n["metadata"]["name"] for n in items if _node_ready(n)}
        return all(name in ready for name in names)

    def _default_service_account(self) -> bool:
        """Pods are refused until the ServiceAccount controller made ``default/default``."""
        try:
            self._request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return False
            raise
        except OSError:
            return False
        return True

    def _request(self, method: str, path: str, body: Any = None) -> str:
        """One HTTPS request to the apiserver as the admin, through the standard library: ``up``
        needs three kinds only, and importing the kubernetes client costs seconds of CPU on a busy machine."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.server}{path}", data=data, method=method,  # noqa: S310 (https)
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=self._admin_tls(), timeout=5) as response:  # noqa: S310
            return response.read().decode()

    def _write_config_files(self, bins: binaries_mod.Binaries) -> None:
        comp = self.dir / "components"
        common = {"server": self.server, "ca": self.pki.ca, "cluster": self.name}
        kubeconfig.write(self.kubeconfig, cert=self.pki.cert("admin"), key=self.pki.key("admin"),
                         user="admin", **common)
        for stem in ("kube-controller-manager", "kube-scheduler", "kwok"):
            kubeconfig.write(comp / f"{stem}.kubeconfig", cert=self.pki.cert(stem), key=self.pki.key(stem),
                             user=stem, **common)
        # kwok's stages (how simulated Nodes and Pods move through their lifecycle) as one config.
        stages = sorted(bins.kwok_stages.glob("*.yaml"))
        (comp / "kwok.yaml").write_text("\n---\n".join(s.read_text() for s in stages))
        self._save_state()

    def _binary(self, component: str) -> Path:
        return Path(self._state.bin_dir or binaries_mod.default_dir()) / component

    def _running(self, component: str) -> bool:
        return process.is_running(self._state.pids.get(component), self._binary(component))

    def _log(self, component: str) -> Path:
        return self.dir / "logs" / f"{component}.log"

    def _admin_tls(self) -> ssl.SSLContext:
        """The admin's TLS context, made again only when the PKI files changed (``up`` polls with it)."""
        files = (self.pki.ca, self.pki.cert("admin"), self.pki.key("admin"))
        key = tuple(f.stat().st_mtime_ns for f in files)
        if self._tls is None or self._tls[0] != key:
            ctx = ssl.create_default_context(cafile=str(files[0]))
            ctx.load_cert_chain(str(files[1]), str(files[2]))
            self._tls = (key, ctx)
        return self._tls[1]

    def _check_restartable(self, name: str) -> None:
        if name not in RESTARTABLE:
            raise ValueError(f"{name!r} cannot be stopped alone; choose one of {', '.join(RESTARTABLE)}")

    def _load_state(self) -> _State:
        try:
            return _State(**json.loads(self._state_file.read_text()))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return _State()

    def _save_state(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self._state), indent=2))
        tmp.replace(self._state_file)


def _get(url: str, *, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> str:
    with urllib.request.urlopen(url, context=context, timeout=timeout) as response:  # noqa: S310 (loopback)
        return response.read().decode()


def _accepts(port: int) -> bool:
    """Something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _advertise_address() -> str | None:
    """The host's primary IP, for the ``kubernetes`` Service's endpoints.

    The apiserver refuses to advertise a loopback address; without a default route it
    cannot pick one itself. No packet is sent: connecting a UDP socket only routes.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never contacted
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def _node_manifest(name: str) -> Any:
    """A Node for kwok to play, shaped like kwokctl's ``kustomize/kwokctl/resource/node.yaml``."""
    return yaml.safe_load(f"""
apiVersion: v1
kind: Node
metadata:
  name: {name}
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: {name}
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    type: kwok
status:
  allocatable: {{cpu: "32", memory: 256Gi, pods: "110"}}
  capacity: {{cpu: "32", memory: 256Gi, pods: "110"}}
""")


def _node_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions") or [])


def _presenting(renewed: dict[str, str]) -> list[str]:
    """The running components to restart for the certificates ``renewed``, the last started first.

    The CA and the apiserver's serving certificate concern every client; a client certificate only
    the component that presents it (``admin`` is the user's own: nothing of ours restarts for it).
    """
    if "ca" in renewed or "apiserver" in renewed:
        return list(reversed(COMPONENTS[1:]))
    return [c for c in reversed(COMPONENTS) if c in renewed]
