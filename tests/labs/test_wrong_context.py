"""The wrong-context drill grades behaviour: the Deployments listed as someone else, or made where the file looks, fail.

tests/labs/test_labs.py proves its protocol. Here: the ways to make ``kubectl get deployments``
list something with the file alone that are not the shop's context put back, each caught by
the check that asks who the file authenticates as, or by the fresh Deployment the check makes
in the shop's namespace.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from operatorlab import kubectl
from operatorlab.labs import Lab
from operatorlab.labs import workloads as w
from tests.labs.drilling import drill_module, failing, started

DRILL = "wrong-context"
D = drill_module(DRILL)
pytestmark = pytest.mark.xdist_group(D.WrongContext.xdist_group)  # as test_labs.py runs it: not at once


@pytest.fixture
def lab(tmp_path, nothing_left) -> Iterator[Lab]:
    from operatorlab.cluster import current

    yield from started(DRILL, current(), tmp_path, nothing_left)


def _set_namespace(lab: Lab) -> None:
    kubectl.kubectl(["--kubeconfig", str(lab.workdir / D.FILE), "config", "set-context", "--current",
                     f"--namespace={D.NAMESPACE}"], echo=False)


def test_the_admins_kubeconfig_pasted_in_is_not_a_repair(lab):
    shutil.copy(lab.ctx.kubeconfig, lab.workdir / D.FILE)
    _set_namespace(lab)
    assert failing(lab) == [D.AS_SHOP]


def test_the_audit_context_given_the_shops_namespace_is_not_a_repair(lab):
    _set_namespace(lab)  # its user may view everything: the list is right, the user is not
    assert failing(lab) == [D.AS_SHOP]


def test_the_deployments_made_again_where_the_file_looks_are_not_a_repair(lab):
    for name in D.APPS:
        lab.track("apps/v1", "Deployment", name, "default")
        w.apps(lab).create_namespaced_deployment("default", w.deployment(name, replicas=0))
    assert failing(lab) == [D.LISTS, D.AS_SHOP]
