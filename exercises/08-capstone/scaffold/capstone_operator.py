"""TODO: my runbook as an operator. Which runbook, and the commands I ran by hand (twice):

    kubectl ...

Its intent is the kind in crd.yaml; its execution is reconcile_runbook below: one
idempotent, level-triggered function. The kopf handler around it records the outcome.
Start from a worked example (operators/website/website_operator.py is the closest):
copy its helpers for the Ready condition (ready_conditions, record_status), for
ownership (owner_body, ownership, name_taken, NameTaken) and for errors
(_route_api_error, retry_delay), as each operator here does; this file must run alone.

Grade it in the lesson's last cell, or from a terminal:
    operatorlab exercise check 08-capstone
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

GROUP, VERSION, PLURAL = "TODO-group", "v1alpha1", "TODO-plural"  # as in crd.yaml
KIND = "TODO"


def reconcile_runbook(name: str, namespace: str, spec: Mapping[str, Any], *, uid: str) -> dict[str, Any]:
    """Make the cluster match one object of KIND; return the fields its status reports.

    Idempotent: GET each object the runbook makes; create what is missing, with an
    owner reference to this object (kopf.append_owner_reference); correct only what
    differs; write nothing when nothing differs. An object of a name you need that is
    not yours: leave it alone and raise (NameTaken in the worked examples).
    """
    raise NotImplementedError("write your runbook's steps here")


@kopf.on.resume(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.update(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.create(GROUP, VERSION, PLURAL, id="reconcile")
def reconcile(name: str, namespace: str, spec: kopf.Spec, meta: kopf.Meta, body: kopf.Body,
              patch: kopf.Patch, **_: Any) -> None:
    """Run the runbook for one object, at creation, on each spec change and at every start.

    TODO: record the outcome once, in status: a Ready condition (True, or False with a
    reason and a message) carrying observedGeneration. For what only a person can fix,
    post one Warning Event (kopf.warn) and raise kopf.PermanentError (or a
    TemporaryError with a delay of tens of seconds): never retry at once.
    """
    status = reconcile_runbook(name, namespace, spec, uid=meta["uid"])
    patch.status.update(status)
