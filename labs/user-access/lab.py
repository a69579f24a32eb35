"""user-access: a new developer's access, half made: her certificate never issued, her binding and role wrong.

Kubernetes has no user objects: a user is whoever a credential the API server trusts names. A
client certificate names one by its subject (CN the user, each O a group), and the certificates
API issues one from a request once someone approves it. What that user may do is RBAC's: a Role
and a RoleBinding naming the user, by exact name, in one namespace.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import urllib3
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID
from kubernetes import client, config

from operatorlab import rbac
from operatorlab.cluster import kubeconfig, pki
from operatorlab.grading import converges
from operatorlab.labs import Check, Lab
from operatorlab.labs import least_privilege as lp
from operatorlab.labs import workloads as w
from operatorlab.labs.checks import get_or_none

NAMESPACE, USER = "lab-dev", "jane"
ROLE = "developer"
WRONG_USER = "Jane"  # RBAC compares user names exactly
VERBS = ["get", "list", "watch", "create"]
RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": VERBS},
         {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": VERBS}]
# The onboarding script's Role: Deployments looked up in the core group, where there are none.
WRONG_RULES = [{"apiGroups": [""], "resources": ["pods", "deployments"], "verbs": VERBS}]
SECRET = "db-credentials"
KUBECONFIG, KEY, CERT = f"{USER}.kubeconfig", f"{USER}.key", f"{USER}.crt"
SHOWN = f"labs/user-access/{KUBECONFIG}"  # where a learner finds it, from the checkout
IDENTITY = f"{USER}'s kubeconfig authenticates as {USER}, with a client certificate issued for her"
WORKS = f"as {USER}, with her kubeconfig: a fresh Deployment and a fresh Pod created in {NAMESPACE}, and listed"
NOTHING_MORE = f"{USER} may create and list Deployments and Pods in {NAMESPACE}, and nothing more"

GROUPS_OF_EVERYONE = {"system:authenticated"}


class UserAccess(Lab):
    title = "A new developer locked out"
    summary = (f"{USER}'s kubeconfig at {SHOWN} is refused, and {USER} cannot list Pods in {NAMESPACE}: give "
               f"{USER} access, with that kubeconfig, to create and list Deployments and Pods in {NAMESPACE}, "
               f"and nothing more")
    drill = True
    xdist_group = "drill-user-access"  # its bypass tests run the same lab: not at the same time
    settle = 0.0  # each check run acts as jane itself: RBAC answers at once
    hints = (
        f"kubectl --kubeconfig {SHOWN} get pods: what does kubectl say it cannot do? Then kubectl get csr: how "
        f"was {USER}'s certificate asked for, and what became of the request?",
        f"A CertificateSigningRequest gets a certificate only once approved (kubectl certificate approve); the "
        f"signer then writes it into .status.certificate, base64 encoded, for the file the kubeconfig names. Once "
        f"{USER} is authenticated, kubectl auth can-i --list --as={USER} -n {NAMESPACE} says what RBAC grants her: "
        f"compare the RoleBinding's subjects and the Role's rules (kubectl describe rolebinding,role -n "
        f"{NAMESPACE}) with what she is, and with the API group Deployments are served from (kubectl api-resources).",
        f"kubectl certificate approve {USER}; kubectl get csr {USER} -o jsonpath='{{.status.certificate}}' | "
        f"base64 -d > labs/user-access/{CERT}; the RoleBinding must name User {USER} (not {WRONG_USER}); the Role "
        f"must grant deployments in the apps group. Binding cluster-admin, admin or edit, or a Role of '*', gives "
        f"her more than asked. labs/user-access/SOLUTION.md explains.",
    )

    def setup(self) -> None:
        w.create_namespace(self, NAMESPACE)
        self.core.create_namespaced_secret(NAMESPACE, {"metadata": {"name": SECRET},
                                                       "stringData": {"password": secrets.token_hex(8)}})
        self.track("rbac.authorization.k8s.io/v1", "Role", ROLE, NAMESPACE)
        _rbac_api(self).create_namespaced_role(NAMESPACE, {"metadata": {"name": ROLE}, "rules": RULES})
        self.track("rbac.authorization.k8s.io/v1", "RoleBinding", ROLE, NAMESPACE)
        _rbac_api(self).create_namespaced_role_binding(NAMESPACE, {
            "metadata": {"name": ROLE}, "subjects": [_user(USER)],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE}})
        for name in (KEY, CERT, KUBECONFIG):
            self.remember_file(self.workdir / name)
        _request(self)
        rbac.approve_certificate(self.api, USER)
        _save_certificate(self)
        kubeconfig.write(self.workdir / KUBECONFIG, **rbac.server_fields(self.api), cluster="operatorlab",
                         context=USER, user=USER, cert=self.workdir / CERT, key=self.workdir / KEY,
                         namespace=NAMESPACE)

    def inject(self) -> None:
        # The onboarding as it was really done: her request filed and never approved, so no
        # certificate for the file her kubeconfig names; the binding's subject typed by hand;
        # the Role written from memory.
        client.CertificatesV1Api(self.api).delete_certificate_signing_request(USER)
        (self.workdir / CERT).unlink(missing_ok=True)
        _request(self)
        _rbac_api(self).patch_namespaced_role_binding(ROLE, NAMESPACE, {"subjects": [_user(WRONG_USER)]})
        _rbac_api(self).patch_namespaced_role(ROLE, NAMESPACE, {"rules": WRONG_RULES})

    def check(self) -> Iterator[Check]:
        path = self.workdir / KUBECONFIG
        identity = _identity(self, path)
        yield identity
        yield _works(self, path)
        yield _nothing_more(self, path if identity.passed else None)

    def solve(self) -> None:
        rbac.approve_certificate(self.api, USER)
        _save_certificate(self)
        _rbac_api(self).patch_namespaced_role_binding(ROLE, NAMESPACE, {"subjects": [_user(USER)]})
        _rbac_api(self).patch_namespaced_role(ROLE, NAMESPACE, {"rules": RULES})


def _rbac_api(lab: Lab) -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(lab.api)


def _user(name: str) -> dict[str, str]:
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def _request(lab: Lab) -> None:
    """File CertificateSigningRequest ``jane`` for a client certificate of her key (made once)."""
    lab.track("certificates.k8s.io/v1", "CertificateSigningRequest", USER)
    rbac.request_certificate(lab.api, USER, pki.user_request(lab.workdir / KEY, USER))


def _save_certificate(lab: Lab) -> None:
    """Write the certificate the signer issued for her request where her kubeconfig looks for it."""
    cert = lab.workdir / CERT
    cert.write_bytes(rbac.issued_certificate(lab.api, USER))
    cert.chmod(0o600)


# -- the checks ------------------------------------------------------------------------------------


def _identity(lab: Lab, path: Path) -> Check:
    """The kubeconfig's current user presents a client certificate for CN=jane and no group, the
    one her CertificateSigningRequest was issued (while the request is kept: the controller-manager's
    CSR cleaner deletes an issued one after an hour), and the API server authenticates it as jane."""
    try:
        entry, cert = _client_certificate(path)
    except ValueError as e:
        return Check(IDENTITY, False, str(e))
    cn = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    groups = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if cn != [USER] or groups:
        return Check(IDENTITY, False, f"{path}: user entry {entry!r} presents a client certificate for "
                                      f"{cert.subject.rfc4514_string()} (issued by {cert.issuer.rfc4514_string()}): "
                                      f"CN is the user, each O a group")
    csr = get_or_none(lambda: client.CertificatesV1Api(lab.api).read_certificate_signing_request(USER))
    if csr is not None:
        issued = base64.b64decode(csr.status.certificate) if csr.status.certificate else None
        if issued is None or x509.load_pem_x509_certificate(issued) != cert:
            what = "was issued no certificate" if issued is None else "was issued another certificate"
            return Check(IDENTITY, False, f"{path}: user entry {entry!r} presents a certificate for CN={USER} "
                                          f"(serial {cert.serial_number:x}), and CertificateSigningRequest {USER} "
                                          f"{what} (kubectl get csr {USER})")
    try:
        review: Any = client.AuthenticationV1Api(_client(path)).create_self_subject_review({})
    except (client.ApiException, config.ConfigException, urllib3.exceptions.HTTPError, OSError) as e:
        return Check(IDENTITY, False, f"kubectl --kubeconfig {path} auth whoami fails: {_said(e)}")
    info = review.status.user_info
    if info.username != USER or set(info.groups or []) - GROUPS_OF_EVERYONE:
        return Check(IDENTITY, False, f"the API server authenticates {path} as {info.username} in groups "
                                      f"{info.groups} (kubectl --kubeconfig {path} auth whoami)")
    return Check(IDENTITY, True, f"authenticated as {USER} by a certificate valid until "
                                 f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC")


def _client_certificate(path: Path) -> tuple[str, x509.Certificate]:
    """The current context's user entry name and its client certificate, or ValueError saying what is missing."""
    try:
        conf = yaml.safe_load(path.read_text())
        context = next(c["context"] for c in conf["contexts"] if c["name"] == conf["current-context"])
        name = context["user"]
        user = next(u.get("user") or {} for u in conf["users"] if u["name"] == name)
    except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration) as e:
        raise ValueError(f"{path}: no current context with a user entry (kubectl config view --kubeconfig "
                         f"{path}): {e!r}") from e
    others = sorted({"token", "tokenFile", "exec", "auth-provider", "username"} & set(user))
    if others:
        raise ValueError(f"{path}: user entry {name!r} authenticates with {', '.join(others)}, not a client "
                         f"certificate")
    if data := user.get("client-certificate-data"):
        pem = base64.b64decode(data)
    elif file := user.get("client-certificate"):
        cert_path = path.parent / file  # a relative path is relative to the kubeconfig, as kubectl reads it
        if not cert_path.is_file():
            raise ValueError(f"{path}: user entry {name!r} names client-certificate {cert_path}, which does not "
                             f"exist")
        pem = cert_path.read_bytes()
    else:
        raise ValueError(f"{path}: user entry {name!r} has no client-certificate or client-certificate-data")
    try:
        return name, x509.load_pem_x509_certificate(pem)
    except ValueError as e:
        raise ValueError(f"{path}: user entry {name!r}'s client certificate is no PEM certificate ({e})") from e


