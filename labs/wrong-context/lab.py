"""wrong-context: a shared kubeconfig left on the wrong context, and the shop's context without its namespace.

A kubeconfig holds clusters, users and contexts; a context pairs one cluster with one user and,
optionally, a namespace, and ``current-context`` names the one kubectl uses when no flag says
otherwise. So the same ``kubectl get deployments`` lists another namespace, as another user, on
another cluster, depending on one line of the file.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path

from kubernetes import client

from operatorlab import kubectl, rbac
from operatorlab.cluster import kubeconfig
from operatorlab.grading import converges
from operatorlab.labs import Check, Lab
from operatorlab.labs import workloads as w
from operatorlab.labs.checks import get_or_none

NAMESPACE = "lab-shop"
APPS = ("cart", "catalog")
SHOP_USER, AUDITOR = "shop-dev", "auditor"  # the shop's ServiceAccount; the audit tool's, which may view all
SHOP_USER_NAME = f"system:serviceaccount:{NAMESPACE}:{SHOP_USER}"
SHOP, STAGING, AUDIT = "shop", "staging", "audit"  # the file's contexts
AUDIT_BINDING = f"{NAMESPACE}-{AUDITOR}-view"
#: A staging cluster no longer there: nothing listens on port 1 of loopback.
STAGING_SERVER = "https://127.0.0.1:1"
FILE = "shop.kubeconfig"
SHOWN = f"labs/wrong-context/{FILE}"  # where a learner finds it, from the checkout
TOKEN_SECONDS = 86400
#: Seconds for a Deployment just made to show up in a list: the API server serves it at once.
BUDGET = 5.0
LISTS = f"with {SHOWN} and no other flag, kubectl get deployments lists the shop's Deployments, a fresh one included"
AS_SHOP = f"{SHOWN}'s current context acts as the shop's user, {SHOP_USER}"


class WrongContext(Lab):
    title = "Nothing here, says kubectl"
    summary = (f"with the kubeconfig at {SHOWN}, kubectl get deployments shows none of the shop's Deployments: make "
               f"it list the shop's Deployments ({NAMESPACE}), as the shop's user {SHOP_USER}, without any extra flag")
    drill = True
    xdist_group = "drill-wrong-context"  # its bypass tests run the same lab: not at the same time
    settle = 0.0  # each check run makes a fresh Deployment and runs kubectl with the file itself
    hints = (
        f"kubectl --kubeconfig {SHOWN} config get-contexts: which context is current (*), and which cluster, user "
        f"and namespace does each name? kubectl --kubeconfig {SHOWN} config view shows the rest.",
        f"Without -n, kubectl uses the current context's namespace (default when it names none), as the current "
        f"context's user (kubectl --kubeconfig {SHOWN} auth whoami), on its cluster. Which context pairs the shop's "
        f"cluster with {SHOP_USER}?",
        f"kubectl --kubeconfig {SHOWN} config use-context {SHOP}; kubectl --kubeconfig {SHOWN} config set-context "
        f"--current --namespace={NAMESPACE}. Pasting the admin's kubeconfig in, or giving the audit context the "
        f"namespace, lists them as someone else. labs/wrong-context/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        w.create_namespace(self, NAMESPACE)
        for name in APPS:
            w.apps(self).create_namespaced_deployment(NAMESPACE, w.deployment(name, replicas=1))
        rbac_api = client.RbacAuthorizationV1Api(self.api)
        for account in (SHOP_USER, AUDITOR):
            self.core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": account}})
        rbac_api.create_namespaced_role(NAMESPACE, {"metadata": {"name": SHOP_USER}, "rules": [
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]}]})
        rbac_api.create_namespaced_role_binding(NAMESPACE, {
            "metadata": {"name": SHOP_USER}, "subjects": [_account(SHOP_USER)],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SHOP_USER}})
        self.track("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", AUDIT_BINDING)
        rbac_api.create_cluster_role_binding({
            "metadata": {"name": AUDIT_BINDING}, "subjects": [_account(AUDITOR)],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}})
        self.remember_file(self.workdir / FILE)
        kubeconfig.write_config(self.workdir / FILE, kubeconfig.merged(_contexts(self), current=SHOP))

    def inject(self) -> None:
        # The file was lent for an audit: left on the audit context, and the shop's context's
        # namespace cleared on the way (kubectl config set-context shop --namespace=).
        path = str(self.workdir / FILE)
        kubectl.kubectl(["--kubeconfig", path, "config", "use-context", AUDIT], echo=False)
        kubectl.kubectl(["--kubeconfig", path, "config", "set-context", SHOP, "--namespace="], echo=False)

    def check(self) -> Iterator[Check]:
        path = self.workdir / FILE
        yield _lists(self, path)
        yield _acts_as_shop(path)

    def solve(self) -> None:
        path = str(self.workdir / FILE)
        kubectl.kubectl(["--kubeconfig", path, "config", "use-context", SHOP], echo=False)
        kubectl.kubectl(["--kubeconfig", path, "config", "set-context", "--current", f"--namespace={NAMESPACE}"],
                        echo=False)


def _account(name: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}


def _contexts(lab: Lab) -> list[dict]:
    """The file's three contexts: the shop's, a staging cluster that is gone, and the audit tool's."""
    def token(account: str) -> str:
        return rbac.service_account_token(lab.api, NAMESPACE, account, expiration_seconds=TOKEN_SECONDS)

    shop_token = token(SHOP_USER)
    return [
        rbac.token_config(lab.api, shop_token, user=SHOP_USER, cluster="prod", context=SHOP, namespace=NAMESPACE),
        kubeconfig.config(server=STAGING_SERVER, cluster=STAGING, user=SHOP_USER, token=shop_token,
                          context=STAGING, namespace=NAMESPACE, insecure=True),
        rbac.token_config(lab.api, token(AUDITOR), user=AUDITOR, cluster="prod", context=AUDIT,
                          namespace="default"),
    ]


