"""Two versions of one CRD, served side by side, and the conversion between them (lesson 14 and its exercises).

The shipped NamespaceBaseline is ``v1alpha1``: ``spec.namespaceLabel`` is one string, ``key=value``.
Its ``v1`` here splits it into a structured ``spec.namespaceSelector`` (``key``, ``value``) and adds
``spec.exemptNamespaces``, which ``v1alpha1`` has no field for. Both live on a *copy* of the CRD in a
group of the caller's own (:func:`operatorlab.crds.copy_to_group`): ``crds/namespacebaseline.yaml``
stays as the operator knows it.

:class:`ConversionWebhook` serves a ``convert(obj, version)`` function (the lesson's
:mod:`operatorlab.nsb_conversion`, or a learner's) as :class:`operatorlab.admission.Webhook` serves
admission handlers: kopf in a process of its own (:mod:`operatorlab.kopf_conversion`), on
``https://127.0.0.1:PORT`` with a certificate of its own.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from operatorlab import admission, crds
from operatorlab.kopf_conversion import SENTINEL

OLD, NEW = "v1alpha1", "v1"

#: ``spec`` of v1: the label split into a selector, and one field v1alpha1 lacks.
V1_SPEC: dict[str, Any] = {
    "type": "object",
    "description": "Which namespaces (by one label), which of them not, and what they get.",
    "required": ["namespaceSelector"],
    "properties": {
        "namespaceSelector": {
            "type": "object", "required": ["key"],
            "description": "The label selecting the namespaces: its key and value (was namespaceLabel: key=value).",
            "properties": {"key": {"type": "string", "maxLength": 317}, "value": {"type": "string", "maxLength": 63}},
        },
        "allowDNS": {"type": "boolean", "default": True},
        "exemptNamespaces": {"type": "array", "items": {"type": "string"},
                             "description": "Namespaces left out even if labelled (new in v1)."},
    },
}


def two_versions(group: str, *, storage: str = OLD, served: tuple[str, ...] = (OLD, NEW)) -> dict[str, Any]:
    """The NamespaceBaseline CRD copied to ``group`` with ``v1alpha1`` (as shipped) and ``v1``.

    ``storage`` names the one version objects are written to etcd in; ``served`` the versions the
    API serves. No conversion is set: the API server's default, ``strategy: None``.
    """
    crd = crds.copy_to_group(crds.shipped("namespacebaseline.yaml"), group)
    (old,) = crd["spec"]["versions"]
    old.pop("additionalPrinterColumns", None)
    new = copy.deepcopy(old)
    new["name"] = NEW
    new["schema"]["openAPIV3Schema"]["properties"]["spec"] = copy.deepcopy(V1_SPEC)
    versions = {OLD: old, NEW: new}
    for name, version in versions.items():
        version["storage"] = name == storage
        version["served"] = name in served
    crd["spec"]["versions"] = [versions[OLD], versions[NEW]]
    return crd


def with_webhook(crd: Mapping[str, Any], url: str, ca_bundle: str) -> dict[str, Any]:
    """``crd`` converted by the webhook at ``url`` (``strategy: Webhook``, ConversionReview ``v1``)."""
    changed = copy.deepcopy(dict(crd))
    changed["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": url, "caBundle": ca_bundle}, "conversionReviewVersions": ["v1"]}}
    return changed


def version_of(crd: Mapping[str, Any], version: str) -> dict[str, Any]:
    """A shallow view of ``crd`` whose first version is ``version``: what :mod:`operatorlab.crds` reads."""
    view = copy.deepcopy(dict(crd))
    view["spec"]["versions"] = sorted(view["spec"]["versions"], key=lambda v: v["name"] != version)
    return view


def served_crd(api_client: Any, crd: Mapping[str, Any]) -> dict[str, Any]:
    """The CRD as the API server has it now (its ``status.storedVersions`` included)."""
    from kubernetes import client

    got: dict[str, Any] = client.ApiextensionsV1Api(api_client).api_client.sanitize_for_serialization(
        client.ApiextensionsV1Api(api_client).read_custom_resource_definition(crd["metadata"]["name"]))
    return got


def stored_versions(api_client: Any, crd: Mapping[str, Any]) -> list[str]:
    """``status.storedVersions``: every version an object may still be stored in, as the API server tracks it."""
    return list(served_crd(api_client, crd).get("status", {}).get("storedVersions") or [])


def set_stored_versions(api_client: Any, crd: Mapping[str, Any], versions: list[str]) -> None:
    """Write ``status.storedVersions`` (the status subresource): only after every object was rewritten."""
    from kubernetes import client

    client.ApiextensionsV1Api(api_client).patch_custom_resource_definition_status(
        crd["metadata"]["name"], {"status": {"storedVersions": versions}})


# -- objects, at either version -------------------------------------------------------------


def _objects(api_client: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(api_client)


def create(api_client: Any, crd: Mapping[str, Any], version: str, name: str, spec: Mapping[str, Any],
           labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Create a NamespaceBaseline copy at ``version``; the object as the API server returned it."""
    view = version_of(crd, version)
    body = crds.manifest(view, name, dict(spec))
    if labels:
        body["metadata"]["labels"] = dict(labels)
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    made: dict[str, Any] = _objects(api_client).create_cluster_custom_object(*crds.coordinates(view), body)
    return made


def read(api_client: Any, crd: Mapping[str, Any], version: str, name: str) -> dict[str, Any]:
    """GET one object at ``version`` (converted by the API server, if it is stored at another)."""
    got: dict[str, Any] = _objects(api_client).get_cluster_custom_object(*crds.coordinates(version_of(crd, version)),
                                                                         name)
    return got


