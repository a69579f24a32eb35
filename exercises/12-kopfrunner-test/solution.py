"""Reference solution: the Website operator run in this process by kopf's KopfRunner, against the real API server.

The test perturbs the world the way a person would (it scales the Website's Deployment to
zero by hand) and waits, with a timeout, for the operator to put it back: a test that only
looked for the Deployment would pass on a copy that never watches it.
"""

from pathlib import Path

from kopf.testing import KopfRunner
from kubernetes import client, config

from operatorlab.wait import eventually

REPLICAS = 2


def test_heals_its_deployment(operator: Path, namespace: str) -> None:
    """The operator applies a Website's Deployment and puts it back when it is scaled to 0 by hand."""
    config.load_kube_config()  # the KUBECONFIG the operator's kopf logs in with, too
    apps, custom = client.AppsV1Api(), client.CustomObjectsApi()
    args = ["run", "--standalone", "--namespace", namespace, str(operator)]
    # kopf's default registry: the operator file's handlers, plus kopf's fallback logins (a bare
    # kopf.OperatorRegistry() has none: "LoginError: Ran out of valid credentials").
    with KopfRunner(args, timeout=30) as runner:
        custom.create_namespaced_custom_object("example.com", "v1", namespace, "websites", {
            "apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": "site"},
            "spec": {"image": "nginx:1.27", "replicas": REPLICAS}})
        eventually(lambda: apps.read_namespaced_deployment("site", namespace).spec.replicas == REPLICAS,
                   timeout=20, message="the operator applies the Website's Deployment")
        # Its create handler done: a reconcile still under way (a retry, say) would heal the scale too.
        eventually(lambda: (custom.get_namespaced_custom_object("example.com", "v1", namespace, "websites", "site")
                            .get("status") or {}).get("phase") == "Applied",
                   timeout=20, message="the Website's reconcile is done (status.phase Applied)")
        apps.patch_namespaced_deployment_scale("site", namespace, {"spec": {"replicas": 0}})
        eventually(lambda: apps.read_namespaced_deployment("site", namespace).spec.replicas == REPLICAS,
                   timeout=10, message="the Deployment scaled to 0 by hand is put back")
    assert runner.exception is None, runner.exception  # the operator's own crash, re-raised on exit too
    assert runner.exit_code == 0, runner.output[-500:]
