"""The delete-404 lab grades behaviour: making the stuck Tenant go by hand is not a fix.

tests/labs/test_labs.py proves the protocol (pass after setup, fail after inject, pass after
the reference fix, reset leaves nothing); here, the bypasses.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab import tenants
from operatorlab.labs import Lab
from tests.labs import bypasses

LAB = "delete-404"
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB))

TENANT = "lab-d4-plum"
GONE = "a Tenant whose namespace is gone already can be deleted"


@pytest.fixture(scope="module")
def delete_404_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, delete_404_cluster, nothing_left) -> Iterator[Lab]:
    yield from bypasses.started(LAB, delete_404_cluster, tmp_path, nothing_left)


def test_stripping_the_finalizer_by_hand_is_not_a_fix(lab):
    lab.custom.patch_cluster_custom_object(tenants.GROUP, tenants.VERSION, tenants.PLURAL, TENANT,
                                           {"metadata": {"finalizers": None}})
    assert TENANT not in lab.tenants.names()  # the symptom is gone...
    assert bypasses.first_failure(lab) == [GONE]  # ...the fault is not


def test_recreating_the_namespace_by_hand_is_not_a_fix(lab):
    """The broken handler then finds a namespace (not the Tenant's) and lets the Tenant go, next retry."""
    lab.core.create_namespace({"metadata": {"name": tenants.namespace_of(TENANT)}})
    assert bypasses.first_failure(lab) == [GONE]
