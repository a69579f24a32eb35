"""Which components a certificate renewal restarts: only those that present or check it."""

from __future__ import annotations

from operatorlab.cluster.local import _presenting


def test_a_client_certificate_restarts_only_its_component():
    assert _presenting({"kube-scheduler": "expired"}) == ["kube-scheduler"]
    assert _presenting({"kwok": "expired", "kube-controller-manager": "expired"}) == ["kwok",
                                                                                        "kube-controller-manager"]


def test_the_users_own_certificate_restarts_nothing():
    assert _presenting({"admin": "expired"}) == []


def test_the_ca_or_the_serving_certificate_restarts_every_component_but_etcd():
    for renewed in ({"ca": "expired"}, {"apiserver": "no Subject Key Identifier"}):
        assert _presenting(renewed) == ["kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver"]
