"""Unit tests for operatorlab.controllers.keys (client-go MetaNamespaceKeyFunc)."""

from __future__ import annotations

import pytest
from kubernetes import client

from operatorlab.controllers.keys import ExplicitKey, meta_namespace_key, split_meta_namespace_key


def test_namespaced_dict_gives_namespace_slash_name() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Website", "metadata": {"namespace": "shop", "name": "web"}}
    assert meta_namespace_key(obj) == "shop/web"


@pytest.mark.parametrize(
    "metadata", [{"name": "team-a"}, {"name": "team-a", "namespace": ""}, {"name": "team-a", "namespace": None}]
)
def test_cluster_scoped_dict_gives_just_the_name(metadata: dict[str, object]) -> None:
    assert meta_namespace_key({"kind": "Tenant", "metadata": metadata}) == "team-a"


def test_kubernetes_client_models() -> None:
    pod = client.V1Pod(metadata=client.V1ObjectMeta(namespace="default", name="web-0"))
    ns = client.V1Namespace(metadata=client.V1ObjectMeta(name="default"))
    assert meta_namespace_key(pod) == "default/web-0"
    assert meta_namespace_key(ns) == "default"


def test_explicit_key_passes_through() -> None:
    assert meta_namespace_key(ExplicitKey("ns/gone")) == "ns/gone"


def test_object_without_metadata_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="no meta"):
        meta_namespace_key({"kind": "Website"})
    with pytest.raises(TypeError):
        meta_namespace_key("ns/name")  # a plain str is not an ExplicitKey
    with pytest.raises(TypeError):
        meta_namespace_key(client.V1Pod())


def test_object_without_a_name_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"metadata\.name"):
        meta_namespace_key({"metadata": {"namespace": "ns", "generateName": "web-"}})


@pytest.mark.parametrize(("key", "parts"), [("shop/front", ("shop", "front")), ("team-a", ("", "team-a"))])
def test_split_undoes_the_key(key: str, parts: tuple[str, str]) -> None:
    assert split_meta_namespace_key(key) == parts


def test_split_rejects_more_than_one_slash() -> None:
    with pytest.raises(ValueError, match="unexpected key format"):
        split_meta_namespace_key("a/b/c")
