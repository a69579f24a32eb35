"""Reference solution: a Website's Ready condition that means "its Pods serve", written only on change."""

from kubernetes import client

from operatorlab.operators import load_module

WEBSITES = ("example.com", "v1")  # group, version; the plural is "websites"
website_operator = load_module("website")  # its rollout_status and ready_conditions: the operator's own rules


def sync_ready(custom: client.CustomObjectsApi, apps: client.AppsV1Api, namespace: str, name: str) -> None:
    website = custom.get_namespaced_custom_object(*WEBSITES, namespace, "websites", name)
    try:
        deployment = apps.api_client.sanitize_for_serialization(apps.read_namespaced_deployment(name, namespace))
    except client.ApiException as e:
        if e.status != 404:
            raise
        deployment = None
    if deployment is None:
        ready, reason, message = False, "DeploymentMissing", f"Deployment {namespace}/{name} does not exist"
    else:
        rollout = website_operator.rollout_status(deployment)
        ready = rollout["rollout"] == "Complete"  # the latest spec seen, every Pod updated and ready
        reason = "Available" if ready else "ReplicaFailure" if rollout["rolloutMessage"] else "PodsNotReady"
        # Pods refused (a quota, an admission policy): the controller's own words say why.
        message = rollout["rolloutMessage"] or f"{rollout['readyReplicas']} of {rollout['replicas']} Pods ready"
    previous = (website.get("status") or {}).get("conditions") or []
    conditions = website_operator.ready_conditions(
        previous, ready=ready, reason=reason, message=message,
        generation=website["metadata"]["generation"],  # the Website's spec this condition is about
        now=website_operator._now())
    if conditions != previous:  # nothing changed: no write, no watch event for anyone
        custom.patch_namespaced_custom_object_status(*WEBSITES, namespace, "websites", name,
                                                     {"status": {"conditions": conditions}})
