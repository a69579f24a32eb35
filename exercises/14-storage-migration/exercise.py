"""Lesson 14: migrate a CRD's stored objects from v1alpha1 to v1, so v1alpha1 can leave the CRD.

A fresh copy of the two-version NamespaceBaseline CRD, converted by the lesson's webhook, has objects
of random names and values stored as ``v1alpha1``; then its storage version becomes ``v1``, so
``status.storedVersions`` is ``[v1alpha1, v1]``. The learner's ``migrate_storage(api_client, crd_name)``
runs once. The check then asks the API server: storedVersions is ``[v1]``; every object is the same
object (uid, creationTimestamp) with the same spec; and, with ``v1alpha1`` taken out of the CRD
altogether (and the webhook gone), every object still reads: one left in v1alpha1 in etcd would not.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Iterator
from types import ModuleType

from operatorlab import admission, conversion, crds, paths
from operatorlab.exercises import Exercise
from operatorlab.grading import Check

FUNCTION = "migrate_storage"


def _word(draw: random.Random) -> str:
    return "".join(draw.choice(string.ascii_lowercase) for _ in range(6))


class StorageMigration(Exercise):
    lesson = "14"
    title = "migrate_storage: every object stored as v1, then v1alpha1 out of status.storedVersions"
    subject = FUNCTION
    budget = 30.0
    xdist_group = "conversion"  # one webhook process at a time on a loaded machine
    hints = (
        "status.storedVersions lists every version an object may still be stored in. What makes the API server "
        "store an object again, in the CRD's storage version, without changing it?",
        "Read every object (a LIST at the storage version) and write each back unchanged (a PUT, its "
        "resourceVersion kept: a 409 means someone else wrote it, which stored it anew too). Only then patch the "
        "CRD's status subresource. Deleting and re-creating makes new objects (new uids): that is not a migration.",
        "Shape: for obj in CustomObjectsApi.list_cluster_custom_object(group, storage, plural)['items']: "
        "replace_cluster_custom_object(group, storage, plural, name, obj); then ApiextensionsV1Api."
        "patch_custom_resource_definition_status(crd_name, {'status': {'storedVersions': [storage]}}).",
    )

    def solution_source(self) -> str:
        """The lesson's own migration, which the reference solution imports."""
        return (paths.repo_root() / "src" / "operatorlab" / "storage_migration.py").read_text()

    def check(self, learner: ModuleType) -> Iterator[Check]:
        draw = random.Random()
        crd = conversion.two_versions(f"ex14m-{uuid.uuid4().hex[:8]}.hedronite.io")
        webhook = conversion.ConversionWebhook(paths.repo_root() / "src" / "operatorlab" / "nsb_conversion.py", crd,
                                               kubeconfig=self.kubeconfig_path)
        try:
            crds.install(self.api, crd)
            webhook.start()
            if not webhook.install(self.api):
                raise RuntimeError(f"the lesson's conversion webhook got no call in 30 s. {admission.UNREACHABLE}")
            for _ in range(5):
                conversion.create(self.api, crd, conversion.OLD, f"old-{_word(draw)}",
                                  {"namespaceLabel": f"{_word(draw)}={_word(draw)}", "allowDNS": draw.random() < 0.5})
            conversion.create(self.api, crd, conversion.NEW, f"new-{_word(draw)}",
                              {"namespaceSelector": {"key": _word(draw), "value": _word(draw)},
                               "exemptNamespaces": [_word(draw)]})
            now_v1 = conversion.with_webhook(conversion.two_versions(crd["spec"]["group"], storage=conversion.NEW),
                                             webhook.convert_url, webhook.ca_bundle)
            crds.install(self.api, now_v1)
            before = {o["metadata"]["name"]: o for o in conversion.read_all(self.api, crd, conversion.NEW)}

            try:
                getattr(learner, FUNCTION)(self.api, crd["metadata"]["name"])
                error = ""
            except Exception as e:  # noqa: BLE001 - the learner's code raised: that is the evidence
                error = f"{FUNCTION} raised {type(e).__name__}: {e}"
            stored = conversion.stored_versions(self.api, crd)
            recorded = not error and stored == [conversion.NEW]
            yield Check("status.storedVersions is [v1]", recorded,
                        "" if recorded else error or f"status.storedVersions is {stored}")

            after = {o["metadata"]["name"]: o for o in conversion.read_all(self.api, crd, conversion.NEW)}
            changed = [f"{n}: {'gone' if n not in after else 'a new object (new uid)'}" for n, o in before.items()
                       if n not in after or after[n]["metadata"]["uid"] != o["metadata"]["uid"]
                       or after[n]["metadata"]["creationTimestamp"] != o["metadata"]["creationTimestamp"]]
            changed += [f"{n}: spec {before[n]['spec']} is now {o['spec']}" for n, o in after.items()
                        if n in before and o["spec"] != before[n]["spec"]]
            yield Check(f"every object is the same object, its spec intact ({len(before)} objects)", not changed,
                        "; ".join(changed))

            webhook.stop()  # and v1alpha1 out of the CRD: only an object stored as v1 still reads
            only_v1 = conversion.two_versions(crd["spec"]["group"], storage=conversion.NEW, served=(conversion.NEW,))
            only_v1["spec"]["versions"] = [v for v in only_v1["spec"]["versions"] if v["name"] == conversion.NEW]
            removed = admission.send(lambda: crds.install(self.api, only_v1))
            unreadable = {}
            if removed.accepted:
                for name in before:
                    answer = admission.send(lambda name=name: conversion.read(self.api, crd, conversion.NEW, name))
                    if not answer.accepted:
                        unreadable[name] = answer.message
            yield Check("with v1alpha1 gone from the CRD (and its webhook), every object still reads",
                        removed.accepted and not unreadable,
                        f"the CRD without v1alpha1 was refused: {removed.message}" if not removed.accepted
                        else "; ".join(f"{n}: {w}" for n, w in unreadable.items()))
        finally:
            webhook.stop()
            conversion.remove(self.api, crd, wait=False)  # its conversion set to None first: no webhook needed

