"""The evidence ``operatorlab why`` weighs about one object, read from the cluster.

:func:`gather` reads, and :class:`Facts` holds, everything :mod:`~operatorlab.diagnose.why`
decides from, so that the decision is a pure function a test can feed:

- the object (``deletionTimestamp``, finalizers, kopf's annotations, status) through its
  served version, found by discovery as kubectl finds it (:mod:`~operatorlab.diagnose.resolve`);
- its CRD: versions, whether served, the schema of each;
- operators seen running for this cluster (:mod:`~operatorlab.diagnose.presence`);
- kopf's peering objects (``ClusterKopfPeering``, ``KopfPeering``);
- for an identity (``--as``), each verb kopf needs, asked with a SubjectAccessReview, and
  the ClusterRoles bound to it;
- its latest Events, by the object's uid in every namespace: kopf files a cluster-scoped
  object's Events in its own context's namespace (``kopf/_cogs/clients/events.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from operatorlab import paths
from operatorlab.diagnose import presence, resolve
from operatorlab.diagnose.kopfstate import Peering
from operatorlab.diagnose.presence import SeenOperator
from operatorlab.diagnose.rest import get_json, get_or_none

#: How many of the object's latest Events are read.
EVENTS_SHOWN = 5

# What kopf needs each verb for (see operators/tenant/deploy/clusterrole.yaml, which says why per rule).
_PURPOSES = {
    "list": "see every object at startup and after each watch ends",
    "watch": "hear of each change: without it no handler fires after startup",
    "patch": "add and remove its finalizer and keep its progress annotations",
    "patch status": "write status through the status subresource",
    "create events": "post Events (kopf.info, kopf.warn and its own on a handler's failure)",
}


@dataclass(frozen=True)
class AccessCheck:
    """One verb kopf needs, and whether the identity asked about has it."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str | None
    allowed: bool

    @property
    def name(self) -> str:
        """``tenants.hedronite.io`` (``events`` in the core group), as kubectl and RBAC write it."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def purpose(self) -> str:
        key = f"{self.verb} {self.subresource or self.resource}"
        return _PURPOSES.get(key, _PURPOSES.get(self.verb, ""))

    def describe(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        where = f" in namespace {self.namespace}" if self.namespace else " cluster-wide"
        return f"{self.verb} {self.name}{sub}{where}"

    def can_i(self, user: str) -> str:
        """The ``kubectl auth can-i`` command that asks the same question."""
        args = ["kubectl", "auth", "can-i", self.verb, self.name]
        if self.subresource:
            args.append(f"--subresource={self.subresource}")
        # -A asks about namespace "": the question for a cluster-scoped resource, or a cluster-wide
        # list/watch (without it kubectl asks in the context's namespace, and warns).
        args += ["-n", self.namespace] if self.namespace else ["--all-namespaces"]
        return " ".join([*args, "--as", user])


@dataclass(frozen=True)
class EventLine:
    """One Event about the object, as ``kubectl events`` shows it."""

    time: str
    type: str
    reason: str
    source: str
    message: str


@dataclass(frozen=True)
class Facts:
    """Everything :func:`diagnose` decides from, read by :func:`gather`."""

    target: resolve.Target
    resource: resolve.ApiResource | None
    crd: resolve.Crd | None
    namespace: str | None
    obj: dict[str, Any] | None
    now: datetime
    operator: str | None = None
    seen: tuple[SeenOperator, ...] = ()
    looked_for: tuple[str, ...] = ()
    peerings: tuple[Peering, ...] = ()
    user: str | None = None
    access: tuple[AccessCheck, ...] = ()
    roles: tuple[str, ...] = ()
    events: tuple[EventLine, ...] = ()
    crd_file: str | None = None
    #: The local cluster's name when it is not the default ``lab`` (for ``operatorlab operator run``).
    cluster_name: str | None = None

    @property
    def meta(self) -> dict[str, Any]:
        return (self.obj or {}).get("metadata") or {}

    @property
    def kind(self) -> str:
        return self.resource.kind if self.resource else self.target.resource

    @property
    def label(self) -> str:
        """``Tenant acme`` or ``Website shop/blog``."""
        name = f"{self.namespace}/{self.target.name}" if self.namespace else self.target.name
        return f"{self.kind} {name}"

    @property
    def kubectl_ref(self) -> str:
        """``tenants.hedronite.io acme`` (``-n NS`` added when namespaced): unambiguous for kubectl."""
        qualified = self.resource.qualified if self.resource else self.target.resource
        scope = f" -n {self.namespace}" if self.namespace else ""
        return f"{qualified} {self.target.name}{scope}"

    @property
    def operator_running(self) -> bool:
        """An operator that may handle this kind runs (another of our operators does not count)."""
        return any(s.running and s.handles is not False for s in self.seen)

    def start_operator(self) -> str:
        """The command that starts the operator of this kind."""
        if self.operator:
            named = f" --cluster-name {self.cluster_name}" if self.cluster_name else ""
            return f"operatorlab operator run {self.operator}{named}"
        return "kopf run --all-namespaces path/to/your_operator.py"


# --- reading the facts -----------------------------------------------------------------


def gather(api_client: Any, target_text: str, *, namespace: str | None = None, default_namespace: str = "default",
           as_user: str | None = None, cluster_name: str | None = None, now: datetime | None = None) -> Facts:
    """Read everything about ``KIND/NAME`` that :func:`diagnose` needs, from the cluster.

    Raises:
        ValueError: ``target_text`` is not ``KIND/NAME``.
        kubernetes.client.ApiException: the API server failed in a way no finding explains.
    """
    now = now or datetime.now(UTC)
    target = resolve.parse_target(target_text)
    served = resolve.discover(api_client, group=target.group)
    crds = resolve.crds(api_client)
    resource = resolve.find(target, served)
    crd = next((c for c in crds if c.names_match(target)), None)
    if resource is None and crd is not None:
        # The version asked about is not served: look at the object through one that is.
        resource = resolve.find(resolve.Target(crd.plural, None, crd.group, target.name), served)
    if resource is not None and resource.group:
        crd = next((c for c in crds if c.name == resource.qualified), None)
    if resource is None:
        return Facts(target=target, resource=None, crd=crd, namespace=None, obj=None, now=now,
                     crd_file=_crd_file(target), cluster_name=cluster_name)
    ns = (namespace or default_namespace) if resource.namespaced else None
    obj = get_or_none(api_client, resource.path(target.name, ns))
    operator = presence.operator_for(resource.group, resource.plural) if resource.group else None
    seen = [s.for_kind(resource.plural, resource.kind, operator)
            for s in presence.kopf_processes(str(api_client.configuration.host))]
    looked_for = [f"`kopf run` processes on this machine talking to {api_client.configuration.host}"]
    if operator:
        namespace_, deployment = presence.deployment_of(operator)
        looked_for.append(f"Deployment {namespace_}/{deployment}")
        if (found := presence.deployed(api_client, operator)) is not None:
            seen.append(found)
    access: list[AccessCheck] = []
    roles: list[str] = []
    if as_user:
        access = _access(api_client, as_user, resource, crd, ns)
        roles = _cluster_roles_of(api_client, as_user)
    return Facts(target=target, resource=resource, crd=crd, namespace=ns, obj=obj, now=now, operator=operator,
                 seen=tuple(seen), looked_for=tuple(looked_for), peerings=tuple(_peerings(api_client)),
                 user=as_user, access=tuple(access), roles=tuple(roles),
                 events=tuple(_events(api_client, obj, resource, target.name, ns)), cluster_name=cluster_name)


def _crd_file(target: resolve.Target) -> str | None:
    """``crds/<file>`` defining the kind asked about, for a cluster that lacks it."""
    import yaml

    for path in sorted(paths.crds_dir().glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                crd = resolve.Crd.from_object(doc)
                if crd.names_match(target):
                    return str(path.relative_to(paths.repo_root()))
    return None


def _peerings(api_client: Any) -> list[Peering]:
    found = []
    for path in ("/apis/kopf.dev/v1/clusterkopfpeerings", "/apis/kopf.dev/v1/kopfpeerings"):
        listed = get_or_none(api_client, path)
        for item in (listed or {}).get("items") or []:
            item.setdefault("kind", "ClusterKopfPeering" if "cluster" in path else "KopfPeering")
            found.append(Peering.from_object(item))
    return found


def service_account(user: str) -> tuple[str, str] | None:
    """``system:serviceaccount:NS:NAME`` -> (NS, NAME)."""
    parts = user.split(":")
    return (parts[2], parts[3]) if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] else None


def _access(api_client: Any, user: str, resource: resolve.ApiResource, crd: resolve.Crd | None,
            namespace: str | None) -> list[AccessCheck]:
    """The verbs kopf needs on ``resource``, each asked with a SubjectAccessReview for ``user``.

    A ServiceAccount's groups are added as the API server adds them to its token (and to
    ``kubectl --as``): ``system:serviceaccounts``, ``system:serviceaccounts:<ns>``.
    """
    from kubernetes import client

    sa = service_account(user)
    groups = ["system:authenticated"] + (["system:serviceaccounts", f"system:serviceaccounts:{sa[0]}"] if sa else [])
    # kopf posts a cluster-scoped object's Events in its context's namespace: a Pod's own.
    events_namespace = namespace or (sa[0] if sa else "default")
    wanted = [("list", resource.group, resource.plural, "", namespace),
              ("watch", resource.group, resource.plural, "", namespace),
              ("patch", resource.group, resource.plural, "", namespace)]
    if "status" in resource.subresources:
        wanted.append(("patch", resource.group, resource.plural, "status", namespace))
    wanted.append(("create", "", "events", "", events_namespace))
    api = client.AuthorizationV1Api(api_client)
    checks = []
    for verb, group, plural, sub, ns in wanted:
        review = api.create_subject_access_review(client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=user, groups=groups, resource_attributes=client.V1ResourceAttributes(
                verb=verb, group=group, resource=plural, subresource=sub or None, namespace=ns))))
        checks.append(AccessCheck(verb=verb, group=group, resource=plural, subresource=sub, namespace=ns,
                                  allowed=bool(review.status and review.status.allowed)))
    return checks


def _cluster_roles_of(api_client: Any, user: str) -> list[str]:
    """ClusterRoles bound to ``user`` by a ClusterRoleBinding (where a missing verb is best added)."""
    sa = service_account(user)
    listed = get_or_none(api_client, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings") or {}
    roles = []
    for binding in listed.get("items") or []:
        for subject in binding.get("subjects") or []:
            is_sa = sa and subject.get("kind") == "ServiceAccount" and (
                subject.get("namespace"), subject.get("name")) == sa
            is_user = subject.get("kind") == "User" and subject.get("name") == user
            if (is_sa or is_user) and binding["roleRef"]["kind"] == "ClusterRole":
                roles.append(binding["roleRef"]["name"])
    return sorted(set(roles))


def _events(api_client: Any, obj: dict[str, Any] | None, resource: resolve.ApiResource, name: str,
            namespace: str | None) -> list[EventLine]:
    """The object's latest Events, oldest first: by uid in every namespace (kopf files a
    cluster-scoped object's Events in its own context's namespace), else by kind and name."""
    from kubernetes import client

    uid = ((obj or {}).get("metadata") or {}).get("uid")
    selector = f"involvedObject.uid={uid}" if uid else f"involvedObject.kind={resource.kind},involvedObject.name={name}"
    try:
        listed = get_json(api_client, "/api/v1/events", query={"fieldSelector": selector})
    except client.ApiException as e:
        if e.status != 403:
            raise
        listed = get_or_none(api_client, f"/api/v1/namespaces/{namespace or 'default'}/events",
                             query={"fieldSelector": selector}) or {}

    def when(event: dict[str, Any]) -> str:
        return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
                   or (event.get("metadata") or {}).get("creationTimestamp") or "")

    items = sorted(listed.get("items") or [], key=when)[-EVENTS_SHOWN:]
    return [EventLine(time=when(e), type=str(e.get("type") or ""), reason=str(e.get("reason") or ""),
                      source=str((e.get("source") or {}).get("component") or e.get("reportingComponent") or ""),
                      message=str(e.get("message") or "")) for e in items]
