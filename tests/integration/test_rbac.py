"""Each operator runs as its own ServiceAccount, with exactly its ClusterRole, and succeeds;
what its ClusterRole does not grant is refused (403).

Each test applies a private copy of the operator's deploy/ ServiceAccount, ClusterRole
and ClusterRoleBinding (same rules, a unique name, deleted afterwards), so parallel
tests and a lab that breaks the shared role on purpose never meet. The operator gets a
kubeconfig holding a token from the TokenRequest API: every request it makes is
authorized as ``system:serviceaccount:<namespace>:<name>``, in the namespace of the
operator's kustomization (operatorlab-system, or namespacebaseline-system).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from operatorlab import rbac
from operatorlab.cluster import manifests
from operatorlab.operators import OperatorProcess, operator_path
from operatorlab.wait import eventually


class Identity:
    """A private copy of an operator's RBAC, and a kubeconfig acting as its ServiceAccount."""

    def __init__(self, name: str, namespace: str, kubeconfig: Path) -> None:
        self.name = name
        self.kubeconfig = kubeconfig
        self.api_client = config.new_client_from_config(config_file=str(kubeconfig))
        self.user = f"system:serviceaccount:{namespace}:{name}"


@pytest.fixture
def identity(api_client, tmp_path, unique) -> Iterator[Callable[..., Identity]]:
    """Make an operator's identity: ``identity("website", extra_rules=[...])``; removed afterwards."""
    made: list[tuple[str, str]] = []
    rbac_api = client.RbacAuthorizationV1Api(api_client)
    core = client.CoreV1Api(api_client)

    def make(operator: str, extra_rules: list[dict] | None = None) -> Identity:
        name = f"{operator}-operator-{unique}"
        objects = rbac.operator_rbac(operator, name=name)
        (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
        role["rules"] += extra_rules or []
        (account,) = [o for o in objects if o["kind"] == "ServiceAccount"]
        namespace = account["metadata"]["namespace"]
        # The operator's namespace (shared, or its own): created if missing, never deleted, and
        # not applied (an apply without its labels would take away those another test applied).
        try:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        except client.ApiException as e:
            if e.status != 409:
                raise
        manifests.apply(api_client, objects)
        made.append((name, namespace))
        path = rbac.service_account_kubeconfig(api_client, namespace, name, tmp_path / f"{name}.kubeconfig")
        return Identity(name, namespace, path)

    yield make
    for name, namespace in made:
        for delete, args in ((rbac_api.delete_cluster_role_binding, (name,)), (rbac_api.delete_cluster_role, (name,)),
                             (core.delete_namespaced_service_account, (name, namespace))):
            try:
                delete(*args)
            except client.ApiException as e:
                if e.status != 404:
                    raise


def _denied(log: str, who: Identity) -> list[str]:
    """Log lines where the API server refused this identity something.

    (Not simply "forbidden" anywhere in the log: a cluster-wide operator logs the
    objects it sees, and another operator's Tenant may carry such a message.)"""
    return [line for line in log.splitlines() if "forbidden" in line.lower() and who.user in line]


def _forbidden(call: Callable[[], object], user: str) -> str:
    """Run ``call``; it must be refused by RBAC (403) for ``user``. Returns the server's message."""
    with pytest.raises(client.ApiException) as refused:
        call()
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert f'User "{user}" cannot' in message
    return message


@pytest.fixture
def a_deployment(api_client, namespace) -> str:
    """A Deployment in the test's namespace, made by the admin: something to try deleting."""
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bystander"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "bystander"}},
                     "template": {"metadata": {"labels": {"app": "bystander"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}}
    client.AppsV1Api(api_client).create_namespaced_deployment(namespace, body)
    return "bystander"


def test_the_token_kubeconfig_authenticates_as_the_service_account(identity):
    who = identity("website")
    review = client.AuthenticationV1Api(who.api_client).create_self_subject_review(
        client.V1SelfSubjectReview())
    assert review.status.user_info.username == who.user
    assert "system:serviceaccounts" in review.status.user_info.groups


@pytest.mark.xdist_group("tenant-operator")
def test_tenant_operator_works_as_its_service_account_and_no_more(identity, custom, core, namespace, a_deployment,
                                                                  unique, tmp_path):
    who = identity("tenant")
    tenant = f"rbac-{unique}"
    op = OperatorProcess(operator_path("tenant"), kubeconfig=who.kubeconfig, log_path=tmp_path / "tenant.log").start()
    try:
        custom.create_cluster_custom_object("hedronite.io", "v1", "tenants", {
            "apiVersion": "hedronite.io/v1", "kind": "Tenant", "metadata": {"name": tenant},
            "spec": {"cpuQuota": "1"}})
        eventually(lambda: custom.get_cluster_custom_object("hedronite.io", "v1", "tenants", tenant)
                   .get("status", {}).get("phase") == "Ready", timeout=60, message="Tenant Ready as the ServiceAccount")
        assert core.read_namespaced_resource_quota("tenant-quota", f"tenant-{tenant}").spec.hard["limits.cpu"] == "1"
        assert _denied(op.log(), who) == []
    finally:
        op.stop()
        custom.patch_cluster_custom_object("hedronite.io", "v1", "tenants", tenant, {"metadata": {"finalizers": None}})
        custom.delete_cluster_custom_object("hedronite.io", "v1", "tenants", tenant)
        core.delete_namespace(f"tenant-{tenant}")
    apps = client.AppsV1Api(who.api_client)
    _forbidden(lambda: apps.delete_namespaced_deployment(a_deployment, namespace), who.user)
    _forbidden(lambda: client.CoreV1Api(who.api_client).list_namespaced_secret(namespace), who.user)
    # It may create namespaces, but not touch Websites.
    _forbidden(lambda: client.CustomObjectsApi(who.api_client).list_namespaced_custom_object(
        "example.com", "v1", namespace, "websites"), who.user)


def test_website_operator_works_as_its_service_account_and_no_more(identity, custom, core, namespace, a_deployment,
                                                                   tmp_path):
    # The test confines the operator to its namespace (--namespace), so parallel tests never
    # share one; kopf then follows namespaces, which the deployed operator (--all-namespaces)
    # does not. That one rule is this test's, not the ClusterRole's.
    who = identity("website",
                   extra_rules=[{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}])
    op = OperatorProcess(operator_path("website"), namespaces=[namespace], kubeconfig=who.kubeconfig,
                         log_path=tmp_path / "website.log").start()
    try:
        custom.create_namespaced_custom_object("example.com", "v1", namespace, "websites", {
            "apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": "shop"}, "spec": {"replicas": 2}})

        def ready() -> bool:
            website = custom.get_namespaced_custom_object("example.com", "v1", namespace, "websites", "shop")
            status = website.get("status", {})
            return status.get("readyReplicas") == status.get("replicas") == 2 and status.get("phase") == "Applied"

        eventually(ready, timeout=60, message="Website ready as the ServiceAccount")
        # Its first write created the Deployment and Service by server-side apply: that
        # needs create as well as patch (the RBAC comment in deploy/clusterrole.yaml).
        assert _denied(op.log(), who) == []
        assert core.read_namespaced_service("shop", namespace).spec.ports[0].port == 80
    finally:
        op.stop()
    apps = client.AppsV1Api(who.api_client)
    _forbidden(lambda: apps.delete_namespaced_deployment(a_deployment, namespace), who.user)
    _forbidden(lambda: client.CoreV1Api(who.api_client).list_namespaced_secret(namespace), who.user)
    _forbidden(lambda: client.CoreV1Api(who.api_client).delete_namespaced_service("shop", namespace), who.user)


@pytest.mark.xdist_group("nsb-operator")
def test_namespacebaseline_operator_works_as_its_service_account_and_no_more(
        identity, custom, core, namespace, a_deployment, unique, tmp_path):
    who = identity("namespacebaseline")
    baseline = f"rbac-{unique}"
    op = OperatorProcess(operator_path("namespacebaseline"), kubeconfig=who.kubeconfig,
                         env={"NSB_RESYNC_SECONDS": "3600"}, log_path=tmp_path / "nsb.log").start()
    networking = client.NetworkingV1Api(core.api_client)
    try:
        custom.create_cluster_custom_object("hedronite.io", "v1alpha1", "namespacebaselines", {
            "apiVersion": "hedronite.io/v1alpha1", "kind": "NamespaceBaseline", "metadata": {"name": baseline},
            "spec": {"namespaceLabel": f"rbac-test={unique}"}})
        core.patch_namespace(namespace, {"metadata": {"labels": {"rbac-test": unique}}})
        eventually(lambda: sorted(p.metadata.name for p in networking.list_namespaced_network_policy(namespace).items)
                   == ["baseline-allow-dns", "baseline-default-deny"],
                   timeout=30, message="policies as the ServiceAccount")
        core.patch_namespace(namespace, {"metadata": {"labels": {"rbac-test": None}}})
        eventually(lambda: not networking.list_namespaced_network_policy(namespace).items, timeout=30,
                   message="policies removed as the ServiceAccount")
        eventually(lambda: custom.get_cluster_custom_object("hedronite.io", "v1alpha1", "namespacebaselines", baseline)
                   .get("status", {}).get("phase") == "Ready", timeout=30, message="status written")
        assert _denied(op.log(), who) == []
    finally:
        op.stop()
        custom.patch_cluster_custom_object("hedronite.io", "v1alpha1", "namespacebaselines", baseline,
                                           {"metadata": {"finalizers": None}})
        custom.delete_cluster_custom_object("hedronite.io", "v1alpha1", "namespacebaselines", baseline)
    sa_core = client.CoreV1Api(who.api_client)
    # It reads namespaces; it never changes one.
    _forbidden(lambda: sa_core.patch_namespace(namespace, {"metadata": {"labels": {"x": "y"}}}), who.user)
    _forbidden(lambda: client.AppsV1Api(who.api_client).delete_namespaced_deployment(a_deployment, namespace), who.user)
    _forbidden(lambda: sa_core.list_namespaced_secret(namespace), who.user)
