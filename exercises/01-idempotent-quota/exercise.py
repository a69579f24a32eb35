"""Lesson 01: the quota half of an idempotent reconcile, graded by the requests it makes.

The learner's ``ensure_quota(core, namespace, cpu)`` must leave the ResourceQuota
``tenant-quota`` in ``namespace`` with ``requests.cpu`` and ``limits.cpu`` equal to ``cpu``,
and return whether it wrote. The check runs it against namespaces of its own (fresh
names) through a request-counting client: a second run must write nothing, a quota
changed by hand is corrected in place (same uid), ``"0.5"`` and the API's ``"500m"`` are
the same amount, and a deleted quota comes back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from types import ModuleType

from kubernetes import client

from operatorlab.controllers.metrics import CountingApiClient
from operatorlab.exercises import Exercise
from operatorlab.grading import Check

NAME = "tenant-quota"


class IdempotentQuota(Exercise):
    lesson = "01"
    title = "ensure_quota: create, correct or leave alone, and say whether it wrote"
    subject = "ensure_quota"
    budget = 10.0
    hints = (
        "Run it twice in a row: what does the second run have to do? Look before you write.",
        "Read the quota first (404 means absent: create it). If it exists, compare spec.hard with what you "
        "want, and write only when they differ. Compare amounts, not strings: the API stores 0.5 as 500m.",
        "Shape: try read_namespaced_resource_quota; on ApiException 404 create and return True (re-raise any "
        "other status); compare each key with kubernetes.utils.parse_quantity; if all equal return False; "
        "else patch_namespaced_resource_quota with {'spec': {'hard': want}} and return True.",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        ensure = learner.ensure_quota
        api = CountingApiClient.wrap(self.api)
        core = client.CoreV1Api(api)
        namespace = f"ex01-{uuid.uuid4().hex[:6]}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        try:
            def run(cpu: str) -> tuple[object, list[str]]:
                before = len(api.requests())
                wrote = ensure(core, namespace, cpu)
                writes = [f"{r.verb} {r.resource}" for r in api.requests()[before:] if r.is_write]
                return wrote, writes

            wrote, writes = run("2")
            hard = _hard(core, namespace)
            yield Check("an absent quota is created with requests.cpu and limits.cpu",
                        hard == {"requests.cpu": "2", "limits.cpu": "2"} and wrote is True,
                        f"spec.hard {hard}; returned {wrote!r}; writes {writes}")
            wrote, writes = run("2")
            yield Check("a second run writes nothing and returns False", not writes and wrote is False,
                        f"writes {writes}; returned {wrote!r}")
            uid = core.read_namespaced_resource_quota(NAME, namespace).metadata.uid
            core.patch_namespaced_resource_quota(NAME, namespace, {"spec": {"hard": {"limits.cpu": "99"}}})
            wrote, writes = run("2")
            after = core.read_namespaced_resource_quota(NAME, namespace)
            yield Check(
                "a quota changed by hand is corrected in place, with one write",
                _hard(core, namespace) == {"requests.cpu": "2", "limits.cpu": "2"} and len(writes) == 1
                and after.metadata.uid == uid and wrote is True,
                f"spec.hard {_hard(core, namespace)}; writes {writes}; same object: {after.metadata.uid == uid}")
            run("0.5")
            wrote, writes = run("0.5")
            yield Check('"0.5" and the stored "500m" are the same amount: no write',
                        not writes and wrote is False,
                        f"stored {_hard(core, namespace)}; the second run wrote {writes}")
            core.delete_namespaced_resource_quota(NAME, namespace)
            wrote, writes = run("3")
            yield Check("a deleted quota is created again", _hard(core, namespace).get("limits.cpu") == "3",
                        f"spec.hard {_hard(core, namespace)}; writes {writes}")
        finally:
            core.delete_namespace(namespace)


def _hard(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    try:
        quota = core.read_namespaced_resource_quota(NAME, namespace)
    except client.ApiException as e:
        if e.status == 404:
            return {}
        raise
    return dict((quota.spec.hard if quota.spec else None) or {})
