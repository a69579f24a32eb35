"""The one kubeconfig writer: valid for the official client, private from the first byte."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml
from kubernetes import config as kube_config

from operatorlab.cluster import kubeconfig


def test_a_certificate_kubeconfig_loads_in_the_official_client(tmp_path: Path) -> None:
    path = kubeconfig.write(tmp_path / "kubeconfig", server="https://127.0.0.1:6443", cluster="lab",
                            user="admin", ca=tmp_path / "ca.crt", cert=tmp_path / "a.crt", key=tmp_path / "a.key")
    _, current = kube_config.list_kube_config_contexts(config_file=str(path))
    assert current["name"] == "lab" and current["context"] == {"cluster": "lab", "user": "admin"}
    (user,) = yaml.safe_load(path.read_text())["users"]
    assert user["user"] == {"client-certificate": str(tmp_path / "a.crt"), "client-key": str(tmp_path / "a.key")}


def test_a_proxy_kubeconfig_has_no_credentials(tmp_path: Path) -> None:
    text = kubeconfig.render(server="http://127.0.0.1:8001", cluster="fault-proxy", user="via-fault-proxy")
    config = yaml.safe_load(text)
    assert config["users"] == [{"name": "via-fault-proxy", "user": {}}]
    assert config["clusters"][0]["cluster"] == {"server": "http://127.0.0.1:8001"}


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_written_private_even_under_a_permissive_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        path = kubeconfig.write(tmp_path / "k", server="https://x", cluster="c", user="u", token="t")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_rewriting_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text("old")
    path.chmod(0o644)
    kubeconfig.write(path, server="https://x", cluster="c", user="u", token="t")
    assert yaml.safe_load(path.read_text())["users"][0]["user"] == {"token": "t"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["k"]


def test_server_reads_the_current_contexts_api_server(tmp_path: Path) -> None:
    path = kubeconfig.write(tmp_path / "kubeconfig", server="https://127.0.0.1:6443/", cluster="lab", user="admin",
                            token="t")
    assert kubeconfig.server(path) == "https://127.0.0.1:6443"
    config = yaml.safe_load(path.read_text())
    config["current-context"] = "elsewhere"
    path.write_text(yaml.safe_dump(config))
    assert kubeconfig.server(path) is None  # names no context of the file
    assert kubeconfig.server(tmp_path / "absent") is None


def test_merged_contexts_switch_users_clusters_and_namespaces_in_the_official_client(tmp_path: Path) -> None:
    shop = kubeconfig.config(server="https://127.0.0.1:6443", cluster="prod", user="dev", token="a",
                             context="shop", namespace="shop")
    audit = kubeconfig.config(server="https://127.0.0.1:6443", cluster="prod", user="auditor", token="b",
                              context="audit")
    path = kubeconfig.write_config(tmp_path / "k", kubeconfig.merged([shop, audit], current="audit"))
    contexts, current = kube_config.list_kube_config_contexts(config_file=str(path))
    assert current == {"name": "audit", "context": {"cluster": "prod", "user": "auditor"}}
    assert [c["name"] for c in contexts] == ["shop", "audit"]
    assert contexts[0]["context"]["namespace"] == "shop"
    assert [c["name"] for c in yaml.safe_load(path.read_text())["clusters"]] == ["prod"]  # named once
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
