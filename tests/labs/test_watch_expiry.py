"""The watch-expiry lab grades behaviour: the check forces the 410s itself and times a relist.

tests/labs/test_labs.py proves the lab's protocol (the variant, which re-watches from the expired
resourceVersion, fails; the lesson's rules pass). Here: ending the storm by hand and restarting
without the fix, and a "fix" that relists at once without backing off, each caught by a check.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from operatorlab.faults.variants import ReplaceFunction, apply
from operatorlab.labs import registry, runner
from tests.labs import bypasses

LAB = registry.get("watch-expiry")
# A cluster of the module's own, in an xdist group of its own (see tests/labs/bypasses.py).
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB.id))

RELISTS = "a Tenant created while every watch expires is reconciled (the controller relists)"
CALM = "the controller backs off between expired watches (no hot loop)"


def _lab_module():
    """labs/watch-expiry/lab.py as the registry loaded it: its variant's pieces."""
    return sys.modules[LAB.__module__]


@pytest.fixture(scope="module")
def lab_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB.id, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, lab_cluster, nothing_left) -> Iterator:
    yield from bypasses.started(LAB.id, lab_cluster, tmp_path, nothing_left)


def first_failing(lab) -> str | None:
    failed = [c for c in runner.check(lab, first_failure=True) if not c.passed]
    return failed[0].name if failed else None


def test_ending_the_storm_and_restarting_is_not_a_fix(lab):
    lab.proxy().clear()
    lab.restart_operator()
    assert first_failing(lab) == RELISTS  # the check's own storm: the re-watch never shows the new Tenant


def test_relisting_at_once_without_backoff_is_not_a_fix(lab):
    module = _lab_module()
    hot = module.broken_decide(lab.lesson()).replace(module.REWATCH_ON_410,
                                                    'return Decision(Next.LIST, False, 8, "410: relist at once")')
    lab.learner_copy.write_text(apply(lab.original(), [ReplaceFunction("decide", hot)]))
    assert first_failing(lab) == CALM  # it relists (the Tenant converges), a LIST and a WATCH after every 410
