"""Base classes for the labs around the Tenant operator (``operators/tenant``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from operatorlab.labs import checks, faults
from operatorlab.labs.base import Lab
from operatorlab.wait import eventually


class TenantLab(Lab):
    """A lab that runs the Tenant operator: Tenants it makes are tracked and removed on reset."""

    xdist_group: ClassVar[str | None] = "tenant-operator"

    def create_tenant(self, name: str, cpu: str = "1", *, wait: bool = True) -> None:
        """Create (and track) a Tenant; with ``wait``, until the operator reconciled it."""
        self.track("tenant", name)
        self.tenants.create(name, cpu, f"lab {self.id}")
        if wait:
            self.wait_reconciled(name)

    def wait_reconciled(self, name: str, timeout: float = 30.0) -> None:
        eventually(lambda: checks.tenant_reconciled(self.api, name).passed and self.tenants.phase(name) == "Ready",
                   timeout=timeout, message=f"lab {self.id}: Tenant {name} reconciled")

    def start_operator(self, role: str = "operator", **kwargs) -> faults.LabOperator:
        return self.operator(role, operator="tenant", **kwargs).start()


class VariantLab(TenantLab):
    """A lab around a broken copy of the Tenant operator, made by exact text edits at inject time.

    The learner's copy is ``labs/<id>/tenant_operator.py`` (git-ignored, removed on reset): the
    lab runs that file, and ``check`` restarts it whenever the learner saves a change.
    """

    #: (old, new) text edits turning operators/tenant/tenant_operator.py into the broken variant.
    edits: ClassVar[list[tuple[str, str]]] = []

    @property
    def learner_copy(self) -> Path:
        return self.workdir / "tenant_operator.py"

    def header(self) -> str:
        return (f"# Your copy of the Tenant operator for the lab {self.id!r} (labs/{self.id}/README.md).\n"
                f"# Written by `operatorlab lab start {self.id}`; `operatorlab lab check {self.id}` restarts\n"
                f"# the lab's operator from this file whenever you save it. Reset deletes it.\n")

    def write_variant(self) -> Path:
        self.learner_copy.write_text(faults.variant("tenant", self.edits, self.header()))
        self.state.remember("files", str(self.learner_copy))
        return self.learner_copy

    def write_fixed(self) -> Path:
        """The reference fix: the learner's copy with the edits undone (the real operator again)."""
        text = self.learner_copy.read_text() if self.learner_copy.is_file() else ""
        try:
            fixed = faults.transform(text, faults.undo_edits(self.edits))
        except faults.VariantError:  # the learner changed it beyond recognition: start from the original
            fixed = faults.variant("tenant", [], self.header())
        self.learner_copy.write_text(fixed)
        return self.learner_copy

    def start_variant(self) -> faults.LabOperator:
        return self.start_operator(source=self.learner_copy)
