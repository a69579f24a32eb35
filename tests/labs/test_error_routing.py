"""The error-routing lab grades behaviour: what hides a symptom without routing errors right fails a check.

tests/labs/test_labs.py proves the protocol (pass after setup, fail after inject, pass after
the reference fix, reset leaves nothing); here, the bypasses.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from operatorlab.faults.variants import ReplaceFunction, apply
from operatorlab.labs import Lab
from tests.labs import bypasses

LAB = "error-routing"
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB))

OUTAGE = "a Tenant created during a one-request API outage (503) converges once it clears"
REFUSED = "a Tenant the API refuses (422) is reported once, not retried"

# Retry whatever goes wrong, soon: every outage heals, and every refusal is retried for ever.
RETRY_EVERYTHING = '''\
def _route_api_error(e: ApiException) -> kopf.PermanentError | kopf.TemporaryError | None:
    """Whatever it is, try again in a second."""
    return kopf.TemporaryError(f"the API answered {e.status}: {_server_message(e)}; retrying", delay=1)
'''


@pytest.fixture(scope="module")
def error_routing_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, error_routing_cluster, nothing_left) -> Iterator[Lab]:
    yield from bypasses.started(LAB, error_routing_cluster, tmp_path, nothing_left)


def test_an_operator_out_of_reach_of_the_outage_is_not_graded_as_fixed(lab):
    """The fixed code, run as an operator of its own around the lab's proxy: the check's 503 never reaches it."""
    lab.write_fixed()
    lab.run_operator(lab.learner_copy)  # the admin's kubeconfig, not the proxy's
    assert bypasses.first_failure(lab) == [OUTAGE]


def test_retrying_everything_is_not_a_fix(lab):
    lab.learner_copy.write_text(lab.header() + apply(lab.original(),
                                                     [ReplaceFunction("_route_api_error", RETRY_EVERYTHING)]))
    assert bypasses.first_failure(lab) == [REFUSED]


def test_deleting_the_clusters_policy_is_not_a_fix(lab):
    """Without the policy nothing is refused; the check puts it back before it feeds its refused spec."""
    admission = client.AdmissionregistrationV1Api(lab.api)
    admission.delete_validating_admission_policy_binding("lab-er-tenant-quota-cap")
    admission.delete_validating_admission_policy("lab-er-tenant-quota-cap")
    lab.learner_copy.write_text(lab.header() + apply(lab.original(),
                                                     [ReplaceFunction("_route_api_error", RETRY_EVERYTHING)]))
    assert bypasses.first_failure(lab) == [REFUSED]
