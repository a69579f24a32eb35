"""``python -m bench --only scale`` at a tiny size: the bench measures what it says it does.

Five Tenants through the kopf Tenant operator, then five through lesson 03's informer
controller, on one private cluster: both converge, the API server's own counters show
the writes each Tenant costs (and no more), nothing is written in steady state, and the
peak RSS is read from the implementation's own process.
"""

from __future__ import annotations

import pytest

from bench import scale

pytestmark = [pytest.mark.local_cluster, pytest.mark.xdist_group("bench-scale"),
              pytest.mark.long]  # four implementations converge Tenants: over a minute on a busy machine

TENANTS = 5


def test_scale_bench_counts_each_implementations_writes_and_its_steady_state():
    kopf, handwritten = scale.run(["kopf", "handwritten"], TENANTS, steady=2.0, fresh=False,
                                  cluster_name="bench-scale-smoke", log=lambda _: None)
    for r in (kopf, handwritten):
        assert r.tenants == TENANTS and 0 < r.converge_seconds < 30, r
        assert r.total(r.steady, writes=True) == 0, f"{r.name} wrote in steady state: {r.detail(r.steady)}"
        assert 40 < r.peak_rss_mib < 1024, f"{r.name}: peak RSS {r.peak_rss_mib} MiB is not a Python process's"
        # Exactly one namespace and one quota created per Tenant: no duplicates, none missed.
        assert r.requests.get(("POST", "namespaces", "")) == TENANTS, r.detail()
        assert r.requests.get(("POST", "resourcequotas", "")) == TENANTS, r.detail()
    # Lesson 03's controller writes nothing but the two objects; kopf adds its finalizer,
    # its last-handled annotation and status (and one Event per object created).
    assert handwritten.per_tenant(writes=True) == 2, handwritten.detail()
    assert kopf.requests.get(("PATCH", "tenants", "status")) == TENANTS, kopf.detail()
    assert 4 <= kopf.per_tenant(writes=True) <= 7, kopf.detail()
    section = scale.markdown([kopf, handwritten], machine="test")
    assert "| kopf Tenant operator |" in section and "n/a |" in section  # no Go run, no ratio
