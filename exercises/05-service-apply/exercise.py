"""Lesson 05: a child by server-side apply, owned by its parent, graded on the real API server.

The learner's ``apply_service(core, website)`` is called directly (no operator runs): the
check owns a Website in a namespace of its own and judges what the API server did with
each apply, and what the garbage collector does when the Website goes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from types import ModuleType

from kubernetes import client

from operatorlab.exercises import Exercise
from operatorlab.grading import Check, within

WEBSITES = ("example.com", "v1", "websites")


class ServiceApply(Exercise):
    lesson = "05"
    title = "apply_service: server-side apply, an owner reference, and the garbage collector"
    subject = "apply_service"
    budget = 30.0
    hints = (
        "Send the whole Service you want, every time, and let the API server work out the difference. "
        "Who deletes it when the Website goes?",
        "Server-side apply is a PATCH with content type application/apply-patch+yaml and a field_manager "
        "(force=True takes over fields another manager set before). The owner reference names the Website's "
        "apiVersion, kind, name and uid, with controller: true.",
        "Shape: build {'apiVersion': 'v1', 'kind': 'Service', 'metadata': {name, namespace, ownerReferences: "
        "[owner]}, 'spec': {selector, ports: [{'name': 'http', 'port': port, 'targetPort': 'http'}]}}; "
        "core.patch_namespaced_service(name, namespace, body, field_manager=MANAGER, force=True, "
        "_content_type=APPLY_PATCH).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        apply = learner.apply_service
        core, custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)
        namespace = f"ex05-{uuid.uuid4().hex[:6]}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        try:
            group, version, plural = WEBSITES
            website = custom.create_namespaced_custom_object(group, version, namespace, plural, {
                "apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": "site"},
                "spec": {"port": 80}})
            apply(core, website)
            service = core.read_namespaced_service("site", namespace)
            ports = [(p.name, p.port, str(p.target_port)) for p in service.spec.ports]
            yield Check("the Service is created as desired (selector app=site, port http 80)",
                        service.spec.selector == {"app": "site"} and ports == [("http", 80, "http")],
                        f"selector {service.spec.selector}, ports {ports}")
            owners = [(r.kind, r.name, r.uid, r.controller) for r in service.metadata.owner_references or []]
            yield Check("it is owned by the Website (a controller owner reference with its uid)",
                        owners == [("Website", "site", website["metadata"]["uid"], True)],
                        f"ownerReferences {owners}")
            before = service.metadata.resource_version
            apply(core, website)
            after = core.read_namespaced_service("site", namespace).metadata.resource_version
            yield Check("a second apply of the same Service changes nothing", before == after,
                        f"resourceVersion {before} -> {after}")
            core.patch_namespaced_service("site", namespace, {"metadata": {"labels": {"team": "web"}}},
                                          field_manager="someone-else")
            website = custom.patch_namespaced_custom_object(group, version, namespace, plural, "site",
                                                            {"spec": {"port": 8080}})
            apply(core, website)
            service = core.read_namespaced_service("site", namespace)
            ports = [(p.name, p.port) for p in service.spec.ports]
            label = (service.metadata.labels or {}).get("team")
            yield Check("after the port changed: port 8080 only, and another manager's label kept",
                        ports == [("http", 8080)] and label == "web",
                        f"ports {ports}; label team={label!r}")
            custom.delete_namespaced_custom_object(group, version, namespace, plural, "site")
            yield within("the garbage collector deletes the Service with the Website",
                         lambda: _gone(core, namespace), budget=self.budget,
                         evidence=lambda _: "the Service is still there: nothing owns it")
        finally:
            core.delete_namespace(namespace)


def _gone(core: client.CoreV1Api, namespace: str) -> bool:
    try:
        core.read_namespaced_service("site", namespace)
    except client.ApiException as e:
        if e.status == 404:
            return True
        raise
    return False
