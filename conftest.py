"""One real cluster for the whole test session, started before anything else runs.

The cluster must be up, and ``KUBECONFIG`` exported, *before* nbval starts the
notebook kernels: a kernel is a separate process that inherits ``os.environ`` when
it starts, which is before any fixture runs. So this happens in
``pytest_configure``, in the xdist controller only (workers inherit the
environment).

- ``OPERATORLAB_CLUSTER=existing``: test against the current kubeconfig context; the
  tests marked ``local_cluster`` (they need Operator Lab's own binaries, certificates or
  processes) are skipped, with that reason.
- otherwise: a local cluster named ``test`` (separate from the ``lab`` one a
  learner uses), stopped and deleted at the end if this session started it.

Work that must not overlap (operators that watch cluster-scoped Tenants, each
notebook's cells) is pinned to one xdist group; run with ``--dist loadgroup``.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

_ROOT = Path(__file__).parent
_started = None


def _needs_cluster(config: pytest.Config) -> bool:
    if os.environ.get("OPERATORLAB_NO_CLUSTER"):
        return False
    args = [a for a in config.args if not a.startswith("-")] or [str(_ROOT / p) for p in config.getini("testpaths")]
    unit = (_ROOT / "tests" / "unit").resolve()
    return not all(Path(a.split("::")[0]).resolve().is_relative_to(unit) for a in args)


def pytest_configure(config: pytest.Config) -> None:
    global _started
    if hasattr(config, "workerinput") or not _needs_cluster(config):
        return
    from kubernetes import config as kube_config

    from operatorlab import paths
    from operatorlab.cluster import LocalCluster, get_cluster, manifests

    provider = os.environ.get("OPERATORLAB_CLUSTER", "local")
    cluster = (get_cluster() if provider == "existing"
               else LocalCluster(os.environ.get("OPERATORLAB_TEST_CLUSTER", "test")))
    was_up = cluster.is_up()
    if provider != "existing" and not was_up:
        cluster.down(purge=True, log=lambda _: None)  # no leftovers from an earlier session
        _started = cluster  # before up(): a half-started cluster is stopped at the end too
    cluster.up(log=lambda line: print(f"[cluster] {line}", flush=True))
    os.environ.update({k: v for k, v in cluster.env().items() if v})
    # The notebooks run with their exercise starters in place: into a folder of the session's
    # own, never over a learner's answers in notebooks/work/; the same for their progress and
    # their mock exams (lesson 08 plots the history: a learner's own would change its output).
    scratch = Path(tempfile.mkdtemp(prefix="operatorlab-test-"))
    os.environ.setdefault("OPERATORLAB_WORK_DIR", str(scratch / "work"))
    os.environ.setdefault("OPERATORLAB_PROGRESS", str(scratch / "progress.json"))
    os.environ.setdefault("OPERATORLAB_EXAM_HISTORY", str(scratch / "exam-history.json"))
    api = kube_config.new_client_from_config(config_file=str(cluster.kubeconfig))
    manifests.apply_crds(api, paths.crds_dir())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _started is not None and not os.environ.get("OPERATORLAB_KEEP_CLUSTER"):
        _started.down(purge=True, log=lambda line: print(f"[cluster] {line}", flush=True))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    existing = os.environ.get("OPERATORLAB_CLUSTER") == "existing"
    for item in items:
        if existing and item.get_closest_marker("local_cluster"):
            item.add_marker(pytest.mark.skip(
                reason="needs Operator Lab's own local cluster (its binaries, certificates or processes); "
                       "this session tests an existing cluster (OPERATORLAB_CLUSTER=existing)"))
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb":
            # A notebook's cells share one kernel: keep them on one worker, in order.
            operator = _notebook_operator(path)
            group = f"{operator}-operator" if operator else f"notebook-{path.stem}"
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_hand_out_order(items))


#: Rough seconds one test takes, by where it lives (measured on 2 cores, 10 workers): what the
#: hand-out order sorts by. A lab test starts, breaks and probes a lab; a verify test grades an
#: operator with the whole suite; a notebook cell is a step. (Left at the default, the verify suite,
#: 11 tests and 145 s, was handed out last and ran alone at the end.)
_SECONDS = (("tests/labs/", 35.0), ("tests/verify/", 13.0), ("tests/integration/", 12.0), ("tests/exercises/", 8.0),
            ("notebooks/", 2.0))


def _hand_out_order(items: list[pytest.Item]) -> Callable[[pytest.Item], tuple[int, float]]:
    """The order xdist hands the tests out in (``--no-loadscope-reorder`` keeps it): longest first.

    A worker takes a whole xdist group at once, so a long group handed out last runs
    alone at the end while the other workers sit idle; so does a long single test. First
    the tests marked ``long`` (half a minute or more in one test), then every group and
    single test by its estimated time, longest first. Estimated, not counted: a notebook
    is a group of many quick cells, a lab's bypasses a group of a few slow tests. Stable:
    among equals, collection order.
    """
    def group(item: pytest.Item) -> str | None:
        mark = item.get_closest_marker("xdist_group")
        return str(mark.args[0]) if mark and mark.args else None

    def seconds(item: pytest.Item) -> float:
        where = Path(str(item.fspath)).resolve().relative_to(Path(__file__).parent).as_posix()
        return next((s for prefix, s in _SECONDS if where.startswith(prefix)), 0.5)

    estimates: defaultdict[str, float] = defaultdict(float)
    for item in items:
        estimates[group(item) or item.nodeid] += seconds(item)

    def key(item: pytest.Item) -> tuple[int, float]:
        if item.get_closest_marker("long"):
            return (0, 0.0)
        return (1, -estimates[group(item) or item.nodeid])
    return key


@functools.cache
def _notebook_operator(path: Path) -> str:
    # A notebook that runs a cluster-wide operator names it in its metadata, e.g.
    # {"operatorlab": {"xdist_group": "tenant"}}: it then shares the xdist group of that
    # operator's tests ("tenant-operator"), because two such operators at once would both
    # reconcile every (cluster-scoped) object.
    meta = json.loads(path.read_text()).get("metadata", {})
    return meta.get("operatorlab", {}).get("xdist_group", "")
