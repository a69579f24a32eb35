"""expired-client-cert: kube-scheduler's client certificate has expired; it runs, and places nothing.

The scheduler process is up and its own health endpoint may say ok, but every request it makes
is refused with ``401 Unauthorized``: the API server does not take an expired client
certificate (x509 verification fails, and with it authentication). So new Pods stay Pending with
no node and no ``FailedScheduling`` event, as if no scheduler ran.

The check grades what a reviewer would look at: a fresh Pod gets a node from the scheduler, and
the certificate the scheduler runs with (read from the kubeconfig on its command line) is a
current one from the cluster's CA for the scheduler's own user, valid no longer than a year. A
Pod bound by hand, the admin's certificate handed to the scheduler, or a certificate of a
hundred years each fail one of them.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterator
from pathlib import Path

import yaml

from operatorlab.cluster import pki
from operatorlab.faults.components import require_local, start_component, stop_component
from operatorlab.labs import Check, Lab
from operatorlab.labs import workloads as w
from operatorlab.wait import eventually

NAMESPACE, APP = "lab-cert", "web"
#: Replicas at setup, and after inject scales the Deployment up.
REPLICAS, SCALED = 2, 3
COMPONENT = "kube-scheduler"
USER = pki.CLIENTS[COMPONENT][0]
#: kubeadm's client certificates last a year; the drill's certificate ran out a day ago.
LONGEST = datetime.timedelta(days=366)
PLACED = "a fresh Pod is placed on a node"
IDENTITY = f"kube-scheduler runs with a current certificate of the cluster's CA for {USER}, valid a year at most"
RUNNING = f"Deployment {NAMESPACE}/{APP} runs every replica it asks for ({REPLICAS} or more), up to date and ready"


class ExpiredClientCert(Lab):
    title = "A year later"
    summary = (f"Deployment {NAMESPACE}/{APP} was scaled up and its new Pods stay Pending with no node, though "
               f"`operatorlab cluster status` says every component runs. Make the cluster place Pods again")
    drill = True
    requires = frozenset({"local"})
    settle = 0.0  # each check run makes a fresh Pod and waits for its node itself
    hints = (
        f"kubectl describe a Pending Pod in {NAMESPACE}: no PodScheduled condition, no event. The scheduler runs "
        "(`operatorlab cluster status`): what does its log say? `cluster status` names the cluster's directory; "
        "each component logs to logs/<component>.log there.",
        "401 Unauthorized means the API server did not accept who the scheduler says it is. Its identity is the "
        "client certificate in the kubeconfig on its command line (components/kube-scheduler.kubeconfig): "
        "`openssl x509 -noout -subject -issuer -dates -in <its client-certificate>`. `kubeadm certs "
        "check-expiration` is the exam's way to see every certificate's expiry at once.",
        "The certificate expired. `operatorlab cluster up` re-issues every expired certificate from the cluster's "
        "CA with its existing key (as `kubeadm certs renew` does) and restarts the components that use them. "
        "Giving the scheduler the admin's certificate, or signing one for a hundred years, is not a repair: "
        "labs/expired-client-cert/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        require_local(self.ctx.cluster, "this drill re-issues a control-plane certificate")
        w.create_namespace(self, NAMESPACE)
        w.apps(self).create_namespaced_deployment(NAMESPACE, w.deployment(APP, replicas=REPLICAS))
        eventually(lambda: w.deployment_ready(self, NAMESPACE, APP, REPLICAS).passed, timeout=120,
                   message=f"Deployment {NAMESPACE}/{APP} ready")

    def inject(self) -> None:
        cluster = self.ctx.cluster
        pki.backdate(cluster.pki, COMPONENT, expired_for=datetime.timedelta(days=1))
        stop_component(cluster, COMPONENT)
        start_component(cluster, COMPONENT)
        w.apps(self).patch_namespaced_deployment_scale(APP, NAMESPACE, {"spec": {"replicas": SCALED}})

    def check(self) -> Iterator[Check]:
        placed = w.pod_placed(self, NAMESPACE, w.template_spec(self, NAMESPACE, APP), label=PLACED)
        yield placed
        yield self._identity()
        yield self._running(budget=w.BUDGET if placed.passed else 0)

    def _running(self, budget: float) -> Check:
        """The Deployment at the size it asks for now, which scaling it down below setup's does not make easier."""
        wanted = w.apps(self).read_namespaced_deployment(APP, NAMESPACE).spec.replicas or 0
        if wanted < REPLICAS:
            return Check(RUNNING, False, f"spec.replicas={wanted}: scaled down below the {REPLICAS} it ran at")
        return w.deployment_ready(self, NAMESPACE, APP, wanted, label=RUNNING, budget=budget)

    def _identity(self) -> Check:
        """The client certificate the running scheduler presents, read from its command line's kubeconfig."""
        kubeconfig = _running_kubeconfig(self.ctx.cluster)
        if kubeconfig is None:
            return Check(IDENTITY, False, "kube-scheduler is not running")
        try:
            found = pki.facts(self.ctx.cluster.pki, _client_certificate(kubeconfig, self.ctx.state_dir))
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            return Check(IDENTITY, False, f"no readable client certificate in {kubeconfig}: {e}")
        said = (f"{found.path.name}: user {found.user!r}, groups {list(found.groups)}, valid "
                f"{found.not_before:%Y-%m-%d} to {found.not_after:%Y-%m-%d}")
        wrong = [] if found.current else ["not valid now"]
        if not found.issued_by_ca:
            wrong.append("not signed by the cluster's CA")
        if found.user != USER or found.groups:
            wrong.append(f"not the scheduler's own identity (user {USER!r}, no groups)")
        if found.lifetime > LONGEST:
            wrong.append(f"valid {found.lifetime.days} days, longer than a year")
        return Check(IDENTITY, not wrong, f"{said}: {'; '.join(wrong)}" if wrong else said)

    def solve(self) -> None:
        self.ctx.cluster.up(log=lambda _: None)  # re-issues the expired certificate, restarts what uses it

    def reset(self) -> None:
        cluster = self.ctx.cluster
        if self.ctx.provider == "local" and pki.outdated(cluster.pki):
            cluster.up(log=lambda _: None)
        super().reset()


def _running_kubeconfig(cluster) -> Path | None:
    """The ``--kubeconfig`` of the running kube-scheduler process (what it was started with, not a file's guess)."""
    pid = next((row.pid for row in cluster.status() if row.name == COMPONENT and row.running), None)
    if pid is None:
        return None
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return next((Path(a.split("=", 1)[1]) for a in argv if a.startswith("--kubeconfig=")), None)


def _client_certificate(kubeconfig: Path, scratch: Path) -> Path:
    """The file the kubeconfig's current user presents (a path relative to the kubeconfig's directory too)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    context = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
    if "client-certificate-data" in user:  # inline: read as the scheduler does, from a copy
        copy = scratch / "client-certificate.crt"
        copy.write_bytes(base64.b64decode(user["client-certificate-data"]))
        return copy
    path = Path(user["client-certificate"])
    return path if path.is_absolute() else kubeconfig.parent / path
