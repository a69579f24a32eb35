"""Least privilege, graded through the API: what a ServiceAccount may do beyond what it needs.

A permission lab cannot be graded by "does the operator work now?" alone: binding its
ServiceAccount to ``cluster-admin``, or a ClusterRole of ``*`` verbs on ``*``, makes it
work too. So the check asks the API server itself what the account may do, as the
account: a ``SelfSubjectRulesReview`` (what ``kubectl auth can-i --list --as=...``
shows) in every namespace, which the RBAC authorizer answers from every binding that
applies to the account, its groups included (Kubernetes v1.36.3:
``plugin/pkg/auth/authorizer/rbac/rbac.go`` ``RBACAuthorizer.RulesFor``, through
``pkg/registry/rbac/validation/rule.go`` ``VisitRulesFor``). Every granted rule must be covered by the
reference rules; the few rules every authenticated user holds (``system:basic-user``:
create its own access and rules reviews; ``system:discovery``: GET on discovery paths)
are allowed as well.

:func:`beyond` is the pure comparison (unit-tested); :func:`excess_of` runs the reviews as any
identity (a user's client certificate), :func:`excess_permissions` as a ServiceAccount;
:func:`least_privilege` is the lab check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from operatorlab import rbac
from operatorlab.grading import Check

#: Rules the default ClusterRole ``system:basic-user`` grants every authenticated user.
EVERYONES_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
     "verbs": ["create"]},
    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
)


@dataclass(frozen=True)
class Permission:
    """One verb on one resource of one API group (``*`` where a rule says so)."""

    verb: str
    group: str
    resource: str

    def __str__(self) -> str:
        group = self.group or "core"
        return f"{self.verb} {self.resource} ({group} group)"


def _field(rule: Mapping[str, Any] | Any, camel: str, snake: str) -> list[str]:
    """A rule's list field, whether the rule is a manifest (camelCase) or a client model (snake_case)."""
    value = rule.get(camel) if isinstance(rule, Mapping) else getattr(rule, snake, None)
    return list(value or [])


def permissions(rule: Mapping[str, Any] | Any) -> set[Permission]:
    """Every (verb, group, resource) a resource rule names; wildcards stay ``*``."""
    return {Permission(v, g, r) for g in _field(rule, "apiGroups", "api_groups")
            for r in _field(rule, "resources", "resources") for v in _field(rule, "verbs", "verbs")}


def _covered(wanted: Permission, allowed: Iterable[Permission]) -> bool:
    """Whether ``allowed`` grants ``wanted`` (a ``*`` in ``allowed`` covers anything; in ``wanted`` only ``*``)."""
    return any(a.verb in ("*", wanted.verb) and a.group in ("*", wanted.group) and a.resource in ("*", wanted.resource)
               for a in allowed)


def beyond(granted: Iterable[Mapping[str, Any] | Any], reference: Iterable[Mapping[str, Any]]) -> list[Permission]:
    """The permissions of ``granted`` resource rules that ``reference`` (plus everyone's) does not grant.

    A rule limited by ``resourceNames`` counts as the whole resource: narrower than the
    reference is fine, and the reference rules here name no resources.
    """
    allowed = {p for rule in (*reference, *EVERYONES_RULES) for p in permissions(rule)}
    extra = {p for rule in granted for p in permissions(rule) if not _covered(p, allowed)}
    return sorted(extra, key=lambda p: (p.group, p.resource, p.verb))


def non_resource_beyond(granted: Iterable[Any]) -> list[str]:
    """Non-resource rules beyond discovery's GETs: any other verb, or the URL ``*``."""
    extra = []
    for rule in granted:
        urls, verbs = _field(rule, "nonResourceURLs", "non_resource_ur_ls"), _field(rule, "verbs", "verbs")
        if "*" in urls or any(v != "get" for v in verbs):
            extra.append(f"{','.join(verbs)} on {','.join(urls)}")
    return extra


def account_client(api: client.ApiClient, namespace: str, name: str) -> client.ApiClient:
    """An API client acting as ServiceAccount ``namespace/name`` (a fresh token, nothing written to disk)."""
    token = rbac.service_account_token(api, namespace, name, expiration_seconds=600)
    conf = client.Configuration()
    source = api.configuration
    conf.host, conf.ssl_ca_cert, conf.verify_ssl = source.host, source.ssl_ca_cert, source.verify_ssl
    conf.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(conf)


def impersonating(api: client.ApiClient, user: str) -> client.ApiClient:
    """An API client that asks as ``user`` (the ``Impersonate-User`` header, what ``kubectl --as``
    sends), on ``api``'s connection and credentials, which must be allowed to impersonate (an admin's)."""
    impersonated = client.ApiClient(api.configuration)
    impersonated.set_default_header("Impersonate-User", user)
    return impersonated


def excess_permissions(api: client.ApiClient, namespace: str, name: str,
                       reference: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """What ServiceAccount ``namespace/name`` may do beyond ``reference``, per namespace it applies in.

    Asked as the account itself (:func:`excess_of`). ``{}``: nothing beyond.
    """
    return excess_of(account_client(api, namespace, name), namespaces(api), reference)


def namespaces(api: client.ApiClient) -> list[str]:
    """Every namespace's name (listed with ``api``, an admin's client)."""
    listed: list[Any] = client.CoreV1Api(api).list_namespace().items
    return [str(n.metadata.name) for n in listed]


def excess_of(identity: client.ApiClient, in_namespaces: Sequence[str],
              reference: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """What the identity ``identity`` authenticates as may do beyond ``reference``, per namespace.

    Asked as the identity itself, once per namespace of ``in_namespaces`` (a RoleBinding
    grants in its own namespace only; a ClusterRoleBinding shows in every one). ``{}``:
    nothing beyond.
    """
    reviews: Any = client.AuthorizationV1Api(identity)  # takes the review as a dict
    found: dict[str, list[str]] = {}
    for ns in in_namespaces:
        status = reviews.create_self_subject_rules_review({"spec": {"namespace": ns}}).status
        extra = [str(p) for p in beyond(status.resource_rules or [], reference)]
        extra += non_resource_beyond(status.non_resource_rules or [])
        if extra:
            found[ns] = extra
    return found


def least_privilege(api: client.ApiClient, namespace: str, name: str, reference: Sequence[Mapping[str, Any]],
                    *, role: str) -> Check:
    """The account holds nothing beyond ``reference`` (the operator's ClusterRole as shipped, ``role`` names it)."""
    label = f"ServiceAccount {namespace}/{name} may do no more than the operator needs"
    who = f"system:serviceaccount:{namespace}:{name}"
    found = excess_permissions(api, namespace, name, reference)
    if not found:
        return Check(label, True, f"every rule granted to {who} is in the operator's {role} as shipped")
    everywhere = set.intersection(*(set(v) for v in found.values()))
    where = "in every namespace" if len(found) > 1 and everywhere else f"in namespace(s) {', '.join(sorted(found))}"
    sample = sorted(everywhere) if everywhere else next(iter(found.values()))
    shown = ", ".join(sample[:6]) + (f" and {len(sample) - 6} more" if len(sample) > 6 else "")
    return Check(label, False, f"{who} may {shown} {where}, which the operator never does: "
                               f"kubectl auth can-i --list --as={who}; which bindings name it: "
                               f"kubectl get clusterrolebindings,rolebindings -A -o wide | grep {name}")
