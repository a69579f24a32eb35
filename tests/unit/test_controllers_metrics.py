"""Unit tests for the pure parts of operatorlab.controllers.metrics (no cluster)."""

from __future__ import annotations

import pytest

from operatorlab.controllers.metrics import ControllerStats, RequestCounts, classify_request, parse_prometheus_samples

HOST = "https://127.0.0.1:6443"


@pytest.mark.parametrize(
    ("method", "path", "verb", "resource", "namespace", "name", "subresource"),
    [
        ("GET", "/apis/hedronite.io/v1/tenants", "list", "tenants", "", "", ""),
        ("GET", "/apis/hedronite.io/v1/tenants?watch=true&resourceVersion=7", "watch", "tenants", "", "", ""),
        ("GET", "/api/v1/watch/namespaces", "watch", "namespaces", "", "", ""),
        ("GET", "/apis/hedronite.io/v1/tenants/team-a", "get", "tenants", "", "team-a", ""),
        ("PATCH", "/apis/hedronite.io/v1/tenants/team-a/status", "patch", "tenants", "", "team-a", "status"),
        ("GET", "/api/v1/namespaces/tenant-a", "get", "namespaces", "", "tenant-a", ""),
        ("PUT", "/api/v1/namespaces/tenant-a/finalize", "update", "namespaces", "", "tenant-a", "finalize"),
        ("POST", "/api/v1/namespaces", "create", "namespaces", "", "", ""),
        ("DELETE", "/api/v1/namespaces/tenant-a", "delete", "namespaces", "", "tenant-a", ""),
        ("GET", "/api/v1/namespaces/tenant-a/resourcequotas/tenant-quota",
         "get", "resourcequotas", "tenant-a", "tenant-quota", ""),
        ("POST", "/api/v1/namespaces/tenant-a/resourcequotas", "create", "resourcequotas", "tenant-a", "", ""),
        ("DELETE", "/api/v1/namespaces/shop/pods", "deletecollection", "pods", "shop", "", ""),
        ("GET", "/api/v1/namespaces?labelSelector=hedronite.io%2Ftenant", "list", "namespaces", "", "", ""),
    ],
)
def test_classify_request_names_verbs_like_the_apiserver(
    method, path, verb, resource, namespace, name, subresource,
) -> None:
    assert classify_request(method, HOST + path) == {
        "verb": verb, "resource": resource, "namespace": namespace, "name": name, "subresource": subresource,
    }


def test_non_resource_paths_keep_the_method_and_path() -> None:
    assert classify_request("GET", HOST + "/metrics")["verb"] == "get"
    assert classify_request("GET", HOST + "/metrics")["resource"] == "/metrics"
    assert classify_request("GET", HOST + "/apis/hedronite.io/v1")["resource"] == "/apis/hedronite.io/v1"


def test_query_passed_apart_from_the_url_is_read_too() -> None:
    assert classify_request("GET", HOST + "/api/v1/pods", [("watch", True)])["verb"] == "watch"


METRICS = (
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests\n"
    "# TYPE apiserver_request_total counter\n"
    'apiserver_request_total{code="200",component="apiserver",dry_run="",group="hedronite.io",resource="tenants",'
    'scope="cluster",subresource="",verb="LIST",version="v1"} 3\n'
    'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="namespaces",'
    'scope="resource",subresource="",verb="GET",version="v1"} 10\n'
    'apiserver_request_total{code="404",component="apiserver",dry_run="",group="",resource="namespaces",'
    'scope="resource",subresource="",verb="GET",version="v1"} 2\n'
    'apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="namespaces",'
    'scope="resource",subresource="",verb="POST",version="v1"} 1\n'
    'apiserver_request_total_other{verb="GET"} 99\n'
    'apiserver_request_duration_seconds_bucket{le="0.1",verb="GET"} 5\n'
    'odd_metric{msg="a \\"quoted\\", comma\\\\",x="y"} 1.5e3\n'
)


def test_parse_prometheus_samples_reads_one_metric_and_its_labels() -> None:
    samples = parse_prometheus_samples(METRICS, "apiserver_request_total")
    assert len(samples) == 4
    labels, value = samples[0]
    assert labels["resource"] == "tenants" and labels["verb"] == "LIST" and value == 3.0


def test_parse_prometheus_samples_unescapes_label_values() -> None:
    [(labels, value)] = parse_prometheus_samples(METRICS, "odd_metric")
    assert labels == {"msg": 'a "quoted", comma\\', "x": "y"}
    assert value == 1500.0


def test_parse_prometheus_samples_refuses_broken_labels() -> None:
    with pytest.raises(ValueError, match="cannot parse labels"):
        parse_prometheus_samples('m{a="1",b=2} 1\n', "m")


def test_request_counts_select_and_subtract() -> None:
    before = RequestCounts({("list", "tenants"): 2, ("get", "namespaces"): 5})
    after = RequestCounts({
        ("list", "tenants"): 3, ("get", "namespaces"): 25, ("patch", "resourcequotas"): 1, ("create", "namespaces"): 2,
    })
    window = after - before
    assert window.by_verb_resource == {
        ("list", "tenants"): 1, ("get", "namespaces"): 20, ("patch", "resourcequotas"): 1, ("create", "namespaces"): 2,
    }
    assert window.total == 24
    assert window.writes == 3
    assert window.count("get") == 20
    assert window.count(resource="namespaces") == 22
    assert window.count(["get", "list"]) == 21
    assert window.by_verb() == {"list": 1, "get": 20, "patch": 1, "create": 2}


def test_controller_stats_measure_and_difference() -> None:
    counts = RequestCounts({
        ("list", "tenants"): 1, ("watch", "tenants"): 2, ("get", "namespaces"): 4, ("create", "namespaces"): 1,
    })
    stats = ControllerStats.measure(counts, reconciles=2, failures=1)
    assert (stats.requests, stats.lists, stats.watches, stats.gets, stats.writes) == (8, 1, 2, 4, 1)
    assert (stats - ControllerStats(requests=3, reconciles=2)).requests == 5