def read_all(api_client: Any, crd: Mapping[str, Any], version: str) -> list[dict[str, Any]]:
    """LIST every object at ``version``."""
    items: list[dict[str, Any]] = _objects(api_client).list_cluster_custom_object(
        *crds.coordinates(version_of(crd, version)))["items"]
    return items


def delete(api_client: Any, crd: Mapping[str, Any], name: str) -> None:
    """Delete one object (one that is gone already is fine)."""
    from kubernetes import client

    try:
        _objects(api_client).delete_cluster_custom_object(*crds.coordinates(dict(crd)), name)
    except client.ApiException as e:
        if e.status != 404:
            raise


def remove(api_client: Any, crd: Mapping[str, Any], *, wait: bool = True) -> None:
    """Delete the CRD and every object of it, whatever its conversion points at.

    Deleting a CRD deletes its objects first, each read in the storage version: one stored in another
    version goes through the conversion, so a webhook that is gone (a kernel that died mid-lesson)
    holds the CRD Terminating. Its conversion is set to ``None`` first, which needs no webhook.
    """
    from kubernetes import client

    try:
        client.ApiextensionsV1Api(api_client).patch_custom_resource_definition(
            crd["metadata"]["name"], {"spec": {"conversion": {"strategy": "None", "webhook": None}}},
            _content_type="application/merge-patch+json")
    except client.ApiException as e:
        if e.status != 404:
            raise
    crds.remove(api_client, dict(crd), wait=wait)


def replace(api_client: Any, crd: Mapping[str, Any], obj: Mapping[str, Any]) -> dict[str, Any]:
    """PUT ``obj`` back as it is (its resourceVersion guards it): written in the storage version."""
    version = str(obj["apiVersion"]).split("/")[-1]
    put: dict[str, Any] = _objects(api_client).replace_cluster_custom_object(
        *crds.coordinates(version_of(crd, version)), obj["metadata"]["name"], dict(obj))
    return put


def timed_list(api_client: Any, crd: Mapping[str, Any], version: str, *, repeat: int = 5) -> float:
    """The median seconds of ``repeat`` LISTs at ``version``."""
    times = []
    for _ in range(repeat):
        started = time.monotonic()
        read_all(api_client, crd, version)
        times.append(time.monotonic() - started)
    return sorted(times)[len(times) // 2]


def served_group_versions(api_client: Any) -> list[str]:
    """Every ``group/version`` this API server serves (discovery): is ``storagemigration.k8s.io`` among them?"""
    from kubernetes import client

    groups = client.ApisApi(api_client).get_api_versions().groups
    return sorted(v.group_version for g in groups for v in g.versions)


# -- the webhook ----------------------------------------------------------------------------


def runner_path() -> Path:
    """The file ``kopf run`` runs: :mod:`operatorlab.kopf_conversion`."""
    return Path(__file__).with_name("kopf_conversion.py")


class ConversionWebhook(admission.Webhook):
    """kopf's process serving ``convert(obj, version)`` from ``handlers`` at ``https://127.0.0.1:PORT/convert``.

    kopf serves no conversion (:mod:`operatorlab.kopf_conversion` says where that is in its source), so the
    process adds an aiohttp server of its own; the rest (free port chosen again if lost, its own CA and
    certificate, attached to this interpreter, pause and stop) is :class:`~operatorlab.admission.Webhook`'s.
    """

    def __init__(self, handlers: Path, crd: Mapping[str, Any], *, kubeconfig: Path | None = None,
                 workdir: Path | None = None) -> None:
        super().__init__(handlers, {}, crd, kubeconfig=kubeconfig, workdir=workdir)

    def runner(self) -> Path:
        return runner_path()

    def environment(self) -> dict[str, str]:
        return {"OPERATORLAB_CONVERSION_HANDLERS": str(self.handlers)}

    @property
    def convert_url(self) -> str:
        return self.url("convert")

    def install(self, api_client: Any, *, budget: float = 30.0) -> bool:
        """Put the CRD's conversion on this webhook and wait until the API server calls it (False: it did not).

        The API server's CRD handler picks up a changed conversion a moment after the CRD is stored: an
        object named ``sentinel-...``, stored in the storage version and read at the other, is refused
        by this server (:data:`~operatorlab.kopf_conversion.SENTINEL`) once it is in force.
        The sentinel is deleted again before this returns.
        """
        from kubernetes import client

        crds.install(api_client, with_webhook(self.crd, self.convert_url, self.ca_bundle))
        stored = next(v["name"] for v in self.crd["spec"]["versions"] if v["storage"])
        other = next(v["name"] for v in self.crd["spec"]["versions"] if not v["storage"] and v["served"])
        name = "sentinel-conversion"
        spec = {"namespaceLabel": "a=b"} if stored == OLD else {"namespaceSelector": {"key": "a", "value": "b"}}
        try:
            create(api_client, self.crd, stored, name, spec)
        except client.ApiException as e:
            if e.status != 409:
                raise
        try:
            return admission.in_force(lambda: admission.send(lambda: read(api_client, self.crd, other, name)),
                                      SENTINEL, budget=budget)
        finally:
            # The API server's watch cache lists every object at each served version: one object its
            # webhook refuses to convert fails that whole LIST, and the cache answers 429 ("storage is
            # (re)initializing") to every read it serves until the object is gone.
            delete(api_client, self.crd, name)
