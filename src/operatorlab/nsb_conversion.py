"""Lesson 14's conversion between NamespaceBaseline ``v1alpha1`` and ``v1``: lossless both ways.

``v1alpha1`` ``spec.namespaceLabel: "team=payments"`` is ``v1`` ``spec.namespaceSelector:
{key: team, value: payments}``. ``v1``'s ``spec.exemptNamespaces`` has no ``v1alpha1`` field: on the
way down it rides in an annotation, and on the way up it comes back out of it, so v1 -> v1alpha1 -> v1
loses nothing. Only ``apiVersion``, ``spec`` and annotations change: the API server puts back any
other metadata a webhook changes, and refuses a changed name, namespace, uid or kind.
"""

import copy
import json

EXEMPT = "v1.hedronite.io/exempt-namespaces"  # v1's exemptNamespaces while the object is read as v1alpha1


def convert(obj, version):
    """``obj`` (a dict, at either version) as ``version`` (``"v1alpha1"`` or ``"v1"``): a new dict."""
    obj = copy.deepcopy(obj)
    if obj["apiVersion"].endswith("/" + version):
        return obj
    spec = obj.get("spec", {})
    annotations = obj["metadata"].get("annotations") or {}
    if version == "v1":
        key, _, value = spec.pop("namespaceLabel", "").partition("=")
        spec["namespaceSelector"] = {"key": key, "value": value}
        if EXEMPT in annotations:
            spec["exemptNamespaces"] = json.loads(annotations.pop(EXEMPT))
    else:
        selector = spec.pop("namespaceSelector", {})
        spec["namespaceLabel"] = f"{selector.get('key', '')}={selector.get('value', '')}"
        if "exemptNamespaces" in spec:
            annotations[EXEMPT] = json.dumps(spec.pop("exemptNamespaces"))
    if annotations:
        obj["metadata"]["annotations"] = annotations
    else:
        obj["metadata"].pop("annotations", None)
    return obj
