"""The website-drift lab grades behaviour: what makes the symptom go without fixing the operator fails.

tests/labs/test_labs.py proves the protocol (pass after setup, fail after inject, pass after the
reference fix, reset leaves nothing); here, the bypasses. The lab's operator watches the lab's
namespace only, so these run on the session's cluster, beside the other Website operators.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab.cluster import current
from operatorlab.labs import Lab
from tests.labs import bypasses

LAB = "website-drift"
pytestmark = pytest.mark.xdist_group(f"labs-{LAB}")  # as test_labs.py runs it: one lab namespace, one test at a time

SERVES = "Website shop serves: its Deployment exists with 2 ready Pods, and its status says so"
DRIFT = "a Deployment scaled or deleted by hand comes back within 20 s while the operator runs (no restart)"


@pytest.fixture
def lab(tmp_path, nothing_left) -> Iterator[Lab]:
    yield from bypasses.started(LAB, current(), tmp_path, nothing_left)


def test_the_fault_shows(lab):
    assert bypasses.first_failure(lab) == [SERVES]


def test_restarting_the_operator_brings_shop_back_but_is_not_a_fix(lab):
    from operatorlab.labs import runner

    runner.restart(lab)  # on.resume re-applies shop
    assert bypasses.first_failure(lab) == [DRIFT]


def test_recreating_the_deployment_by_hand_is_not_a_fix(lab):
    """shop's Deployment made again by hand, owner reference and all, as the operator would make it."""
    from kubernetes import client

    from operatorlab.operators import load_module

    website = load_module("website")
    shop = lab.custom.get_namespaced_custom_object("example.com", "v1", "lab-website-drift", "websites", "shop")
    owner = website.owner_body("shop", shop["metadata"]["uid"])
    manifest = website.deployment_manifest("shop", "lab-website-drift", website.website_spec("shop", shop["spec"]),
                                           owner)
    client.AppsV1Api(lab.api).create_namespaced_deployment("lab-website-drift", manifest)
    assert bypasses.first_failure(lab) == [DRIFT]
