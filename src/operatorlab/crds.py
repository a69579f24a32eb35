"""Copies of a shipped CRD under a group of their own, for lessons and checks that change a schema.

Lesson 09 and its exercises try validation rules on a real API server. They never touch
``crds/*.yaml`` as installed (the operators and other lessons rely on it): they copy a shipped
CRD into another API group, change the copy, install it, send objects to it and remove it.
What the API server answers is the lesson: so the answer is returned as its own words
(:func:`refusal`), never interpreted.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from operatorlab import paths
from operatorlab.cluster import manifests
from operatorlab.grading import Check


def shipped(filename: str) -> dict[str, Any]:
    """The CRD in ``crds/<filename>`` as a dict (its only document)."""
    (crd,) = manifests.load(paths.crds_dir() / filename)
    return crd


def copy_to_group(crd: dict[str, Any], group: str) -> dict[str, Any]:
    """A deep copy of ``crd`` under ``group``, its kind renamed ``<Kind>Copy`` and without short names.

    The rename matters to kubectl: it resolves a bare ``tenant`` to the first group serving a kind
    of that name, and caches discovery on disk, so a copy of the same kind would take over (and,
    once deleted, leave a stale mapping behind) for every ``kubectl get tenant`` on the cluster.
    """
    moved = copy.deepcopy(crd)
    names = moved["spec"]["names"]
    kind = f"{names['kind']}Copy"
    moved["spec"]["names"] = {"kind": kind, "listKind": f"{kind}List", "plural": f"{names['kind'].lower()}copies",
                              "singular": kind.lower()}
    moved["spec"]["group"] = group
    moved["metadata"] = {"name": f"{moved['spec']['names']['plural']}.{group}"}
    return moved


def spec_schema(crd: dict[str, Any]) -> dict[str, Any]:
    """The ``spec`` schema of the CRD's first version (to change in place, on a copy)."""
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def coordinates(crd: dict[str, Any]) -> tuple[str, str, str]:
    """``(group, version, plural)`` of the CRD's first version, as the custom-objects client takes them."""
    return crd["spec"]["group"], crd["spec"]["versions"][0]["name"], crd["spec"]["names"]["plural"]


def install(api_client: Any, crd: dict[str, Any], *, timeout: float = 60.0) -> None:
    """Apply ``crd`` (create or change it) and wait until it is Established and served.

    Raises:
        kubernetes.client.ApiException: the API server refused the CRD (422: a rule that does
            not compile, a schema that is not structural); its message says why.
        TimeoutError: it was not served within ``timeout`` seconds.
    """
    manifests.apply(api_client, [crd])
    manifests.wait_crds_established(api_client, [crd["metadata"]["name"]], timeout=timeout)
    manifests.wait_crds_served(api_client, [crd], timeout=timeout)


def remove(api_client: Any, crd: dict[str, Any], *, wait: bool = True, timeout: float = 60.0) -> None:
    """Delete the CRD (and so every object of it) and, with ``wait``, wait until it is gone.

    A CRD that is absent already is fine. A check that made a CRD of a fresh group need not
    wait: nothing else will ask for that group.
    """
    from kubernetes import client

    extensions = client.ApiextensionsV1Api(api_client)
    name = crd["metadata"]["name"]
    try:
        extensions.delete_custom_resource_definition(name)
    except client.ApiException as e:
        if e.status != 404:
            raise
    deadline = time.monotonic() + (timeout if wait else 0.0)
    while time.monotonic() < deadline:
        try:
            extensions.read_custom_resource_definition(name)
        except client.ApiException as e:
            if e.status == 404:
                return
            raise
        time.sleep(0.2)
    if wait:
        raise TimeoutError(f"CRD {name} still there after {timeout:.0f}s")


def refusal(error: Exception) -> str:
    """The API server's own words for a refused request: the Status ``message`` (else the error itself)."""
    body = getattr(error, "body", None)
    try:
        message = json.loads(body)["message"] if body else ""
    except (ValueError, KeyError, TypeError):
        message = ""
    status = getattr(error, "status", None)
    return f"{status} {message}" if message else str(error).strip()


def manifest(crd: dict[str, Any], name: str, spec: Any) -> dict[str, Any]:
    """An object of the CRD's kind (cluster-scoped, as the Tenant is) with this ``spec``."""
    group, version, _ = coordinates(crd)
    return {"apiVersion": f"{group}/{version}", "kind": crd["spec"]["names"]["kind"], "metadata": {"name": name},
            "spec": spec}


def create(api_client: Any, crd: dict[str, Any], name: str, spec: Any, *, dry_run: bool = False,
           field_validation: str | None = None) -> str | None:
    """Send a create of an object with this ``spec``: None if the API server accepted it, else its refusal.

    ``dry_run`` runs every admission and validation step and stores nothing.
    """
    from kubernetes import client

    extra: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
    if field_validation:
        extra["field_validation"] = field_validation
    try:
        client.CustomObjectsApi(api_client).create_cluster_custom_object(
            *coordinates(crd), manifest(crd, name, spec), **extra)
    except client.ApiException as e:
        if e.status in (400, 422):  # refused by decoding or validation: the answer asked for
            return refusal(e)
        raise
    return None


def patch_spec(api_client: Any, crd: dict[str, Any], name: str, spec: dict[str, Any]) -> str | None:
    """Merge-patch ``spec`` of an object (a None value removes a field): None if accepted, else the refusal."""
    from kubernetes import client

    try:
        client.CustomObjectsApi(api_client).patch_cluster_custom_object(*coordinates(crd), name, {"spec": spec})
    except client.ApiException as e:
        if e.status in (400, 422):
            return refusal(e)
        raise
    return None


def rules_problem(rules: Any) -> str:
    """What is wrong with ``rules`` as a list of ``x-kubernetes-validations`` entries a person will read
    ('' if nothing): each needs a CEL ``rule`` and a ``message``, which is what a refusal prints."""
    if not isinstance(rules, list) or not rules:
        return "RULES must be a non-empty list of {'rule': '<CEL>', 'message': '<words>'}"
    for rule in rules:
        if not (isinstance(rule, dict) and isinstance(rule.get("rule"), str)
                and isinstance(rule.get("message"), str) and rule["message"].strip()):
            return f"each rule needs a CEL 'rule' and a 'message' a person can act on; got {rule!r}"
    return ""


def install_check(api_client: Any, crd: dict[str, Any]) -> Check:
    """Install ``crd`` as a graded property: the API server compiles every CEL rule here, and says where
    one is wrong."""
    from kubernetes import client

    name = "the API server takes your rules (they compile)"
    try:
        install(api_client, crd)
    except client.ApiException as e:
        return Check(name, False, refusal(e))
    return Check(name, True)
