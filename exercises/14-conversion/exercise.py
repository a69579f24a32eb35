"""Lesson 14: a conversion between NamespaceBaseline v1alpha1 and v1, served to the real API server.

The learner's ``convert(obj, version)`` is served by :class:`operatorlab.conversion.ConversionWebhook`
(kopf's process, an aiohttp server on a free port with a certificate of its own) for a fresh copy of
the CRD with both versions, stored as ``v1alpha1``, ``strategy: Webhook``. The check creates objects of
random names, labels and values at both versions and reads each at the other; writes a v1alpha1 object
back as v1 and reads it at v1alpha1 again; and reads v1 objects back as v1, so every v1 write went
down to v1alpha1 (the storage version) and up again: what ``v1alpha1`` has no field for must survive.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from operatorlab import admission, conversion, crds, paths
from operatorlab.exercises import Exercise
from operatorlab.grading import Check


def _word(draw: random.Random, n: int = 6) -> str:
    return "".join(draw.choice(string.ascii_lowercase) for _ in range(n))


class Conversion(Exercise):
    lesson = "14"
    title = "convert: NamespaceBaseline v1alpha1 <-> v1, both ways, losing nothing on a round trip"
    subject = "convert"
    budget = 30.0
    xdist_group = "conversion"  # one webhook process at a time on a loaded machine
    hints = (
        "The API server sends your function one object at a time, at one version, and the version it wants. "
        "Which fields differ between the two? namespaceLabel is 'key=value'; namespaceSelector is {key, value}.",
        "Convert both ways: a v1 write is stored as v1alpha1 (the storage version), so it goes down and comes up "
        "again. exemptNamespaces has no v1alpha1 field: keep it in an annotation on the way down, and take it out "
        "again on the way up. Keep labels and the other annotations as they are.",
        "Shape: copy obj; if version == 'v1': key, _, value = spec.pop('namespaceLabel').partition('='); "
        "spec['namespaceSelector'] = {...}; exempt = annotations.pop(KEY) (json). Else the reverse, "
        "annotations[KEY] = json.dumps(spec.pop('exemptNamespaces')). Never touch name or uid.",
    )

    def solution_source(self) -> str:
        """The lesson's own conversion, which the reference solution imports."""
        return (paths.repo_root() / "src" / "operatorlab" / "nsb_conversion.py").read_text()

    def check(self, learner: ModuleType) -> Iterator[Check]:
        draw = random.Random()
        crd = self._crd = conversion.two_versions(f"ex14-{uuid.uuid4().hex[:8]}.hedronite.io")
        webhook: conversion.ConversionWebhook | None = None
        served = "the API server calls your convert (a ConversionReview over TLS)"
        try:
            crds.install(self.api, crd)
            webhook = conversion.ConversionWebhook(Path(learner.__file__ or ""), crd, kubeconfig=self.kubeconfig_path)
            try:
                webhook.start()
            except RuntimeError as e:
                yield Check(served, False, str(e))
                return
            in_force = webhook.install(self.api)
            yield Check(served, in_force, "" if in_force else f"no answer from the webhook in 30 s. "
                        f"{admission.UNREACHABLE} Its log ends:\n{webhook.log()[-600:]}")
            if not in_force:
                return

            def labels() -> dict[str, str]:
                return {f"ex14.hedronite.io/{_word(draw, 4)}": _word(draw)}

            old = {f"old-{_word(draw)}": {"namespaceLabel": f"{_word(draw)}={_word(draw)}",
                                         "allowDNS": draw.random() < 0.5} for _ in range(3)}
            old[f"old-{_word(draw)}"] = {"namespaceLabel": f"example.com/{_word(draw)}=", "allowDNS": False}
            meta = {name: (labels(), {"ex14.hedronite.io/note": _word(draw)}) for name in old}
            failed = self._create_all(conversion.OLD, old, meta)
            if failed:
                yield Check("v1alpha1 objects are created", False, failed)
                return
            wrong = {}
            for name, spec in old.items():
                answer, got = self._read(conversion.NEW, name)
                key, _, value = spec["namespaceLabel"].partition("=")
                want = {"namespaceSelector": {"key": key, "value": value}, "allowDNS": spec["allowDNS"]}
                if got is None:
                    wrong[name] = answer
                elif {k: got["spec"].get(k) for k in want} != want:
                    wrong[name] = f"namespaceLabel {spec['namespaceLabel']!r} read as v1: {got['spec']}"
            yield Check("v1alpha1 objects read as v1: namespaceLabel becomes namespaceSelector",
                        not wrong, "; ".join(f"{n}: {w}" for n, w in wrong.items()))
            if wrong:
                return

            new = {f"new-{_word(draw)}": {
                "namespaceSelector": {"key": _word(draw), "value": _word(draw)}, "allowDNS": draw.random() < 0.5,
                "exemptNamespaces": [_word(draw) for _ in range(draw.randint(1, 3))]} for _ in range(3)}
            meta.update({name: (labels(), {"ex14.hedronite.io/note": _word(draw)}) for name in new})
            failed = self._create_all(conversion.NEW, new, meta)
            if failed:
                yield Check("v1 objects are created (each stored as v1alpha1: converted down)", False, failed)
                return
            wrong = {}
            for name, spec in new.items():
                answer, got = self._read(conversion.OLD, name)
                label = f"{spec['namespaceSelector']['key']}={spec['namespaceSelector']['value']}"
                if got is None:
                    wrong[name] = answer
                elif got["spec"].get("namespaceLabel") != label or got["spec"].get("allowDNS") != spec["allowDNS"]:
                    wrong[name] = f"namespaceSelector {spec['namespaceSelector']} read as v1alpha1: {got['spec']}"
            yield Check("v1 objects read as v1alpha1: namespaceSelector becomes namespaceLabel",
                        not wrong, "; ".join(f"{n}: {w}" for n, w in wrong.items()))
            if wrong:
                return

            lost = {}
            for name, spec in new.items():
                answer, got = self._read(conversion.NEW, name)
                if got is None or got["spec"] != spec:
                    lost[name] = answer if got is None else f"written {spec}, read back {got['spec']}"
            yield Check("v1 -> v1alpha1 -> v1 loses nothing (exemptNamespaces too)", not lost,
                        "; ".join(f"{n}: {w}" for n, w in lost.items()))

            back = {}
            for name, spec in old.items():  # up to v1, written as v1, down to v1alpha1 again
                _, got = self._read(conversion.NEW, name)
                written = admission.send(lambda got=got: conversion.replace(self.api, crd, got or {}))
                _, again = self._read(conversion.OLD, name)
                if not written.accepted or again is None or again["spec"] != spec:
                    back[name] = written.message or f"was {spec}, now {again['spec'] if again else None}"
            yield Check("v1alpha1 -> v1 (written) -> v1alpha1 loses nothing", not back,
                        "; ".join(f"{n}: {w}" for n, w in back.items()))

            changed = {}
            for name, (want_labels, want_annotations) in meta.items():
                version = conversion.NEW if name in old else conversion.OLD
                _, got = self._read(version, name)
                metadata = (got or {}).get("metadata", {})
                annotations = metadata.get("annotations") or {}
                if metadata.get("labels") != want_labels or any(annotations.get(k) != v
                                                               for k, v in want_annotations.items()):
                    changed[name] = f"labels {metadata.get('labels')}, annotations {annotations}"
            yield Check("labels and annotations are kept at either version", not changed,
                        "; ".join(f"{n}: {w}" for n, w in changed.items()))
        finally:
            if webhook is not None:
                webhook.stop()
            conversion.remove(self.api, crd, wait=False)  # its conversion set to None first: no webhook needed

    # -- helpers ----------------------------------------------------------------------------

    _crd: dict[str, Any]

    def _create_all(self, version: str, objects: dict[str, dict[str, Any]],
                    meta: dict[str, tuple[dict[str, str], dict[str, str]]]) -> str:
        """Create each object at ``version``; '' or what the API server said to the first it refused."""
        for name, spec in objects.items():
            labels, annotations = meta[name]
            answer = admission.send(lambda name=name, spec=spec, labels=labels, annotations=annotations:
                                    conversion.create(self.api, self._crd, version, name, spec, labels, annotations))
            if not answer.accepted:
                return f"{name} at {version}: {answer.message}"
        return ""

    def _read(self, version: str, name: str) -> tuple[str, dict[str, Any] | None]:
        """``(the API server's refusal, None)`` or ``('', the object at version)``."""
        got: list[dict[str, Any]] = []
        answer = admission.send(lambda: got.append(conversion.read(self.api, self._crd, version, name)))
        return answer.message, (got[0] if got else None)
