"""Every exercise on the real cluster: its starter (as the notebook stores it) fails with words a
learner can act on, its reference solution passes, and the mistakes a learner makes each fail.

The mistakes are named per exercise in ``MISTAKES``: each is the reference solution with one
edit (a textual replacement), so what fails is exactly that edit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from operatorlab import paths
from operatorlab.exercises import discover, grade
from tests.exercises.conftest import OPERATOR_GROUPS, group_of

# The capstone's starter is files, not a cell, and its check is `operatorlab verify`: both are
# proven in tests/verify/test_verify.py (the scaffold fails fast, the reference passes, each
# broken copy fails on its property), on a cluster of their own.
CAPSTONE = "08-capstone"
EXERCISES = {i: cls for i, cls in discover().items() if i != CAPSTONE}

# The rules of the lesson 09 solutions, as their source spells them: a mistake replaces one.
QUANTITY_RULE = "\"type(self) == int ? self >= 0 : isQuantity(self) && !quantity(self).isLessThan(quantity('0'))\""
REGION_RULE = '"!has(oldSelf.region) || has(self.region) && self.region == oldSelf.region"'
# Lesson 10's: the policy's expression, its match, and the webhook's comparison.
TEAM_RULE = "\"has(object.metadata.labels) && 'hedronite.io/team' in object.metadata.labels\""
TENANTS_ONLY = ('"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], '
                '"resources": [resource]')
OVER_CAP = "if parse_quantity(str(asked)) > MAX_CPU:"
# Lesson 14's migration: the rewrite of one object, and the record of it in the CRD's status.
REWRITE = '            objects.replace_cluster_custom_object(group, storage, plural, obj["metadata"]["name"], obj)'
RECORD = '    extensions.patch_custom_resource_definition_status(crd_name, {"status": {"storedVersions": [storage]}})'

# exercise id -> {mistake: (text in the solution, replacement)}
MISTAKES: dict[str, dict[str, tuple[str, str]]] = {
    "01-idempotent-quota": {
        "compares strings, not amounts": ("parse_quantity(hard[key]) == parse_quantity(value)", "hard[key] == value"),
        "always patches": ("    if all(key in hard and", "    if False and all(key in hard and"),
        "deletes and re-creates instead of patching": (
            '    core.patch_namespaced_resource_quota(NAME, namespace, {"spec": {"hard": want}})',
            '    core.delete_namespaced_resource_quota(NAME, namespace)\n'
            '    core.create_namespaced_resource_quota(namespace, '
            '{"metadata": {"name": NAME}, "spec": {"hard": want}})'),
        "creates blindly": ("quota = core.read_namespaced_resource_quota(NAME, namespace)",
                            'quota = core.create_namespaced_resource_quota(namespace, '
                            '{"metadata": {"name": NAME}, "spec": {"hard": want}})'),
    },
    "01-survive-api-errors": {
        "never backs off": ("delay = min(delay * 2, max_delay)", "delay = interval"),
        "catches only API errors (dies on a cut connection)": ("except Exception as e:", "except ApiException as e:"),
        "sleeps through stop": ("stop.wait(wait)  # returns", '__import__("time").sleep(wait)  # returns'),
    },
    "02-resume-watch": {
        "always relists": ("        error = None\n", "        error, relist = None, True\n"),
        "bookmarks ignored": (
            "                resource_version = event.resource_version or resource_version  # a BOOKMARK's too",
            '                if event.type != "BOOKMARK":\n'
            "                    resource_version = event.resource_version or resource_version  # a BOOKMARK's too"),
        "a 410 resumed, not relisted": ("relist = error.code != 429", "relist = False"),
    },
    "02-level-triggered": {
        "acts on the event's object": ("tenant = self.get_tenant(event.name)", "tenant = event.object"),
        "a list is not an event": (
            '        for obj in objects:  # a LIST is the state as it is: reconcile every Tenant in it\n'
            '            self.reconciler.sync(obj["metadata"]["name"], obj)\n', ""),
        "forgets the Tenants that left the list": ("for name in sorted(self.known - names):", "for name in []:"),
    },
    "02-changes-since": {
        "deletions left out": ('changed[event.name] = None if event.type == "DELETED" else event.resource_version',
                               "changed[event.name] = event.resource_version"),
        "the bookmark ignored": ("return changed, event.resource_version  # the server",
                                 "continue  # the server"),
        "a 410 taken for no change": ("                    return None  # that history is gone",
                                      "                    return {}, resource_version  # that history is gone"),
    },
    "03-process-next-work-item": {
        "never done": ("        queue.done(key)", "        pass"),
        "retried at once, not rate limited": ("queue.add_rate_limited(key)", "queue.add(key)"),
        "backoff never forgotten": ("        queue.forget(key)", "        pass"),
        "a failure dropped, not retried": ("queue.add_rate_limited(key)", "pass"),
        "keeps going after shutdown": ("return False  #", "return True  #"),
    },
    "03-rate-limiter": {
        "one count for all keys": ("self._failures.get(item, 0)\n            self._failures[item] =",
                                   'self._failures.get("all", 0)\n            self._failures["all"] ='),
        "no cap": ("min(self.base_delay * 2.0**failures, self.max_delay)", "self.base_delay * 2.0**failures"),
        "forget forgets nothing": ("            self._failures.pop(item, None)", "            pass"),
        "overflows": ("except OverflowError:", "except ZeroDivisionError:"),
    },
    "04-delete-handler": {
        "a 404 is an error": ("if e.status in (404, 409):", "if e.status == 409:"),
        "deletes what is not its own": (
            "        if not _owned_by_tenant(meta, name, uid):\n            return False\n", ""),
    },
    "05-service-apply": {
        "no owner reference": ('"metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]}',
                               '"metadata": {"name": name, "namespace": namespace}'),
        "the port never follows the spec": ('(website.get("spec") or {}).get("port", 80)', "80"),
        "a merge patch instead of an apply": (
            "core.patch_namespaced_service(name, namespace, service, field_manager=MANAGER, force=True,\n"
            "                                  _content_type=APPLY_PATCH)",
            "core.patch_namespaced_service(name, namespace, service)"),
    },
    "04-survive-downtime": {
        "no on.resume": ('@kopf.on.resume(GROUP, VERSION, PLURAL, id="reconcile")\n', ""),
        "an Event on every run": (
            '        message=f"namespace {status[\'namespace\']} and its quota match the Tenant",\n    )\n',
            '        message=f"namespace {status[\'namespace\']} and its quota match the Tenant",\n    )\n'
            '    post_event("Reconciled", f"namespace {status[\'namespace\']} matches the Tenant")\n'),
    },
    "05-ready-condition": {
        "Ready as soon as the Deployment exists": ('ready = rollout["rollout"] == "Complete"', "ready = True"),
        "observedGeneration from the Deployment": (
            'generation=website["metadata"]["generation"]',
            'generation=deployment and deployment["metadata"]["generation"]'),
        "a status patch on every call": ("    if conditions != previous:", "    if True:"),
        "lastTransitionTime always now (the condition rebuilt from nothing)": (
            "        previous, ready=ready,", "        [], ready=ready,"),
    },
    "07-least-privilege": {
        "a wildcard rule": ("RULES = [", "RULES = [{'apiGroups': ['*'], 'resources': ['*'], 'verbs': ['*']},\n "),
        "namespaces not watched": ("'resources': ['namespaces'], 'verbs': ['list', 'watch']",
                                   "'resources': ['namespaces'], 'verbs': ['list']"),
        "policies cannot be created": ("'create', 'update', 'delete'", "'update', 'delete'"),
    },
    "06-route-api-errors": {
        "a 422 retried forever": ("    if status == 422:", "    if status == 0:"),
        "an outage given up on": (
            '        return kopf.TemporaryError(f"the API server is overloaded or failing ({status})", '
            'delay=retry_after(e))',
            '        return kopf.PermanentError("the API server is failing")'),
        "Retry-After ignored": ('float((e.headers or {}).get("Retry-After", DEFAULT_RETRY_DELAY))',
                                "float(DEFAULT_RETRY_DELAY)"),
        "no delay: a hot loop": ("return max(1.0, float(", "return 0 * (float("),
    },
    "06-drift-timer": {
        "no floor: 0.01 s is taken as it is": ("return max(seconds, MIN_RESYNC_SECONDS)", "return seconds"),
        "the timer heals nothing (drift left to events)": (
            "        _reconcile_and_record(name, spec, body, patch)  # noqa: F821 - the operator's own",
            "        pass"),
        "a timestamp written every resync": (
            "        _reconcile_and_record(name, spec, body, patch)  # noqa: F821 - the operator's own",
            "        _reconcile_and_record(name, spec, body, patch)  # noqa: F821\n"
            "        patch.status[\"lastResync\"] = _now()  # noqa: F821"),
    },
    "07-hung-handler": {
        "no timeout: waits for ever": (", _request_timeout=REQUEST_TIMEOUT)", ")"),
        "an absurd 1 ms timeout": ("REQUEST_TIMEOUT = (1.0, 1.0)", "REQUEST_TIMEOUT = (0.001, 0.001)"),
        "the timeout escapes as an urllib3 error": ("except urllib3.exceptions.HTTPError as e:",
                                                     "except TimeoutError as e:"),
    },
    "09-cel-rule": {
        "refuses everything (false)": (QUANTITY_RULE, '"false"'),
        "accepts everything (true)": (QUANTITY_RULE, '"true"'),
        "the old pattern, in CEL (refuses 1e3)": (
            QUANTITY_RULE, "\"type(self) == int ? self >= 0 : self.matches('^([0-9]+([.][0-9]{1,3})?|[0-9]+m)$')\""),
        "negative quantities let through": (" && !quantity(self).isLessThan(quantity('0'))", ""),
        "no message: the server's default words": (
            '        "message": "cpuQuota must be a CPU quantity, such as 2, 500m or 1e3",\n', ""),
    },
    "09-immutable-field": {
        "refuses everything (false)": (REGION_RULE, '"false"'),
        "accepts everything (true)": (REGION_RULE, '"true"'),
        "refuses every update (the whole spec immutable)": (REGION_RULE, '"self == oldSelf"'),
        "a region can never be added later": (REGION_RULE, '"self.region == oldSelf.region"'),
        "removal let through": (
            REGION_RULE, '"!has(oldSelf.region) || !has(self.region) || self.region == oldSelf.region"'),
    },
    "10-admission-policy": {
        "accepts everything (true)": (TEAM_RULE, '"true"'),
        "refuses everything (false)": (TEAM_RULE, '"false"'),
        "Warn instead of Deny": ('VALIDATION_ACTIONS = ["Deny"]', 'VALIDATION_ACTIONS = ["Warn"]'),
        "Audit instead of Deny": ('VALIDATION_ACTIONS = ["Deny"]', 'VALIDATION_ACTIONS = ["Audit"]'),
        "matches every resource": (
            TENANTS_ONLY, TENANTS_ONLY.replace("[group]", '["*"]').replace('["v1"]', '["*"]').replace(
                "[resource]", '["*"]')),
        "Tenants of every group": (TENANTS_ONLY, TENANTS_ONLY.replace("[group]", '["*"]')),
        "creates only (the label removed later)": (TENANTS_ONLY, TENANTS_ONLY.replace(', "UPDATE"', "")),
    },
    "10-validating-webhook": {
        "refuses everything": (OVER_CAP, "if True:"),
        "the cap itself refused (>=)": (OVER_CAP, OVER_CAP.replace(" > ", " >= ")),
        "compares strings, not quantities": (OVER_CAP, "if str(asked) > str(MAX_CPU):"),
        "no message": ('kopf.AdmissionError(f"cpuQuota {asked} is above the cap of {MAX_CPU} CPUs", code=422)',
                       "kopf.AdmissionError(code=422)"),
    },
    "14-conversion": {
        "converts up only (v1 written as is)": ('        selector = spec.pop("namespaceSelector", {})\n',
                                                "        return obj\n"),
        "drops exemptNamespaces on the way down": (
            'annotations[EXEMPT] = json.dumps(spec.pop("exemptNamespaces"))', 'spec.pop("exemptNamespaces")'),
        "drops the labels": ("    obj = copy.deepcopy(obj)\n",
                             '    obj = copy.deepcopy(obj)\n    obj["metadata"].pop("labels", None)\n'),
        "renames the object": ("    obj = copy.deepcopy(obj)\n",
                               '    obj = copy.deepcopy(obj)\n    obj["metadata"]["name"] += "-" + version\n'),
    },
    "14-storage-migration": {
        "storedVersions edited, objects never rewritten": (REWRITE, "            pass"),
        "deletes and re-creates each object": (
            REWRITE,
            '            objects.delete_cluster_custom_object(group, storage, plural, obj["metadata"]["name"])\n'
            '            objects.create_cluster_custom_object(group, storage, plural, {**obj, "metadata": {\n'
            '                k: obj["metadata"][k] for k in ("name", "labels", "annotations")\n'
            '                if k in obj["metadata"]}})'),
        "objects rewritten, storedVersions left as it was": (RECORD, "    pass"),
    },
    "12-watch-children": {
        "every Deployment watched (no label filter)": (
            ', labels={"app.kubernetes.io/managed-by": "website-operator"})', ")"),
        "a timer re-applying every second instead of a watch": (
            '@kopf.on.event("apps", "v1", "deployments", '
            'labels={"app.kubernetes.io/managed-by": "website-operator"})\n',
            '@kopf.timer("example.com", "v1", "websites", interval=1.0)\n'
            "def resync(name: str, namespace: str, spec: kopf.Spec, uid: str, **_: Any) -> None:\n"
            "    reconcile_website(name, namespace, spec, uid=uid)  # noqa: F821\n\n\n"),
    },
    "12-kopfrunner-test": {
        "nothing perturbed (only the Deployment looked for)": (
            '        apps.patch_namespaced_deployment_scale("site", namespace, {"spec": {"replicas": 0}})\n', ""),
        "scaled, but the heal not waited for": (
            '        eventually(lambda: apps.read_namespaced_deployment("site", namespace).spec.replicas == REPLICAS,\n'
            '                   timeout=10, message="the Deployment scaled to 0 by hand is put back")\n', ""),
        "the operator never started": ("with KopfRunner(args, timeout=30) as runner:",
                                       'with __import__("contextlib").nullcontext() as runner:'),
    },
    "11-retry-on-conflict": {
        "a blind write (no resourceVersion)": (
            "            core.replace_namespaced_config_map(name, namespace, config_map)\n",
            "            config_map.metadata.resource_version = None\n"
            "            core.replace_namespaced_config_map(name, namespace, config_map)\n"),
        "a 409 swallowed, not retried": ("            if e.status != 409 or attempt == ATTEMPTS - 1:\n",
                                         "            if e.status == 409:\n                return\n"
                                         "            if True:\n"),
        "every error retried (a 404 too)": ("if e.status != 409 or attempt == ATTEMPTS - 1:",
                                            "if attempt == ATTEMPTS - 1:"),
    },
    "11-ssa-field-manager": {
        "force=True takes the other manager's field": ("field_manager=MANAGER,\n",
                                                        "field_manager=MANAGER, force=True,\n"),
        "the whole object read back and applied (co-owns every field)": (
            '"data": {"size": str(size)}}',
            '"data": {**(core.read_namespaced_config_map(name, namespace).data or {}), "size": str(size)}}'),
        "a merge patch instead of an apply": ("_content_type=APPLY_PATCH)",
                                              '_content_type="application/merge-patch+json")'),
    },
    "13-streaming-list": {
        "a plain LIST, not a stream": (
            "    events = watch.Watch().stream(",
            "    listed = core.list_namespaced_config_map(namespace)\n"
            "    return ({i.metadata.name: i.metadata.resource_version for i in listed.items},\n"
            "            listed.metadata.resource_version)\n"
            "    events = watch.Watch().stream("),
        "synced after 2 seconds, not at the bookmark": (
            "        for event in events:\n",
            "        for event in events:\n"
            "            if time.monotonic() - started > 2:\n"
            "                return store, resource_version\n"),
        "resumes from the last object's resourceVersion, not the bookmark's": (
            'return store, meta["resourceVersion"]  # the state', "return store, resource_version  # the state"),
    },
    "13-leader-election": {
        "no election: both copies act": ("    leaderelection.LeaderElection(election).run()", "    lead()"),
        "an absurd lease duration: the takeover misses its budget": ("        lease_duration=6,",
                                                                     "        lease_duration=300,"),
    },
    "07-failover": {
        "one priority for every replica": ("int(hashlib.sha256(pod.encode()).hexdigest()[:8], 16)", "100"),
        "kopf's default lifetime (60 s)": ("    settings.peering.lifetime = LIFETIME", "    pass"),
        "a lifetime of 1 s": ("LIFETIME = 10  #", "LIFETIME = 1  #"),
    },
}


def starter_of(exercise_id: str) -> str:
    """The starter cell of the exercise, from its lesson's notebook (tagged ``exercise``)."""
    lesson = EXERCISES[exercise_id].lesson
    notebook = next((paths.repo_root() / "notebooks").glob(f"{lesson}-*.ipynb"))
    for cell in json.loads(notebook.read_text())["cells"]:
        source = "".join(cell["source"])
        if "exercise" in cell.get("metadata", {}).get("tags", []) and source.startswith(f"%%exercise {exercise_id}\n"):
            return source.split("\n", 1)[1]  # without the magic's line
    raise AssertionError(f"{notebook.name} has no cell tagged 'exercise' starting %%exercise {exercise_id}")


