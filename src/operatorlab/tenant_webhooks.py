"""Lesson 10's admission handler: what a policy cannot check, because it needs to read the cluster.

A ValidatingAdmissionPolicy sees the request (the object, the old object, the user) and its
parameter object; nothing else. A webhook is a program: this one asks the API server whether the
namespace the Tenant operator would make, ``tenant-<name>``, is already someone else's, and if so
refuses the Tenant before it is stored, instead of the operator reporting ``NameTaken`` after.
Served by :mod:`operatorlab.kopf_webhook` (``kopf run``).
"""

from __future__ import annotations

from typing import Any

import kopf
from kubernetes import client, config

_core: client.CoreV1Api | None = None


def _namespaces() -> client.CoreV1Api:
    global _core
    if _core is None:
        _core = client.CoreV1Api(config.new_client_from_config())  # $KUBECONFIG, as the operator's
    return _core


def refuse_taken_namespace(name: str | None, operation: str, **_: Any) -> None:
    """Refuse a new Tenant whose namespace ``tenant-<name>`` exists and was not made for it."""
    if operation != "CREATE" or not name:
        return
    try:
        namespace = _namespaces().read_namespace(f"tenant-{name}")
    except client.ApiException as e:
        if e.status == 404:
            return  # free: the operator will create it
        raise  # anything else: the request fails (and the failurePolicy decides)
    meta = namespace.metadata
    owners = [ref.kind for ref in (meta.owner_references if meta else None) or []]
    raise kopf.AdmissionError(
        f"namespace tenant-{name} exists already (owned by {', '.join(owners) or 'nobody'}): "
        "choose another name, or adopt it", code=409)