def _kubectl(path: Path, *args: str) -> str:
    """What ``kubectl --kubeconfig PATH ARGS`` prints (output and errors), as a learner would see it,
    less client-go's log lines (``E1204 16:12:43.24 ...``: five retries of discovery say one thing)."""
    said = kubectl.kubectl(["--kubeconfig", str(path), *args], check=False, echo=False) or ""
    return "\n".join(line for line in said.splitlines() if not _KLOG.match(line))


_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d")


def _lists(lab: Lab, path: Path) -> Check:
    """A fresh Deployment made in lab-shop (as admin) shows up, with the shop's own, in what
    ``kubectl get deployments`` lists with the file alone, within a budget; deleted afterwards."""
    fresh = f"probe-{secrets.token_hex(3)}"
    w.apps(lab).create_namespaced_deployment(NAMESPACE, w.deployment(fresh, replicas=0))
    wanted = {f"deployment.apps/{name}" for name in (*APPS, fresh)}
    said = ""
    try:
        def listed() -> bool:
            nonlocal said
            said = _kubectl(path, "get", "deployments", "-o", "name")
            return wanted <= set(said.split())

        outcome = converges(listed, budget=BUDGET, interval=0.5)
        if outcome.ok:
            return Check(LISTS, True, f"{', '.join(sorted(wanted))} listed in {outcome.seconds:.1f} s")
        said = said.strip() or _kubectl(path, "get", "deployments").strip()  # -o name says nothing of none
        return Check(LISTS, False, f"Deployment {fresh} was just made in {NAMESPACE}; kubectl --kubeconfig {path} "
                                   f"get deployments says: {said or '(nothing)'}")
    finally:
        get_or_none(lambda: w.apps(lab).delete_namespaced_deployment(fresh, NAMESPACE))


def _acts_as_shop(path: Path) -> Check:
    """The API server authenticates the file's current context as shop-dev (``kubectl auth whoami``)."""
    said = _kubectl(path, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").strip()
    if said == SHOP_USER_NAME:
        return Check(AS_SHOP, True, f"authenticated as {SHOP_USER_NAME}")
    return Check(AS_SHOP, False, f"kubectl --kubeconfig {path} auth whoami: {said or '(nothing)'}; the shop's user "
                                 f"is {SHOP_USER_NAME}")
