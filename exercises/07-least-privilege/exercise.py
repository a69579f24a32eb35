"""Lesson 07: least privilege, graded by running the operator as that identity and asking the API server.

The learner's ``RULES`` become a private ClusterRole, bound to a fresh ServiceAccount; the
real NamespaceBaseline operator runs with that ServiceAccount's token and must do its whole
job; then SubjectAccessReviews ask what else the identity may do, and everything it does
not need must be denied.
"""

from __future__ import annotations

import pprint
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import yaml
from kubernetes import client

from operatorlab import paths, rbac
from operatorlab.exercises import Exercise
from operatorlab.grading import Check, within
from operatorlab.operators import OperatorProcess, operator_path

NSB = ("hedronite.io", "v1alpha1", "namespacebaselines")
DENY = "baseline-default-deny"
# What the operator never needs: each must be denied to its identity.
NOT_NEEDED = [
    ("get", "", "secrets", "default"), ("list", "", "secrets", None), ("create", "", "pods", "default"),
    ("delete", "", "namespaces", None), ("create", "rbac.authorization.k8s.io", "clusterrolebindings", None),
    ("delete", "hedronite.io", "namespacebaselines", None), ("create", "hedronite.io", "namespacebaselines", None),
    ("patch", "", "namespaces", None), ("create", "apiextensions.k8s.io", "customresourcedefinitions", None),
]


class LeastPrivilege(Exercise):
    lesson = "07"
    title = "RULES: the NamespaceBaseline operator's ClusterRole, enough and no more"
    subject = "RULES"
    budget = 30.0
    xdist_group = "nsb-operator"  # it runs a cluster-wide NamespaceBaseline operator
    hints = (
        "List what the operator does to each kind of object, then grant exactly those verbs, nothing per wildcard.",
        "kopf needs list, watch and patch on namespacebaselines, patch on namespacebaselines/status, list and "
        "watch on customresourcedefinitions, create on events. The reconcile needs list and watch on namespaces "
        "and, on networkpolicies, what it uses to read, create, correct and remove them.",
        "Six rules: hedronite.io namespacebaselines [list, watch, patch]; hedronite.io namespacebaselines/status "
        "[patch]; apiextensions.k8s.io customresourcedefinitions [list, watch]; '' events [create]; '' namespaces "
        "[list, watch]; networking.k8s.io networkpolicies [get, list, watch, create, update, delete].",
    )

    def solution_source(self) -> str:
        """The reference rules as a learner would write them (from the operator's deploy/clusterrole.yaml)."""
        rules = yaml.safe_load((paths.operators_dir() / "namespacebaseline" / "deploy" / "clusterrole.yaml")
                               .read_text())["rules"]
        return "RULES = " + pprint.pformat(rules, width=100, sort_dicts=False) + "\n"

    def check(self, learner: ModuleType) -> Iterator[Check]:
        rules = list(learner.RULES)
        suffix = uuid.uuid4().hex[:6]
        name, namespace = f"ex07-{suffix}", f"ex07-{suffix}"
        core, rbac_api = client.CoreV1Api(self.api), client.RbacAuthorizationV1Api(self.api)
        custom, networking = client.CustomObjectsApi(self.api), client.NetworkingV1Api(self.api)
        auth = client.AuthorizationV1Api(self.api)
        subject = f"system:serviceaccount:{namespace}:{name}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        operator = None
        try:
            core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
            rbac_api.create_cluster_role({"metadata": {"name": name}, "rules": rules})
            rbac_api.create_cluster_role_binding({
                "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                        "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})
            token_config = rbac.service_account_kubeconfig(self.api, namespace, name,
                                                           Path(tempfile.mkdtemp(prefix="ex07-")) / "kubeconfig")
            operator = OperatorProcess(operator_path("namespacebaseline"), kubeconfig=token_config,
                                       env={"NSB_RESYNC_SECONDS": "2"}).start()
            # Nothing will change once the operator exited or was refused (a 403 Forbidden in its log;
            # matched by the word, as "403" alone also turns up inside uids and resourceVersions).
            stuck = lambda: not operator.running or _refused(operator.log())  # noqa: E731

            custom.create_cluster_custom_object(*NSB[:2], NSB[2], {
                "apiVersion": "hedronite.io/v1alpha1", "kind": "NamespaceBaseline", "metadata": {"name": name},
                "spec": {"namespaceLabel": f"ex07={suffix}", "allowDNS": False}})
            core.patch_namespace(namespace, {"metadata": {"labels": {"ex07": suffix}}})
            applied = within("as that identity, the operator puts the baseline's policy into a labelled namespace",
                             lambda: DENY in _policies(networking, namespace), budget=self.budget, give_up=stuck,
                             evidence=lambda _: f"no policy; the operator's log ends: {_forbidden(operator)}")
            yield applied
            ready = within("and reports the baseline Ready",
                           lambda: _ready(custom, name), budget=self.budget, give_up=stuck,
                           evidence=lambda _: f"not Ready; {_forbidden(operator)}")
            yield ready
            if applied.passed and ready.passed:
                networking.delete_namespaced_network_policy(DENY, namespace)
                yield within("a policy deleted by hand comes back (the resync can read and create)",
                             lambda: DENY in _policies(networking, namespace), budget=self.budget,
                             give_up=stuck, evidence=lambda _: _forbidden(operator))
            allowed = [f"{verb} {group + '/' if group else ''}{resource}" + (f" in {ns}" if ns else "")
                       for verb, group, resource, ns in NOT_NEEDED
                       if _allowed(auth, subject, verb, group, resource, ns)]
            yield Check("everything the operator does not need is denied (secrets, pods, RBAC, "
                        "deleting namespaces, creating baselines, CRDs)", not allowed,
                        f"allowed to that identity: {allowed}" if allowed else "all denied")
        finally:
            if operator is not None:
                operator.stop()
            _cleanup(custom, rbac_api, core, name, namespace)


