"""The behavioural suite's pure parts: reading an author's inputs, and a bad object from a schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from operatorlab.verify.suite import InputError, Resource, derive_bad, load_docs, split_example, wrong_value
from operatorlab.verify.world import Request, requests, tally

CRD = {"kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1",
       "metadata": {"name": "things.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Thing", "plural": "things"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "properties": {
                        "size": {"x-kubernetes-int-or-string": True},
                        "count": {"type": "integer"}}}}}}}]}}


def test_the_resource_comes_from_the_crd() -> None:
    resource = Resource.of(CRD)
    assert (resource.kind.group, resource.kind.version, resource.kind.plural, resource.kind.namespaced) == \
        ("example.com", "v1", "things", True)
    assert resource.kind.path("a", "ns") == "/apis/example.com/v1/namespaces/ns/things/a"


def test_a_crd_without_names_is_an_input_error() -> None:
    with pytest.raises(InputError, match="lacks"):
        Resource.of({"spec": {"group": "example.com"}})


def test_the_example_is_the_last_object_of_the_kind_after_what_it_needs() -> None:
    resource = Resource.of(CRD)
    needs = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "src"}}
    cr = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}}
    assert split_example(resource, [needs, cr], Path("example.yaml")) == ([needs], cr)
    with pytest.raises(InputError, match="holds no Thing"):
        split_example(resource, [needs], Path("example.yaml"))


def test_a_bad_object_gets_a_wrong_type_in_a_typed_field() -> None:
    bad, what = derive_bad(Resource.of(CRD), {"apiVersion": "example.com/v1", "kind": "Thing", "spec": {}})
    assert bad["spec"] == {"count": "not-a-number"} and what.startswith("spec.count")  # size takes any type
    assert wrong_value({"type": "string"}) == 12345
    assert wrong_value({"x-kubernetes-preserve-unknown-fields": True}) is None


def test_input_files_are_checked_with_words(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("kind: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_docs(tmp_path / "broken.yaml", "example")
    with pytest.raises(InputError, match="no example file"):
        load_docs(tmp_path / "missing.yaml", "example")


def test_the_operators_requests_are_read_from_the_proxys_stats() -> None:
    stats = {"requests": [{"t": 1.0, "method": "GET", "path": "/api/v1/x", "watch": False},
                          {"t": 2.0, "method": "PATCH", "path": "/api/v1/x", "watch": False},
                          {"t": 2.5, "method": "PATCH", "path": "/api/v1/x", "watch": False},
                          {"t": 3.0, "method": "GET", "path": "/_operatorlab/stats", "watch": False}]}
    seen = requests(stats, since=1.5)
    assert [r.method for r in seen] == ["PATCH", "PATCH"] and all(r.is_write for r in seen)
    assert tally(seen) == "PATCH /api/v1/x x2"
    assert not Request(0, "GET", "/x", True).is_write
