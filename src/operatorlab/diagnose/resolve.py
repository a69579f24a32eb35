"""``KIND/NAME`` to an API resource, as kubectl resolves it: through the API server's discovery.

``why`` accepts what ``kubectl get`` accepts: a kind, plural, singular or short name
(``Tenant``, ``tenants``, ``tenant``, ``tn``), optionally with a group
(``tenants.hedronite.io``) or a version and a group (``tenants.v1.hedronite.io``).
Discovery lists only *served* versions, so a version a CRD no longer serves does not
resolve: :func:`crd_versions` then says what the CRD has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from operatorlab.diagnose.rest import get_json

_VERSION = re.compile(r"^v[0-9]+((alpha|beta)[0-9]+)?$")


@dataclass(frozen=True)
class Target:
    """What the user asked about: ``resource[.version][.group]/name``."""

    resource: str
    version: str | None
    group: str | None
    name: str

    @property
    def text(self) -> str:
        return ".".join(p for p in (self.resource, self.version, self.group) if p) + f"/{self.name}"


@dataclass(frozen=True)
class ApiResource:
    """One served resource of one group version, from discovery."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``tenants.hedronite.io``: the name kubectl and RBAC use (``namespaces`` for the core group)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, name: str | None = None, namespace: str | None = None) -> str:
        """The REST path of the collection, or of one object."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        where = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{base}{where}/{self.plural}" + (f"/{name}" if name else "")


def parse_target(text: str) -> Target:
    """``"tenants.v1.hedronite.io/acme"`` -> Target(resource, version, group, name).

    Raises:
        ValueError: not ``KIND/NAME``.
    """
    kind, sep, name = text.partition("/")
    if not sep or not kind or not name or "/" in name:
        raise ValueError(f"expected KIND/NAME (e.g. tenant/acme or tenants.hedronite.io/acme), got {text!r}")
    resource, _, rest = kind.partition(".")
    version: str | None = None
    group: str | None = rest or None
    if rest:
        first, _, remainder = rest.partition(".")
        if _VERSION.match(first) and remainder:
            version, group = first, remainder
    return Target(resource=resource, version=version, group=group, name=name)


def matches(target: Target, resource: ApiResource) -> bool:
    """Whether ``resource`` is what ``target`` names (kind, plural, singular or short name; group; version)."""
    token = target.resource.lower()
    names = {resource.plural, resource.singular, resource.kind.lower(), *resource.short_names}
    return (token in names and (target.group is None or target.group == resource.group)
            and (target.version is None or target.version == resource.version))


def find(target: Target, resources: Sequence[ApiResource]) -> ApiResource | None:
    """The first matching resource, in discovery order (the core group and preferred versions first)."""
    return next((r for r in resources if matches(target, r)), None)


def discover(api_client: Any, group: str | None = None) -> list[ApiResource]:
    """Every served resource (of ``group`` only, if given): the core group, then each group's
    versions with the preferred one first. A group version that fails to answer (an
    aggregated API that is down) is skipped, as kubectl does with a warning."""
    from kubernetes import client

    versions: list[tuple[str, str]] = []
    if not group:
        versions.append(("", "v1"))
    for g in get_json(api_client, "/apis").get("groups") or []:
        if group is not None and g.get("name") != group:
            continue
        preferred = (g.get("preferredVersion") or {}).get("version")
        ordered = sorted((v.get("version") for v in g.get("versions") or []), key=lambda v: v != preferred)
        versions.extend((g["name"], v) for v in ordered)
    found: list[ApiResource] = []
    for g, v in versions:
        try:
            listed = get_json(api_client, f"/apis/{g}/{v}" if g else f"/api/{v}")
        except client.ApiException:
            continue
        found.extend(_resources(g, v, listed.get("resources") or []))
    return found


def _resources(group: str, version: str, listed: Iterable[dict[str, Any]]) -> list[ApiResource]:
    listed = list(listed)
    subresources: dict[str, list[str]] = {}
    for r in listed:
        if "/" in r["name"]:
            parent, sub = r["name"].split("/", 1)
            subresources.setdefault(parent, []).append(sub)
    return [ApiResource(group=group, version=version, plural=r["name"], singular=r.get("singularName") or "",
                        kind=r["kind"], namespaced=bool(r.get("namespaced")),
                        short_names=tuple(r.get("shortNames") or ()),
                        subresources=tuple(subresources.get(r["name"], ())))
            for r in listed if "/" not in r["name"]]


@dataclass(frozen=True)
class CrdVersion:
    """One version of a CRD: whether it is served, and its schema."""

    name: str
    served: bool
    storage: bool
    index: int
    schema: dict[str, Any]
    status_subresource: bool


@dataclass(frozen=True)
class Crd:
    """The parts of a CustomResourceDefinition ``why`` reads."""

    name: str
    group: str
    plural: str
    singular: str
    kind: str
    short_names: tuple[str, ...]
    namespaced: bool
    versions: tuple[CrdVersion, ...]

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Crd:
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        versions = tuple(
            CrdVersion(name=v["name"], served=bool(v.get("served")), storage=bool(v.get("storage")), index=i,
                       schema=((v.get("schema") or {}).get("openAPIV3Schema") or {}),
                       status_subresource="status" in (v.get("subresources") or {}))
            for i, v in enumerate(spec.get("versions") or []))
        return cls(name=obj["metadata"]["name"], group=spec.get("group", ""), plural=names.get("plural", ""),
                   singular=names.get("singular", ""), kind=names.get("kind", ""),
                   short_names=tuple(names.get("shortNames") or ()), namespaced=spec.get("scope") == "Namespaced",
                   versions=versions)

    def names_match(self, target: Target) -> bool:
        token = target.resource.lower()
        return (token in {self.plural, self.singular, self.kind.lower(), *self.short_names}
                and (target.group is None or target.group == self.group))

    def version(self, name: str) -> CrdVersion | None:
        return next((v for v in self.versions if v.name == name), None)

    def served(self) -> list[CrdVersion]:
        return [v for v in self.versions if v.served]


def crds(api_client: Any) -> list[Crd]:
    """Every CRD of the cluster (empty if this identity may not list them)."""
    from kubernetes import client

    try:
        listed = get_json(api_client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    except client.ApiException:
        return []
    return [Crd.from_object(item) for item in listed.get("items") or []]


def status_pruning(schema: dict[str, Any]) -> str | None:
    """What the structural schema prunes from ``status``, in words; None if it keeps everything.

    The API server drops every field a structural schema does not declare, unless
    ``x-kubernetes-preserve-unknown-fields: true`` sits on it or above it.
    """
    if not schema or schema.get("x-kubernetes-preserve-unknown-fields"):
        return None
    status = (schema.get("properties") or {}).get("status")
    if status is None:
        return "the schema declares no status: everything written to status is dropped"
    if status.get("x-kubernetes-preserve-unknown-fields"):
        return None
    declared = sorted(status.get("properties") or {})
    return (f"status declares only {', '.join(declared) or 'nothing'} and no x-kubernetes-preserve-unknown-fields: "
            "any other status field is dropped")
