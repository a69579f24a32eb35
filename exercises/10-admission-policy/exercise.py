"""Lesson 10: a ValidatingAdmissionPolicy that every Tenant names its team, graded by the API server itself.

The learner's ``policy(group, resource)`` returns the spec of a ValidatingAdmissionPolicy and
``VALIDATION_ACTIONS`` what its binding does on a failed validation. The check installs both on
a fresh copy of the Tenant CRD (a group of its own) with a binding of its own that adds one
constraint: only objects carrying a label of this grading (``matchResources.objectSelector``), so
however broad the learner's match, nothing but the check's own objects can be refused. It then
sends real creates and updates: Tenants with a team label pass, without one (created, or the label
removed by an update) are refused in the learner's words, and objects of other resources carrying
the grading's label (a ConfigMap, a Tenant copy of another group) are left alone.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from kubernetes import client

from operatorlab import admission, crds
from operatorlab.exercises import Exercise
from operatorlab.grading import Check

TEAM = "hedronite.io/team"
RUN = "ex10.hedronite.io/grading"
SENTINEL = "ex10.hedronite.io/sentinel"  # the check's own probe: judged by its own policy only


class AdmissionPolicy(Exercise):
    lesson = "10"
    title = "policy(): a ValidatingAdmissionPolicy that refuses a Tenant without a team label, and nothing else"
    subject = "policy"
    budget = 30.0
    xdist_group = "admission"
    hints = (
        "A policy is three things: what it matches (matchConstraints), what must hold (validations, in CEL, on "
        "`object`), and, in the binding, what a failed validation does (validationActions). Which of the three "
        "lets a Tenant without a team through?",
        "Match only the Tenants: apiGroups [group], apiVersions ['v1'], resources [resource], and both CREATE and "
        "UPDATE (a label can be removed later). A label is a key of object.metadata.labels, which may be absent "
        "(has()). Only Deny refuses; Warn and Audit let the request through.",
        "Shape: matchConstraints {'resourceRules': [{'apiGroups': [group], 'apiVersions': ['v1'], 'operations': "
        "['CREATE', 'UPDATE'], 'resources': [resource]}]}, a validation {'expression': \"has(object.metadata.labels) "
        "&& 'hedronite.io/team' in object.metadata.labels\", 'message': ...}, and VALIDATION_ACTIONS = ['Deny'].",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        grading = uuid.uuid4().hex[:8]
        crd = crds.copy_to_group(crds.shipped("tenant.yaml"), f"ex10p-{grading}.hedronite.io")
        other = crds.copy_to_group(crds.shipped("tenant.yaml"), f"ex10o-{grading}.hedronite.io")
        group, _, plural = crds.coordinates(crd)
        spec = learner.policy(group, plural)
        actions = getattr(learner, "VALIDATION_ACTIONS", ["Deny"])
        messages = [v.get("message", "") for v in (spec.get("validations") or []) if isinstance(v, dict)]
        ours = {RUN: grading}
        name, sentinel = f"ex10-{grading}", f"ex10-{grading}-sentinel"
        draw = random.Random()
        team = f"team-{draw.randint(1, 999)}"
        core = client.CoreV1Api(self.api)
        made: list[tuple[str, str]] = []

        def refused_in_words(answer: admission.Answer) -> bool:
            return not answer.accepted and any(m and m in answer.message for m in messages)

        def evidence(answer: admission.Answer) -> str:
            if answer.accepted:
                return "accepted"
            return "" if refused_in_words(answer) else f"refused, but not with your message: {answer.message}"

        try:
            crds.install(self.api, crd)
            try:
                for body in (admission.policy(name, spec), admission.binding(name, name, actions, match_resources={
                        "objectSelector": {"matchLabels": ours,
                                           "matchExpressions": [{"key": SENTINEL, "operator": "DoesNotExist"}]}})):
                    admission.apply(self.api, body)
                    made.append((body["kind"], name))
            except client.ApiException as e:
                yield Check("the API server takes your policy and its binding (the CEL compiles)", False,
                            crds.refusal(e))
                return
            yield Check("the API server takes your policy and its binding (the CEL compiles)", True)
            for body in (admission.policy(sentinel, {
                    "matchConstraints": {"resourceRules": [admission.resource_rule(crd)]},
                    "validations": [{"expression": "!object.metadata.name.startsWith('sentinel-')",
                                     "message": "sentinel"}]}),
                    admission.binding(sentinel, sentinel, ["Deny"],
                                      match_resources={"objectSelector": {"matchLabels": {**ours, SENTINEL: "yes"}}})):
                admission.apply(self.api, body)
                made.append((body["kind"], sentinel))
            if not admission.in_force(lambda: admission.create(self.api, crd, "sentinel-probe", {"cpuQuota": "1"},
                                                               labels={**ours, SENTINEL: "yes"}), "sentinel"):
                yield Check("the API server enforces the check's own policy", False, "not within 30 s")
                return

            labelled = {**ours, TEAM: team}
            answers = {
                "create": admission.create(self.api, crd, "probe", {"cpuQuota": "1"}, labels=labelled),
                "create, stored": admission.create(self.api, crd, "kept", {"cpuQuota": "1"}, labels=labelled,
                                                   dry_run=False),
            }
            if answers["create, stored"].accepted:
                answers["update of its quota"] = admission.patch(self.api, crd, "kept", {"spec": {"cpuQuota": "2"}})
            wrong = {what: a.message for what, a in answers.items() if not a.accepted}
            yield Check(f"a Tenant with a team label ({TEAM}: {team}) is created and updated", not wrong,
                        "; ".join(f"{what}: {why}" for what, why in wrong.items()))
            if wrong:
                return

            unlabelled = admission.create(self.api, crd, "no-team", {"cpuQuota": "1"}, labels=ours)
            yield Check("a Tenant without a team label is refused, in your words", refused_in_words(unlabelled),
                        evidence(unlabelled))
            removed = admission.patch(self.api, crd, "kept", {"metadata": {"labels": {TEAM: None}}})
            yield Check("an update that removes the team label is refused, in your words", refused_in_words(removed),
                        evidence(removed))

            untouched: dict[str, Any] = {}
            untouched["a ConfigMap"] = admission.send(lambda: core.create_namespaced_config_map(
                "default", {"metadata": {"name": f"ex10-{grading}", "labels": ours}}, dry_run="All"))
            crds.install(self.api, other)
            untouched[f"a {other['spec']['names']['kind']} of another group"] = admission.create(
                self.api, other, "probe", {"cpuQuota": "1"}, labels=ours)
            hit = {what: a.message for what, a in untouched.items() if not a.accepted}
            yield Check("objects of other resources (with the same labels, no team) are left alone", not hit,
                        "; ".join(f"{what} refused: {why}" for what, why in hit.items()))
        finally:
            for kind, made_name in reversed(made):
                admission.delete(self.api, kind, made_name)
            crds.remove(self.api, crd, wait=False)
            crds.remove(self.api, other, wait=False)
