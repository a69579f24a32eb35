"""The api-pressure lab grades behaviour: the check forces 429s itself and measures the retries.

tests/labs/test_labs.py proves the lab's protocol (the variant's storm fails the check, the
reference fix passes). Here: restarting without the fix, a retry loop with a short pause, and one
with a fixed pause of the length a server might ask for, each caught by the check that measures
the spacing of the refused creates at the proxy.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab.faults.variants import ReplaceFunction, apply
from operatorlab.labs import registry, runner
from tests.labs import bypasses

LAB = registry.get("api-pressure")
# A cluster of the module's own, in an xdist group of its own (see tests/labs/bypasses.py).
pytestmark = pytest.mark.xdist_group(bypasses.group(LAB.id))

POLITE = "the operator waits Retry-After before retrying a refused create"

# The loop kept, with a short pause: five tries a second, whatever the server asked for.
PAUSED_LOOP = '''\
def _get_or_create(read: Callable[[], Any], create: Callable[[], Any]) -> tuple[Any, bool]:
    """GET an object, or create it if it is missing; a busy server is asked again after a short pause."""
    import time

    try:
        return read(), False
    except ApiException as e:
        if e.status != 404:
            raise
    while True:
        try:
            return create(), True
        except ApiException as e:
            if e.status == 409:
                return read(), False
            if e.status != 429:
                raise
            time.sleep(0.2)
'''


@pytest.fixture(scope="module")
def lab_cluster(tmp_path_factory):
    yield from bypasses.cluster(LAB.id, tmp_path_factory)


@pytest.fixture
def lab(tmp_path, lab_cluster, nothing_left) -> Iterator:
    yield from bypasses.started(LAB.id, lab_cluster, tmp_path, nothing_left)


def failing(lab) -> list:
    return [c for c in runner.check(lab, first_failure=True) if not c.passed]


def test_lifting_the_pressure_and_restarting_is_not_a_fix(lab):
    lab.proxy().clear()
    lab.restart_operator()
    failed = failing(lab)
    assert [c.name for c in failed] == [POLITE]
    assert "refused with 429" in failed[0].message


def test_a_retry_loop_with_a_short_pause_is_not_a_fix(lab):
    lab.learner_copy.write_text(apply(lab.original(), [ReplaceFunction("_get_or_create", PAUSED_LOOP)]))
    assert [c.name for c in failing(lab)] == [POLITE]  # check restarts the operator from the edited copy


@pytest.mark.parametrize("pause", [1, 5])
def test_a_retry_loop_with_a_fixed_pause_is_not_a_fix(lab, pause):
    """A pause that matches one of the server's Retry-Afters misses the other: too soon, or late."""
    loop = PAUSED_LOOP.replace("time.sleep(0.2)", f"time.sleep({pause})")
    lab.learner_copy.write_text(apply(lab.original(), [ReplaceFunction("_get_or_create", loop)]))
    failed = failing(lab)
    assert [c.name for c in failed] == [POLITE]
    assert ("a fixed pause is not the server's Retry-After" if pause == 5 else "refused with 429") in failed[0].message
