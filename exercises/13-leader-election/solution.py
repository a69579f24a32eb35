"""Reference solution: one active copy under kubernetes.leaderelection, on a Lease, with a lease short enough
that a standby takes over within seconds of the leader's death."""

import threading
from collections.abc import Callable

from kubernetes import config
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

LEASE = "lesson13-leader"


def run(namespace: str, identity: str, act: Callable[[], None]) -> None:
    config.load_kube_config()  # LeaseLock uses the client's default configuration
    lost = threading.Event()

    def lead() -> None:  # runs on a thread of its own while this copy holds the lease
        while not lost.is_set():
            act()
            lost.wait(0.5)

    election = electionconfig.Config(
        LeaseLock(LEASE, namespace, identity),
        lease_duration=6,  # a standby takes the lease once it has not been renewed for this long
        renew_deadline=4,  # the leader gives up if it could not renew for this long
        retry_period=2,  # how often both try
        onstarted_leading=lead,
        onstopped_leading=lost.set,  # the lease is lost: stop acting (run() does not stop lead())
    )
    leaderelection.LeaderElection(election).run()
