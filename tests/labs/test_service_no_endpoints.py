"""The service-no-endpoints drill grades behaviour: endpoints made to appear by hand fail.

tests/labs/test_labs.py proves its protocol. Here: the ways to fill the Service's endpoints
while its selector still matches no Pod of the app, each caught by the check that makes a
fresh Pod of the app and waits for it among the Service's endpoints.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from operatorlab.labs import Lab
from tests.labs.drilling import drill_module, failing, started

DRILL = "service-no-endpoints"
D = drill_module(DRILL)
pytestmark = pytest.mark.xdist_group(D.ServiceNoEndpoints.xdist_group)  # as test_labs.py runs it: not at once


@pytest.fixture
def lab(tmp_path, nothing_left) -> Iterator[Lab]:
    from operatorlab.cluster import current

    yield from started(DRILL, current(), tmp_path, nothing_left)


def _pods(lab: Lab) -> list:
    return lab.core.list_namespaced_pod(D.NAMESPACE, label_selector=f"app={D.APP}").items


def test_an_endpointslice_written_by_hand_is_not_a_repair(lab):
    endpoints = [{"addresses": [p.status.pod_ip], "conditions": {"ready": True},
                  "targetRef": {"kind": "Pod", "name": p.metadata.name, "namespace": D.NAMESPACE}}
                 for p in _pods(lab)]
    lab.track("discovery.k8s.io/v1", "EndpointSlice", f"{D.APP}-by-hand", D.NAMESPACE)
    client.DiscoveryV1Api(lab.api).create_namespaced_endpoint_slice(D.NAMESPACE, {
        "metadata": {"name": f"{D.APP}-by-hand", "labels": {"kubernetes.io/service-name": D.APP}},
        "addressType": "IPv4", "endpoints": endpoints, "ports": [{"name": "http", "port": 8080}]})
    assert failing(lab) == [D.JOINS]


def test_relabelling_the_running_pods_is_not_a_repair(lab):
    # They match the Service then, and leave their ReplicaSet, which makes new ones the Service misses.
    for pod in _pods(lab):
        lab.core.patch_namespaced_pod(pod.metadata.name, D.NAMESPACE, {"metadata": {"labels": D.WRONG}})
    assert failing(lab) == [D.JOINS]
