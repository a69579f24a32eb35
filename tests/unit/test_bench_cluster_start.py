"""The cluster-start section of ``make bench``: its table and where it goes in latest.md.

The measuring itself starts real clusters (ours, kwokctl's, an envtest-style one) and
costs far more than a unit test may: ``python -m bench --only cluster`` runs it.
"""

from __future__ import annotations

from pathlib import Path

from bench import cluster_start, controllers, report, scale


def _results() -> cluster_start.Results:
    ours = cluster_start.Kind("ours, cold", "etcd, kube-apiserver", "ready", [4.0, 5.0, 6.0], [500.0])
    kwokctl = cluster_start.Kind("kwokctl", "etcd, kube-apiserver", "healthz", [3.0, 4.0, 2.0], [450.0])
    steps = {"PKI and config files": [0.2, 0.3, 0.4], "kube-apiserver ready": [3.0, 3.5, 4.0]}
    versions = {"Kubernetes": "v1.36.3", "etcd": "3.6.16", "kwok": "v0.8.0", "kwokctl": "v0.8.0"}
    return cluster_start.Results([ours, kwokctl], steps, versions, "2 CPUs, 24 GiB", "2026-12-02 06:00")


def test_table_has_medians_and_ratio_to_ours() -> None:
    text = cluster_start.markdown(_results())
    assert "| ours, cold | etcd, kube-apiserver | ready | 5.00 s (n=3: 4.00, 5.00, 6.00) | 1.00x | 500 MiB |" in text
    assert "| kwokctl | etcd, kube-apiserver | healthz | 3.00 s (n=3: 3.00, 4.00, 2.00) | 0.60x | 450 MiB |" in text
    assert "| kube-apiserver ready | 3.50 s |" in text
    assert "2 CPUs, 24 GiB; Kubernetes v1.36.3, etcd 3.6.16, kwok v0.8.0, kwokctl v0.8.0." in text


def test_a_section_is_replaced_in_place_and_the_sections_after_it_stay(tmp_path: Path) -> None:
    path = tmp_path / "latest.md"
    path.write_text(f"# Operator Lab benchmarks\n\ntop table\n\n{controllers.HEADING}\n\ncontrollers table\n\n"
                    f"{scale.HEADING}\n\nscale table\n")
    report.write_section(cluster_start.HEADING, cluster_start.markdown(_results()), path)  # new: at the end
    report.write_section(controllers.HEADING, controllers.HEADING + "\n\nsecond run\n", path)
    report.write_section(cluster_start.HEADING, cluster_start.HEADING + "\n\nagain\n", path)
    text = path.read_text()
    assert text.count(controllers.HEADING) == text.count(cluster_start.HEADING) == 1
    assert "second run" in text and "controllers table" not in text and "5.00 s" not in text
    assert text.index("top table") < text.index("second run") < text.index("scale table") < text.index("again")