def _client(path: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(path))


def _said(e: BaseException) -> str:
    """An API refusal as kubectl prints it (status, reason, the server's message); anything else as it is."""
    if isinstance(e, client.ApiException):
        try:
            message = yaml.safe_load(e.body or "{}").get("message", "")
        except (yaml.YAMLError, AttributeError):
            message = e.body or ""
        return f"{e.status} {e.reason}: {message}"
    return f"{type(e).__name__}: {e}"


def _works(lab: Lab, path: Path) -> Check:
    """As the kubeconfig's user: a fresh Deployment and a fresh Pod created in lab-dev, and both (the
    Deployment's Pod, made by its ReplicaSet) listed within the budget; deleted afterwards as admin."""
    name = f"probe-{secrets.token_hex(3)}"
    try:
        as_jane = _client(path)
    except (config.ConfigException, OSError, ValueError) as e:
        return Check(WORKS, False, f"kubectl --kubeconfig {path} cannot even connect: {_said(e)}")
    made: list[str] = []
    try:
        try:
            client.AppsV1Api(as_jane).create_namespaced_deployment(NAMESPACE, w.deployment(name, replicas=1))
            made.append("deployment")
            pod: Any = {"metadata": {"name": f"{name}-solo", "labels": {w.PROBE_LABEL: name}},
                        "spec": {"containers": [{"name": "pause", "image": w.IMAGE}],
                                 "terminationGracePeriodSeconds": 0}}
            client.CoreV1Api(as_jane).create_namespaced_pod(NAMESPACE, pod)
            made.append("pod")
        except (client.ApiException, urllib3.exceptions.HTTPError) as e:
            what = "Pod" if made else "Deployment"
            return Check(WORKS, False, f"as {path}'s user, creating {what} {NAMESPACE}/{name} was refused: {_said(e)}")

        def listed() -> bool:
            pods = client.CoreV1Api(as_jane).list_namespaced_pod(NAMESPACE).items
            names = {p.metadata.name for p in pods}
            deployments = client.AppsV1Api(as_jane).list_namespaced_deployment(NAMESPACE).items
            return (f"{name}-solo" in names and any((p.metadata.labels or {}).get("app") == name for p in pods)
                    and name in {d.metadata.name for d in deployments})

        outcome = converges(listed, budget=w.BUDGET, interval=0.3)
        if outcome.ok:
            return Check(WORKS, True, f"Deployment {name}, its Pod and Pod {name}-solo listed in "
                                      f"{outcome.seconds:.1f} s (budget {w.BUDGET:g} s)")
        last = _said(outcome.last) if isinstance(outcome.last, BaseException) else "not all listed"
        return Check(WORKS, False, f"as {path}'s user, {w.BUDGET:g} s after creating Deployment {name} and Pod "
                                   f"{name}-solo in {NAMESPACE}, listing Deployments and Pods there: {last}")
    finally:
        if "deployment" in made:
            get_or_none(lambda: w.apps(lab).delete_namespaced_deployment(name, NAMESPACE,
                                                                         propagation_policy="Background"))
        if "pod" in made:
            get_or_none(lambda: lab.core.delete_namespaced_pod(f"{name}-solo", NAMESPACE, grace_period_seconds=0))


