"""Lesson 09: a CEL rule that says what the Tenant's ``cpuQuota`` means, graded by the API server itself.

The learner's ``RULES`` (a list of ``x-kubernetes-validations`` entries) goes onto
``spec.cpuQuota`` of a fresh copy of the shipped Tenant CRD, in an API group of the check's
own, with the field's ``pattern`` and ``minimum`` taken out: the rules alone decide. The check
then sends real creates (server-side dry runs: validated in full, stored nowhere) of quotas
a ResourceQuota takes and of quotas it does not, some of them drawn at random, so a list of
the check's values cannot pass.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from types import ModuleType

from operatorlab import crds
from operatorlab.exercises import Exercise
from operatorlab.grading import Check

#: Kubernetes CPU quantities: integers, decimals, millicores, and the exponent form the
#: shipped pattern refuses.
GOOD = (2, 0, "2", "500m", "2.5", "1e3", "0.5")
#: Not a quantity, or a negative one.
BAD = ("lots", "2 cores", "", "-1", -1, "1,5", "2.5.1")


class CelRule(Exercise):
    lesson = "09"
    title = "RULES: a CEL rule on cpuQuota that accepts every CPU quantity and refuses the rest, in your words"
    subject = "RULES"
    budget = 30.0
    hints = (
        "The pattern was a guess at what a quantity looks like. The API server's CEL knows Kubernetes quantities "
        "itself: which of its functions says whether a string is one? And an integer is already a number.",
        "cpuQuota is int-or-string, so self is an int or a string: branch on type(self). For a string, the "
        "Kubernetes CEL quantity library has isQuantity(s) and quantity(s), whose value can be compared with "
        "isLessThan(quantity('0')). Give the rule a message: it is what kubectl prints on a refusal.",
        "Shape: {'rule': \"type(self) == int ? self >= 0 : isQuantity(self) && !quantity(self).isLessThan("
        "quantity('0'))\", 'message': 'cpuQuota must be a CPU quantity, such as 2, 500m or 1e3'}.",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        rules = learner.RULES
        if wrong := crds.rules_problem(rules):
            yield Check("RULES is a list of rules, each with a message", False, wrong)
            return
        crd = crds.copy_to_group(crds.shipped("tenant.yaml"), f"ex09-{uuid.uuid4().hex[:8]}.hedronite.io")
        quota = crds.spec_schema(crd)["properties"]["cpuQuota"]
        quota.pop("pattern", None)
        quota.pop("minimum", None)
        quota["x-kubernetes-validations"] = rules
        try:
            installed = crds.install_check(self.api, crd)
            yield installed
            if not installed.passed:
                return
            draw = random.Random()
            good = [*GOOD, draw.randint(1, 64), f"{draw.randint(1, 999)}m",
                    f"{draw.randint(1, 9)}.{draw.randint(1, 9)}"]
            refused = {value: why for value in good
                       if (why := crds.create(self.api, crd, "probe", {"cpuQuota": value}, dry_run=True))}
            yield Check(f"every CPU quantity is accepted ({', '.join(map(repr, good))})", not refused,
                        "; ".join(f"{v!r} refused: {why}" for v, why in refused.items()))
            bad = [*BAD, f"{draw.choice(['many', 'half', 'some', 'two'])}-{draw.randint(1, 99)}", -draw.randint(2, 64)]
            messages = [r["message"] for r in rules]
            answers = {value: crds.create(self.api, crd, "probe", {"cpuQuota": value}, dry_run=True) for value in bad}
            accepted = [v for v, why in answers.items() if why is None]
            silent = [v for v, why in answers.items() if why is not None and not any(m in why for m in messages)]
            yield Check(f"non-quantities and negative values are refused ({', '.join(map(repr, bad))})",
                        not accepted, f"accepted: {', '.join(map(repr, accepted))}" if accepted else "")
            yield Check("each refusal says your message", len(accepted) < len(bad) and not silent,
                        "; ".join(f"{v!r}: {answers[v]}" for v in silent) if silent
                        else "" if len(accepted) < len(bad) else "nothing was refused, so no message was seen")
        finally:
            crds.remove(self.api, crd, wait=False)
