"""The expired-client-cert drill grades behaviour and identity: a scheduler that works as someone else fails.

tests/labs/test_labs.py proves its protocol (its checks pass after setup, fail after inject,
pass after the reference repair, ``operatorlab cluster up``). Here: the repairs that get Pods
placed again without renewing the scheduler's own certificate, each caught by the identity check.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
import yaml

from operatorlab.cluster import LocalCluster
from operatorlab.faults.components import start_component, stop_component
from operatorlab.labs import Lab
from tests.labs.clusters import ON_EXISTING_CLUSTER
from tests.labs.drilling import drill_module, failing, started

pytestmark = [pytest.mark.xdist_group("drill-expired-client-cert"),
              pytest.mark.skipif(ON_EXISTING_CLUSTER, reason="re-issues a control-plane certificate: needs the "
                                                             "local cluster")]

DRILL = "expired-client-cert"
D = drill_module(DRILL)


@pytest.fixture
def lab(private_cluster, tmp_path, nothing_left) -> Iterator[Lab]:
    yield from started(DRILL, private_cluster, tmp_path, nothing_left)


def _restart_scheduler(cluster: LocalCluster) -> None:
    stop_component(cluster, D.COMPONENT)
    start_component(cluster, D.COMPONENT)


def test_the_admins_certificate_handed_to_the_scheduler_is_not_a_repair(lab):
    cluster = lab.ctx.cluster
    path = cluster.dir / "components" / "kube-scheduler.kubeconfig"
    original = path.read_text()
    doc = yaml.safe_load(original)
    doc["users"][0]["user"].update({"client-certificate": str(cluster.pki.cert("admin")),
                                    "client-key": str(cluster.pki.key("admin"))})
    try:
        path.write_text(yaml.safe_dump(doc))
        _restart_scheduler(cluster)
        assert failing(lab) == [D.IDENTITY]  # Pods are placed: by system:masters
    finally:
        path.write_text(original)


def test_a_certificate_for_a_hundred_years_is_not_a_repair(lab):
    """The scheduler's own name and key, signed by the cluster's CA with openssl, as the exam's learners do."""
    k = lab.ctx.cluster.pki
    request = subprocess.run(["openssl", "req", "-new", "-key", str(k.key("kube-scheduler")),
                              "-subj", "/CN=system:kube-scheduler"], capture_output=True, check=True).stdout
    subprocess.run(["openssl", "x509", "-req", "-CA", str(k.ca), "-CAkey", str(k.key("ca")), "-days", "36500",
                    "-out", str(k.cert("kube-scheduler"))], input=request, capture_output=True, check=True)
    _restart_scheduler(lab.ctx.cluster)
    assert failing(lab) == [D.IDENTITY]