def _policies(networking: client.NetworkingV1Api, namespace: str) -> list[str]:
    return sorted(p.metadata.name for p in networking.list_namespaced_network_policy(namespace).items)


def _ready(custom: client.CustomObjectsApi, name: str) -> bool:
    status = custom.get_cluster_custom_object(*NSB[:2], NSB[2], name).get("status") or {}
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _refused(text: str) -> bool:
    """A 403 answer in a log: kopf's APIForbiddenError and the client's ApiException both say "forbidden"."""
    return "forbidden" in text.lower()


def _forbidden(operator: OperatorProcess) -> str:
    lines = [line.strip() for line in operator.log().splitlines() if _refused(line)]
    return lines[-1][-300:] if lines else "no 403 Forbidden in the operator's log"


def _allowed(auth: client.AuthorizationV1Api, user: str, verb: str, group: str, resource: str,
             namespace: str | None) -> bool:
    review = auth.create_subject_access_review({
        "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                 "resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                        **({"namespace": namespace} if namespace else {})}}})
    return bool(review.status.allowed)


def _cleanup(custom, rbac_api, core, name: str, namespace: str) -> None:
    for delete in (lambda: _strip_and_delete(custom, name),
                   lambda: rbac_api.delete_cluster_role_binding(name), lambda: rbac_api.delete_cluster_role(name),
                   lambda: core.delete_namespace(namespace)):
        try:
            delete()
        except client.ApiException as e:
            if e.status != 404:
                raise


def _strip_and_delete(custom: client.CustomObjectsApi, name: str) -> None:
    """The operator is stopped: drop kopf's finalizer so the baseline can go."""
    custom.patch_cluster_custom_object(*NSB[:2], NSB[2], name, {"metadata": {"finalizers": None}})
    custom.delete_cluster_custom_object(*NSB[:2], NSB[2], name)
