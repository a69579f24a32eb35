"""Fixtures for tests that talk to the real cluster (started in the root conftest.py)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def kubeconfig() -> Path:
    """The session cluster's kubeconfig (``$KUBECONFIG``, exported by the root conftest.py)."""
    if not os.environ.get("KUBECONFIG"):
        pytest.fail("no cluster: KUBECONFIG is unset (the root conftest.py starts one; unit tests need none)")
    return Path(os.environ["KUBECONFIG"])


# Module-scoped: a test module may replace ``kubeconfig`` with a cluster of its own
# (tests/labs/clusters.py, module_cluster), and these then talk to that one.
@pytest.fixture(scope="module")
def api_client(kubeconfig):
    """A ``kubernetes.client.ApiClient`` for the module's cluster (admin identity): the session's by default."""
    from kubernetes import config

    return config.new_client_from_config(config_file=str(kubeconfig))


@pytest.fixture(scope="module")
def core(api_client):
    from kubernetes import client

    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def custom(api_client):
    from kubernetes import client

    return client.CustomObjectsApi(api_client)


@pytest.fixture
def unique() -> str:
    """A short random suffix so parallel tests never share object names."""
    return uuid.uuid4().hex[:6]


@pytest.fixture
def namespace(core, unique) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards."""
    from kubernetes import client

    name = f"t-{unique}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException as e:
        if e.status != 404:
            raise
