"""Lesson 09: a field that is set once, made so by a CEL transition rule, graded by the API server itself.

The learner's ``RULES`` go onto ``spec`` of a fresh copy of the shipped Tenant CRD (an API group
of the check's own) that has one more field, ``spec.region``. The check creates real Tenants
of that copy, with a region drawn at random and without one, and updates them: a change
elsewhere in the spec must pass, a changed or removed region must be refused with the
learner's message, and a region may be given once to a Tenant that had none.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from types import ModuleType

from operatorlab import crds
from operatorlab.exercises import Exercise
from operatorlab.grading import Check

REGION = {"type": "string", "description": "Where the tenant's data lives. Set once: moving it is a migration."}


class ImmutableField(Exercise):
    lesson = "09"
    title = "RULES: spec.region is set once (a transition rule), and every other change still passes"
    subject = "RULES"
    budget = 30.0
    hints = (
        "A rule about a change needs the value before the change: CEL gives it to a rule as oldSelf, on updates "
        "only. Where must the rule sit to see a region that was removed, and what of a Tenant that had none?",
        "On spec, self and oldSelf are the whole new and old spec, and has(x.region) says whether a region is set. "
        "A rule comparing the whole spec refuses every update; compare the region only. A Tenant without a region "
        "may get one: only an old region must stay as it was.",
        "Shape: {'rule': '!has(oldSelf.region) || has(self.region) && self.region == oldSelf.region', "
        "'message': 'region is immutable: it cannot be changed or removed once set'}.",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        rules = learner.RULES
        if wrong := crds.rules_problem(rules):
            yield Check("RULES is a list of rules, each with a message", False, wrong)
            return
        crd = crds.copy_to_group(crds.shipped("tenant.yaml"), f"ex09i-{uuid.uuid4().hex[:8]}.hedronite.io")
        spec = crds.spec_schema(crd)
        spec["properties"]["region"] = REGION
        spec["x-kubernetes-validations"] = rules
        draw = random.Random()
        region, other = (f"{place}-{draw.randint(1, 9)}" for place in draw.sample(["eu", "us", "ap", "sa"], 2))
        messages = [r["message"] for r in rules]

        def refused_in_words(why: str | None) -> bool:
            return why is not None and any(m in why for m in messages)

        def unworded(why: str | None, accepted: str) -> str:
            """Evidence for a refusal property: what happened, unless it was refused in the learner's words."""
            if why is None:
                return accepted
            return "" if refused_in_words(why) else f"refused, without your message: {why}"

        try:
            installed = crds.install_check(self.api, crd)
            yield installed
            if not installed.passed:
                return
            created = {name: crds.create(self.api, crd, name, spec)
                       for name, spec in (("placed", {"cpuQuota": "1", "region": region}),
                                          ("unplaced", {"cpuQuota": "1"}))}
            yield Check(f"a Tenant is created with a region ({region!r}) and without one",
                        all(why is None for why in created.values()),
                        "; ".join(f"{name}: {why}" for name, why in created.items() if why))
            if any(created.values()):
                return
            why = crds.patch_spec(self.api, crd, "placed", {"cpuQuota": str(draw.randint(2, 9)),
                                                             "displayName": f"Team {draw.randint(1, 99)}"})
            yield Check("a change elsewhere in the spec (cpuQuota, displayName) is accepted", why is None, why or "")
            why = crds.patch_spec(self.api, crd, "placed", {"region": other})
            yield Check(f"changing the region ({region!r} to {other!r}) is refused, in your words",
                        refused_in_words(why), unworded(why, "accepted: the region moved"))
            why = crds.patch_spec(self.api, crd, "placed", {"region": None})
            yield Check("removing the region is refused, in your words", refused_in_words(why),
                        unworded(why, "accepted: the region is gone"))
            why = crds.patch_spec(self.api, crd, "unplaced", {"region": other})
            yield Check("a Tenant without a region may be given one", why is None, why or "")
        finally:
            crds.remove(self.api, crd, wait=False)