def _nothing_more(lab: Lab, path: Path | None) -> Check:
    """Nothing beyond the Role's rules, in any namespace: asked as jane (impersonated, as
    ``kubectl auth can-i --list --as=jane`` asks), then tried with her own certificate (``path``,
    None when it is not hers): her namespace's Secrets and another namespace's Pods are refused."""
    found = lp.excess_of(lp.impersonating(lab.api, USER), lp.namespaces(lab.api), RULES)
    if found:
        everywhere = set.intersection(*(set(v) for v in found.values()))
        sample = sorted(everywhere) if everywhere else next(iter(found.values()))
        where = ("in every namespace" if len(found) > 1 and everywhere
                 else f"in namespace(s) {', '.join(sorted(found))}")
        shown = ", ".join(sample[:6]) + (f" and {len(sample) - 6} more" if len(sample) > 6 else "")
        return Check(NOTHING_MORE, False, f"{USER} may {shown} {where}: kubectl auth can-i --list --as={USER} -n "
                                          f"{NAMESPACE}; which bindings name her: kubectl get "
                                          f"clusterrolebindings,rolebindings -A -o wide | grep -i {USER}")
    if path is not None:
        as_jane = client.CoreV1Api(_client(path))
        for what, call in ((f"list Secrets in {NAMESPACE}", lambda: as_jane.list_namespaced_secret(NAMESPACE)),
                           ("list Pods in default", lambda: as_jane.list_namespaced_pod("default"))):
            try:
                call()
            except client.ApiException as e:
                if e.status == 403:
                    continue
                return Check(NOTHING_MORE, False, f"with {path}, {what}: {_said(e)}")
            return Check(NOTHING_MORE, False, f"with {path}, {USER} may {what}")
    return Check(NOTHING_MORE, True, f"every rule granted to {USER} is in Role {NAMESPACE}/{ROLE} as asked"
                                     + (f"; with {path}, Secrets in {NAMESPACE} and Pods in default refused"
                                        if path is not None else ""))
