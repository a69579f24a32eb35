"""The take-over lab grades behaviour: what is not the fix fails its check.

tests/labs/test_labs.py proves the lab's protocol (its checks pass after setup, fail after
inject, pass after the reference fix; reset leaves nothing). Here: the ways to make the
symptom go away without fixing the operator, each caught by a behavioural check.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operatorlab.cluster import Cluster, current
from operatorlab.faults.variants import ReplaceFunction, apply
from operatorlab.labs import registry, runner
from tests.labs.clusters import ON_EXISTING_CLUSTER, own_cluster

# A cluster of its own beside the other Tenant labs' (see conftest.py): these bypasses take
# minutes, and a Tenant operator must not meet another on one cluster.
pytestmark = pytest.mark.xdist_group("tenant-operator" if ON_EXISTING_CLUSTER else "labs-take-over")


@pytest.fixture(scope="module")
def take_over_cluster(tmp_path_factory) -> Iterator[Cluster]:
    if ON_EXISTING_CLUSTER:
        yield current()
        return
    yield from own_cluster("labs-take-over", tmp_path_factory)

FOREIGN = "a namespace the operator did not create survives a Tenant of its name (create, update, delete)"
FREE = "a Tenant of a free name still converges (create, update, delete)"

# Skips every existing object, its own included: nothing foreign is touched, but nothing of its own is updated.
TAKES_NOTHING = '''\
def ownership(meta: Mapping[str, Any], owner: kopf.Body) -> str:
    """Whose an existing object is: never ours."""
    return TAKEN
'''

# Trusts the operator's label as proof of ownership: anyone can set a label.
TRUSTS_THE_LABEL = '''\
def ownership(meta: Mapping[str, Any], owner: kopf.Body) -> str:
    """Whose an existing object is: a namespace carrying our label is taken to be handed over."""
    refs = meta.get("ownerReferences") or []
    if any(ref.get("uid") == owner.metadata.uid for ref in refs):
        return OURS
    if (meta.get("labels") or {}).get(TENANT_LABEL) == owner.metadata.name:
        return ADOPTABLE
    return TAKEN
'''

# Claims nothing it did not make, but puts its quota into the namespace all the same.
QUOTA_ANYWAY = '''\
def reconcile_tenant(name, spec, *, uid, core=None, report=None):
    """The namespace is refused as taken; the quota goes in regardless."""
    namespace, cpu = namespace_name(name), cpu_quota(spec)
    core = CoreV1Api() if core is None else core
    report = _ignore if report is None else report
    owner = owner_body(name, uid)
    try:
        _ensure_namespace(core, owner, report)
    except NameTaken:
        _ensure_quota(core, owner, cpu, report)
        raise
    _ensure_quota(core, owner, cpu, report)
    return {"namespace": namespace, "cpuQuota": cpu, "phase": "Ready"}
'''


@pytest.fixture
def lab(tmp_path, take_over_cluster, nothing_left) -> Iterator:
    cls = registry.get("take-over")
    # Its own work folder (the learner's copy of the operator goes there), not the checkout's
    # labs/take-over/: test_labs.py runs the same lab at the same time on another worker.
    (tmp_path / "labs" / cls.id).mkdir(parents=True)
    ctx = runner.context(take_over_cluster, state_dir=tmp_path / "state", workdir_root=tmp_path / "labs")
    lab = runner.create(cls, ctx)
    try:
        runner.start(lab)
        yield lab
    finally:
        recorded = lab.record
        runner.reset(lab)
        nothing_left(lab, recorded)


def failing(lab) -> list[str]:
    return [c.name for c in runner.check(lab) if not c.passed]


def test_the_fault_shows_in_the_victim_and_in_the_probe(lab):
    assert failing(lab)[:2] == ["the user's namespace tenant-lab-to-victim and its ConfigMap precious are theirs",
                                FOREIGN]


def test_giving_the_namespace_back_by_hand_is_not_a_fix(lab):
    lab.give_back()
    assert failing(lab) == [FOREIGN]


def test_stopping_the_operator_is_not_a_fix(lab):
    lab.give_back()
    lab.operator().stop()
    assert FREE in failing(lab)  # (and the probe says the operator did not react: is it running?)


def test_an_operator_that_skips_every_existing_object_is_not_a_fix(lab):
    lab.learner_copy.write_text(apply(lab.original(), [ReplaceFunction("ownership", TAKES_NOTHING)]))
    lab.give_back()
    assert failing(lab) == [FREE]  # check restarts the operator from the edited copy: updates never converge


def test_an_operator_that_trusts_its_own_label_is_not_a_fix(lab):
    lab.learner_copy.write_text(apply(lab.original(), [ReplaceFunction("ownership", TRUSTS_THE_LABEL)]))
    lab.give_back()
    assert failing(lab) == [FOREIGN]  # the probe namespace that carries the label is taken over


def test_an_operator_that_refuses_the_namespace_but_fills_it_is_not_a_fix(lab):
    lab.learner_copy.write_text(apply(lab.original(), [ReplaceFunction("reconcile_tenant", QUOTA_ANYWAY)]))
    lab.give_back()
    assert FOREIGN in failing(lab)  # a ResourceQuota appeared in someone else's namespace
