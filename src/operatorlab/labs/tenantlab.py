"""Base classes for the labs around the Tenant operator (``operators/tenant``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from operatorlab import rbac, tenants
from operatorlab.cluster import manifests
from operatorlab.faults import variants
from operatorlab.labs import checks
from operatorlab.labs.base import Lab
from operatorlab.operators import OperatorProcess, operator_path
from operatorlab.wait import eventually

TENANT_API_VERSION = f"{tenants.GROUP}/{tenants.VERSION}"
#: Where the operators' ServiceAccounts live (their kustomization's namespace).
SYSTEM_NAMESPACE = "operatorlab-system"


def operator_role(name: str) -> dict:
    """The Tenant operator's ClusterRole as shipped (``operators/tenant/deploy/``), named ``name``."""
    return next(o for o in rbac.operator_rbac("tenant", name=name) if o["kind"] == "ClusterRole")


class TenantLab(Lab):
    """A lab that runs the Tenant operator: Tenants it makes (and their namespaces) are removed on reset."""

    xdist_group: ClassVar[str | None] = "tenant-operator"

    def create_tenant(self, name: str, cpu: str = "1", *, wait: bool = True) -> None:
        """Create (and track) a Tenant; with ``wait``, until the operator reconciled it."""
        self.track(TENANT_API_VERSION, "Tenant", name)
        self.track("v1", "Namespace", tenants.namespace_of(name))  # the operator's; its cleanup is skipped on reset
        self.tenants.create(name, cpu, f"lab {self.id}")
        if wait:
            self.wait_reconciled(name)

    def made_tenant(self, name: str) -> bool:
        """Whether this run of the lab created Tenant ``name`` (e.g. inject did)."""
        return self.tracks("Tenant", name)

    def wait_reconciled(self, name: str, timeout: float = 30.0) -> None:
        eventually(lambda: checks.tenant_reconciled(self.api, name).passed and self.tenants.phase(name) == "Ready",
                   timeout=timeout, message=f"lab {self.id}: Tenant {name} reconciled")

    def start_operator(self, role: str = "operator", *, kubeconfig: Path | None = None) -> OperatorProcess:
        """Run ``operators/tenant/tenant_operator.py`` as ``role``."""
        return self.run_operator(operator_path("tenant"), role, kubeconfig=kubeconfig)

    def start_operator_as_account(self, account: str) -> OperatorProcess:
        """Run the Tenant operator as ServiceAccount ``operatorlab-system/<account>``, with a token, as in a Pod.

        Its RBAC is a private copy of the shipped one (ClusterRole, binding and account all
        named ``account``, tracked), so a lab can break the copy and grade it against the
        original (:func:`operator_role`) without touching ``tenant-operator``'s own.
        """
        manifests.apply(self.api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}])
        self.track("rbac.authorization.k8s.io/v1", "ClusterRole", account)
        self.track("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", account)
        self.track("v1", "ServiceAccount", account, SYSTEM_NAMESPACE)
        manifests.apply(self.api, rbac.operator_rbac("tenant", name=account))
        kubeconfig = rbac.service_account_kubeconfig(self.api, SYSTEM_NAMESPACE, account,
                                                     self.ctx.state_dir / f"{self.id}.kubeconfig")
        self.remember_file(kubeconfig)
        return self.start_operator(kubeconfig=kubeconfig)


class VariantLab(TenantLab):
    """A lab around a broken copy of the Tenant operator, made by editing named definitions at inject time.

    The learner's copy is ``labs/<id>/tenant_operator.py`` (git-ignored, removed on reset): the
    lab runs that file, and ``check`` restarts it whenever the learner saves a change.
    """

    #: The operator the variant is made from (``operators/<operator>/<operator>_operator.py``).
    variant_of: ClassVar[str] = "tenant"
    #: Edits of named parts turning it into the broken variant.
    edits: ClassVar[Sequence[variants.Edit]] = ()

    @property
    def learner_copy(self) -> Path:
        return self.workdir / operator_path(self.variant_of).name

    def header(self) -> str:
        return (f"# Your copy of the {self.variant_of} operator for the lab {self.id!r} (labs/{self.id}/README.md).\n"
                f"# Written by `operatorlab lab start {self.id}`; `operatorlab lab check {self.id}` restarts\n"
                f"# the lab's operator from this file whenever you save it. Reset deletes it.\n")

    def write_variant(self) -> Path:
        self.remember_file(self.learner_copy)
        self.learner_copy.write_text(self.header() + variants.apply(self.original(), self.edits))
        return self.learner_copy

    def write_fixed(self) -> Path:
        """The reference fix: the edited definitions of the learner's copy put back as in the real operator."""
        text = self.learner_copy.read_text() if self.learner_copy.is_file() else ""
        try:
            fixed = variants.restore(text, self.original(), self.edits)
        except variants.VariantError:  # the learner changed it beyond recognition: start from the original
            fixed = self.header() + self.original()
        self.learner_copy.write_text(fixed)
        return self.learner_copy

    def original(self) -> str:
        """The real operator's source, which the variant is made from."""
        return operator_path(self.variant_of).read_text()

    def start_variant(self, *, kubeconfig: Path | None = None, namespaces: Sequence[str] = ()) -> OperatorProcess:
        return self.run_operator(self.learner_copy, kubeconfig=kubeconfig, namespaces=namespaces)
