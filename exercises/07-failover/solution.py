"""Reference solution: peering settings for replicas of one Deployment that fail over within seconds.

Every replica runs this same code, so the priority comes from what differs between them:
the Pod's name ($HOSTNAME). kopf 1.45 renews a replica's entry in the peering object every
``lifetime - (5..10)`` seconds (at least every second), and a peer that stopped renewing
counts as gone ``lifetime`` seconds after its last renewal: 10 s fails over within 10 s and
renews every 1-5 s.
"""

import hashlib
import os

import kopf

LIFETIME = 10  # seconds a replica killed without a goodbye keeps the others paused


@kopf.on.startup()
def configure_peering(settings: kopf.OperatorSettings, **_: object) -> None:
    """Each replica its own priority (from its Pod's name), and a short lifetime."""
    pod = os.environ.get("HOSTNAME", "")
    settings.peering.priority = int(hashlib.sha256(pod.encode()).hexdigest()[:8], 16)
    settings.peering.lifetime = LIFETIME
