"""kubectl's version skew against the API server, as Kubernetes' version skew policy states it."""

from __future__ import annotations

import pytest

from operatorlab.kubectl import skew_warning


@pytest.mark.parametrize(("client", "server"), [
    ("v1.36.3", "v1.36.0"), ("v1.35.1", "v1.36.3"), ("v1.37.0", "v1.36.3"), ("v1.31.2", "v1.31.0+k3s1"),
])
def test_within_one_minor_no_warning(client: str, server: str) -> None:
    assert skew_warning(client, server) is None


@pytest.mark.parametrize(("client", "server"), [
    ("v1.32.4-dispatcher", "v1.36.3"), ("v1.38.0", "v1.36.3"), ("v2.0.0", "v1.36.3"),
])
def test_beyond_one_minor_warns_and_names_the_fix(client: str, server: str) -> None:
    warning = skew_warning(client, server)
    assert warning is not None
    assert client in warning and server in warning
    assert "install kubectl 1.36" in warning


def test_a_version_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes version"):
        skew_warning("devel", "v1.36.3")
