"""Which cluster, and which xdist group, a lab's test runs on (the fixtures are in conftest.py)."""

from __future__ import annotations

import pytest

from operatorlab.cluster import Cluster, current
from operatorlab.labs import Lab

# The cluster of the labs that run the Tenant operator, and the xdist group of their tests.
TENANT_LABS = "labs-tenant"

def cluster_for(lab_cls: type[Lab], request: pytest.FixtureRequest) -> Cluster:
    """The cluster a lab's test runs it on (see the module docstring)."""
    if "local" in lab_cls.requires:
        return request.getfixturevalue("private_cluster")
    if lab_cls.xdist_group == "tenant-operator":
        return request.getfixturevalue("tenant_lab_cluster")
    return current()


def xdist_group_of(lab_id: str, lab_cls: type[Lab]) -> str | None:
    """The xdist group a lab's test joins: its cluster's, or its operator's on the shared one."""
    if "local" in lab_cls.requires:
        return f"lab-private-{lab_id}"
    if lab_cls.xdist_group == "tenant-operator":
        return TENANT_LABS
    return lab_cls.xdist_group