# Graded through a webhook the API server calls at https://127.0.0.1:PORT: only an API server on this
# machine (our own local cluster) reaches it; minikube's or kind's runs in a container of its own.
#: Exercises whose check runs the learner's code in fresh Python processes of its own.
FRESH_INTERPRETERS = {"12-kopfrunner-test", "13-leader-election"}
LOCAL_ONLY = {"10-validating-webhook", "14-conversion", "14-storage-migration"}


def _param(exercise_id: str, *rest: str) -> pytest.param:
    group = group_of(EXERCISES[exercise_id].xdist_group)
    marks = [pytest.mark.xdist_group(group)] if group else []
    if exercise_id in LOCAL_ONLY:
        marks.append(pytest.mark.local_cluster)
    return pytest.param(exercise_id, *rest, id="-".join((exercise_id, *rest)), marks=marks)


def _kubeconfig(exercise_id: str, request: pytest.FixtureRequest) -> Path | None:
    """The cluster to grade on: a Tenant exercise's own (see conftest.py), else the session's."""
    if EXERCISES[exercise_id].xdist_group in OPERATOR_GROUPS:
        return request.getfixturevalue("exercises_cluster")
    return None


@pytest.mark.parametrize("exercise_id", [_param(i) for i in EXERCISES])
def test_the_starter_fails_and_says_why(exercise_id: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    learner = tmp_path / f"{exercise_id}.py"
    learner.write_text(starter_of(exercise_id))
    verdict = grade(exercise_id, path=learner, kubeconfig=_kubeconfig(exercise_id, request), record=False)
    assert not verdict.passed, verdict.text()
    failing = [c for c in verdict.checks if not c.passed]
    assert failing and all(c.message for c in failing), verdict.text()
    assert verdict.hint == EXERCISES[exercise_id].hints[0], "the first failure shows the vaguest hint"
    # An operator, or a fresh interpreter importing kopf and the client, takes seconds to start on a busy machine.
    limit = 45 if EXERCISES[exercise_id].xdist_group or exercise_id in FRESH_INTERPRETERS else 15
    assert verdict.seconds < limit, f"a starter fails fast, not after its budgets: {verdict.seconds:.1f} s"


@pytest.mark.parametrize("exercise_id", [_param(i) for i in EXERCISES])
def test_the_reference_solution_passes(exercise_id: str, request: pytest.FixtureRequest) -> None:
    verdict = grade(exercise_id, path=paths.repo_root() / "exercises" / exercise_id / "solution.py",
                    kubeconfig=_kubeconfig(exercise_id, request), record=False)
    assert verdict.passed, verdict.text()
    assert len(verdict.checks) >= 3, "an exercise grades several properties"


@pytest.mark.parametrize(("exercise_id", "mistake"), [_param(i, m) for i, ms in MISTAKES.items() for m in ms])
def test_each_mistake_fails(exercise_id: str, mistake: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    old, new = MISTAKES[exercise_id][mistake]
    solution = EXERCISES[exercise_id](None).solution_source()
    assert solution.count(old) == 1, f"{old!r} must occur once in the solution"
    learner = tmp_path / f"{exercise_id}.py"
    learner.write_text(solution.replace(old, new))
    # Graded up to the first failing property: that one failure is the proof.
    verdict = grade(exercise_id, path=learner, kubeconfig=_kubeconfig(exercise_id, request), record=False,
                    first_failure=True)
    assert not verdict.passed, f"{mistake}: passed\n{verdict.text()}"
    failing = [c.name for c in verdict.checks if not c.passed]
    assert not any(name.startswith("your code loads") for name in failing), f"{mistake}: did not load\n{verdict.text()}"


def test_every_exercise_has_mistakes_and_a_starter() -> None:
    assert set(MISTAKES) == set(EXERCISES)
    assert all(len(m) >= 2 for m in MISTAKES.values())
    for exercise_id in EXERCISES:  # a blank to fill, or a version with the bug the lesson is about
        starter = starter_of(exercise_id)
        assert "raise NotImplementedError" in starter or starter != EXERCISES[exercise_id](None).solution_source()
