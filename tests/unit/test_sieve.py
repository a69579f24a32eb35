"""The pure parts of lesson 11's Sieve demos (operatorlab.sieve): names and the children of a parent."""

from __future__ import annotations

from operatorlab import sieve


def test_a_deterministic_child_name_is_a_name_the_server_can_refuse_twice() -> None:
    assert sieve.child_name("web", deterministic=True) == {"name": "web-child"}


def test_a_generated_child_name_is_only_a_prefix() -> None:
    assert sieve.child_name("web", deterministic=False) == {"generate_name": "web-child-"}


def test_children_of_counts_only_the_parents_own_labelled_objects() -> None:
    def cm(name: str, labels: dict | None) -> dict:
        return {"metadata": {"name": name, "labels": labels}}

    objects = [cm("b", {sieve.PARENT_LABEL: "web"}), cm("a", {sieve.PARENT_LABEL: "web"}),
               cm("other", {sieve.PARENT_LABEL: "db"}), cm("plain", None), cm("unlabelled", {"x": "y"})]
    assert sieve.children_of(objects, "web") == ["a", "b"]
    assert sieve.children_of(objects, "none") == []
