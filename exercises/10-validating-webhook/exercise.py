"""Lesson 10: a kopf validating webhook that caps a Tenant's CPU quota, graded through the real API server.

The learner's ``validate_quota`` is served by kopf in a process of its own
(:class:`operatorlab.admission.Webhook`: ``@kopf.on.validate`` for the resource of a fresh copy of
the Tenant CRD, a ``kopf.WebhookServer`` on a free port with a certificate of its own). The check
writes the ``ValidatingWebhookConfiguration`` (that copy's resource only, ``failurePolicy: Fail``)
and sends real creates (dry runs: admitted in full, stored nowhere) of quotas at and below the cap,
some drawn at random, accepted; above it, refused naming the quota asked for; and an update that
raises a stored Tenant's quota past the cap, refused.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from operatorlab import admission, crds
from operatorlab.exercises import Exercise
from operatorlab.grading import Check

CAP = 8  # cores
HANDLER = "quota-cap"
FUNCTION = "validate_quota"
SENTINEL = "ex10.hedronite.io/sentinel"  # the check's own probe: sent to the check's own handler only


class ValidatingWebhook(Exercise):
    lesson = "10"
    title = "validate_quota: a kopf webhook refuses a Tenant asking for more than 8 CPUs, and says why"
    subject = FUNCTION
    budget = 30.0
    xdist_group = "admission"
    hints = (
        "kopf calls your handler for every create and update it is sent, with the object's spec: returning "
        "accepts it, raising kopf.AdmissionError refuses it, and its message is what the user reads. How do you "
        "compare '8000m', '9' and 12 with the cap of 8 CPUs?",
        "cpuQuota is an int or a string in Kubernetes quantity form: kubernetes.utils.parse_quantity(str(q)) gives "
        "a Decimal of cores ('500m' is 0.5). Refuse only above the cap (8 itself is allowed), and put the quota "
        "asked for in the message.",
        "Shape: asked = spec.get('cpuQuota'); if parse_quantity(str(asked)) > MAX_CPU: raise kopf.AdmissionError("
        "f'cpuQuota {asked} is above the cap of {MAX_CPU} CPUs', code=422).",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        grading = uuid.uuid4().hex[:8]
        crd = crds.copy_to_group(crds.shipped("tenant.yaml"), f"ex10w-{grading}.hedronite.io")
        path = Path(learner.__file__ or "")
        configuration = f"ex10-{grading}"
        draw = random.Random()
        webhook: admission.Webhook | None = None
        try:
            crds.install(self.api, crd)
            webhook = admission.Webhook(path, {HANDLER: FUNCTION}, crd, kubeconfig=self.kubeconfig_path)
            try:
                webhook.start()
            except RuntimeError as e:
                yield Check("kopf serves your handler (@kopf.on.validate, a WebhookServer with TLS)", False, str(e))
                return
            admission.apply(self.api, admission.webhook_configuration(configuration, [
                admission.webhook(f"{name}.{configuration}.hedronite.io", webhook.url(name), webhook.ca_bundle, crd,
                                  object_selector={"matchExpressions": [{"key": SENTINEL, "operator": operator}]})
                for name, operator in ((HANDLER, "DoesNotExist"), ("sentinel", "Exists"))]))
            served = admission.in_force(lambda: admission.create(
                self.api, crd, "sentinel-probe", {"cpuQuota": "1"}, labels={SENTINEL: "yes"}), "sentinel")
            yield Check("kopf serves your handler (@kopf.on.validate, a WebhookServer with TLS)", served,
                        "" if served else f"the API server got no answer in 30 s. {admission.UNREACHABLE} "
                                          f"kopf's log ends:\n{webhook.log()[-600:]}")
            if not served:
                return

            fine = list(dict.fromkeys([1, "2", "500m", "8", 8, "8000m", draw.randint(1, CAP),
                                       f"{draw.randint(1, CAP * 1000)}m"]))
            answers = {q: admission.create(self.api, crd, "probe", {"cpuQuota": q}) for q in fine}
            refused = {q: a.message for q, a in answers.items() if not a.accepted}
            yield Check(f"quotas up to the cap are accepted ({', '.join(map(repr, fine))})", not refused,
                        "; ".join(f"{q!r}: {why}" for q, why in refused.items()))

            above = list(dict.fromkeys([  # without repeats: a drawn 9 is the fixed 9 again
                9, "12", "8001m", "16", draw.randint(CAP + 1, 64), f"{draw.randint(CAP + 1, 64)}",
                f"{draw.randint(CAP * 1000 + 1, 64000)}m"]))
            answers = {q: admission.create(self.api, crd, "probe", {"cpuQuota": q}) for q in above}
            accepted = [q for q, a in answers.items() if a.accepted]
            yield Check(f"quotas above the cap are refused ({', '.join(map(repr, above))})", not accepted,
                        f"accepted: {', '.join(map(repr, accepted))}" if accepted else "")
            unnamed = {q: a.message for q, a in answers.items()  # the handler's words: after the webhook's name
                       if not a.accepted and str(q) not in a.message.split("denied the request:", 1)[-1]}
            yield Check("each refusal names the quota asked for", len(accepted) < len(above) and not unnamed,
                        "; ".join(f"{q!r}: {why}" for q, why in unnamed.items()) if unnamed
                        else "" if len(accepted) < len(above) else "nothing was refused, so no message was seen")

            stored = admission.create(self.api, crd, "kept", {"cpuQuota": "2"}, dry_run=False)
            raised = f"{draw.randint(CAP + 1, 64)}"
            update = admission.patch(self.api, crd, "kept", {"spec": {"cpuQuota": raised}}) if stored.accepted \
                else stored
            yield Check(f"an update raising a stored Tenant's quota from 2 to {raised} is refused",
                        stored.accepted and not update.accepted,
                        "accepted: the quota was raised" if update.accepted
                        else "" if stored.accepted else f"the Tenant of quota 2 was not created: {stored.message}")
        finally:
            admission.delete(self.api, "ValidatingWebhookConfiguration", configuration)
            if webhook is not None:
                webhook.stop()
            crds.remove(self.api, crd, wait=False)
