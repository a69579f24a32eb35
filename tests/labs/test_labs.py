"""Every lab on the real cluster: the checks pass after setup, fail after inject, pass after solve;
reset leaves nothing behind.

This proves each check can fail and each reference fix really fixes. Labs that run the
Tenant operator run on a cluster of their own, the NamespaceBaseline lab shares that
operator's xdist group, and labs that stop control-plane components run on a private
cluster, never on the session's shared one (see conftest.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
import urllib3

from operatorlab.cluster import current
from operatorlab.labs import registry, runner
from tests.labs.clusters import ON_EXISTING_CLUSTER, cluster_for, xdist_group_of

LABS = registry.discover()
# A lab that needs the local cluster's processes cannot run on an existing cluster: it must say so.
NEEDS_LOCAL = {i: c for i, c in LABS.items() if "local" in c.requires}
RUNNABLE = {i: c for i, c in LABS.items() if not (ON_EXISTING_CLUSTER and i in NEEDS_LOCAL)}


def _param(lab_id: str, cls) -> pytest.param:
    group = xdist_group_of(cls)
    return pytest.param(lab_id, marks=[pytest.mark.xdist_group(group)] if group else [], id=lab_id)


@pytest.mark.parametrize("lab_id", [_param(i, c) for i, c in RUNNABLE.items()])
def test_lab_fails_after_inject_and_passes_after_solve(lab_id, request, tmp_path, nothing_left):
    cls = LABS[lab_id]
    cluster = cluster_for(cls, request)
    ctx = runner.context(cluster, state_dir=tmp_path / "state", workdir_root=tmp_path / "labs")
    lab = runner.create(cls, ctx)
    started = time.monotonic()
    timings = {}
    try:
        runner.setup(lab)
        timings["setup"] = time.monotonic() - started
        after_setup = runner.check(lab, settle=lab.settle)
        assert all(c.passed for c in after_setup), [c for c in after_setup if not c.passed]

        runner.inject(lab)
        timings["inject"] = time.monotonic() - started
        after_inject = runner.check(lab)
        failing = [c for c in after_inject if not c.passed]
        assert failing, f"no check fails after inject: {after_inject}"
        for c in failing:
            assert c.message and c.name, c

        runner.solve(lab)
        after_solve = runner.check(lab, settle=lab.settle)
        timings["solve"] = time.monotonic() - started
        assert all(c.passed for c in after_solve), [c for c in after_solve if not c.passed]
    finally:
        recorded = lab.record if lab.state.exists else None
        runner.reset(lab)
    timings["total"] = time.monotonic() - started
    print(f"\n[lab timing] {lab_id}: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
    assert recorded is not None
    nothing_left(lab, recorded)


@pytest.mark.parametrize("lab_id", list(NEEDS_LOCAL))
def test_a_lab_that_needs_the_local_cluster_says_so_on_an_existing_one(lab_id, kubeconfig, tmp_path):
    """What a workshop attendee on minikube sees: a refusal that names the reason, and a list that warns.

    The session's cluster is handed over as a plain kubeconfig (a copy outside its folder), as
    minikube's is: nothing marks it as Operator Lab's own."""
    plain = tmp_path / "config"
    shutil.copy(kubeconfig, plain)
    env = {**os.environ, "OPERATORLAB_CLUSTER": "existing", "KUBECONFIG": str(plain),
           "OPERATORLAB_PROGRESS": str(tmp_path / "progress.json")}
    started = subprocess.run([sys.executable, "-m", "operatorlab.cli", "lab", "start", lab_id],
                             capture_output=True, text=True, timeout=120, env=env)
    assert started.returncode != 0
    assert f"lab {lab_id!r} is unavailable on this existing cluster" in started.stdout + started.stderr
    listed = subprocess.run([sys.executable, "-m", "operatorlab.cli", "lab", "list"],
                            capture_output=True, text=True, timeout=120, check=True, env=env)
    line = next(x for x in listed.stdout.splitlines() if lab_id in x)
    assert "unavailable on this cluster" in line, line


def test_fault_proxy_on_the_real_apiserver(tmp_path):
    """Through the proxy: pass-through, a 500 with Retry-After that fires once, a watch cut after 1 s.

(500, not 503 or 429: for those urllib3, under the kubernetes client, honours Retry-After and retries
by itself, which would hide the one refusal from this test.)"""
    from kubernetes import client, config

    from operatorlab.labs import Lab

    class ProxyOnly(Lab):
        id = "proxy-test"
        summary = "only a proxy"

    lab = ProxyOnly(runner.context(current(), state_dir=tmp_path))
    lab.begin()
    proxy = lab.proxy().start([{"action": "status", "status": 500, "retry_after": 2, "method": "GET",
                                "path": "^/api/v1/namespaces$", "times": 1}])
    try:
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(proxy.kubeconfig)))
        with pytest.raises(client.ApiException) as refused:
            core.list_namespace()
        assert refused.value.status == 500 and refused.value.headers["Retry-After"] == "2"
        listed = core.list_namespace()  # the rule fired its one time: real data now
        assert "default" in {n.metadata.name for n in listed.items} and listed.metadata.resource_version

        proxy.set_rules([{"action": "cut", "after": 1, "path": "^/api/v1/namespaces$", "watch": True}])
        started = time.monotonic()
        events = 0
        # The connection drops mid-stream with no end marker: urllib3 says "Response ended prematurely".
        with pytest.raises(urllib3.exceptions.ProtocolError):
            stream = core.list_namespace(watch=True, timeout_seconds=30, _preload_content=False)
            for _ in stream.stream(64):
                events += 1
        assert events > 0, "the watch was forwarded before the cut"
        assert time.monotonic() - started < 10, "cut after 1 s, not at the server's 30 s timeout"
        assert len(proxy.stats()["hits"]) == 2
    finally:
        runner.reset(lab)
    assert proxy.identity is not None and not proxy.identity.alive
