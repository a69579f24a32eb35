"""The behavioural suite every operator can be graded with: seven properties, one verdict.

An operator is graded from the outside, as a user and a bad day would treat it: its CRD
is applied, an example custom resource is created, and the world is then perturbed
(the operator restarted, SIGKILLed right after each write the API server acknowledged,
a child deleted while it is down, the resource deleted, an unusable spec submitted),
and each time the suite asks whether the world converged, within a budget, and what
it cost in requests. The operator runs as ``kopf run`` in its own process, talking to
the API server through the fault proxy (:mod:`operatorlab.faults.proxy`), which both
counts its requests and kills it on cue. Nothing in the operator is hooked or mocked,
and nothing about one operator is hard-coded: its children are the objects whose owner
reference names the resource's uid (or, for an operator whose marks are labels, what
the author's selector picks).

The properties, in order (the keys select a subset, e.g. for a broken copy):

==========  ==============================================================================
crd         the CRD applies, and the API server refuses a bad object (schema or CEL)
converge    the example converges: ``Ready=True`` about its generation, children exist
resync      a resync (a restart, after SIGKILL: kopf re-runs every resume handler) writes nothing:
            no resourceVersion of the resource or a child moves, nothing is created or
            deleted (a server-side apply that changes nothing is stored as nothing)
kill        SIGKILL right after each write to a child, then restart: it converges, no
            duplicates (the resource's own writes, kopf's finalizer and the status,
            are redone by kopf whatever the operator's code: a kill there costs a
            restart and proves nothing of the operator's)
restore     a child deleted while the operator is down is back after a restart
delete      deleting the resource cleans up, and nothing stays Terminating
unusable    a spec that passes the schema but cannot work is reported (a False
            condition with a message, a Warning Event), without a retry storm
==========  ==============================================================================
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from operatorlab import paths
from operatorlab.cluster import manifests
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check, converges
from operatorlab.operators import OperatorProcess
from operatorlab.verify import world
from operatorlab.verify.world import Child, Kind

PROPERTIES: dict[str, str] = {
    "crd": "the CRD applies and the API server refuses a bad object",
    "converge": "a custom resource converges (Ready=True, children exist)",
    "resync": "a resync (restart) makes no writes",
    "kill": "SIGKILL after each write to a child, then restart: converges with no duplicates",
    "restore": "a child deleted while the operator is down is restored on restart",
    "delete": "delete cleans up and nothing stays Terminating",
    "unusable": "an unusable spec is reported in status and a Warning Event, without a retry storm",
}
# Seconds each wait may take on an idle two-core machine, with margin.
CONVERGE_BUDGET = 30.0
REPORT_BUDGET = 10.0
DELETE_BUDGET = 30.0
KILL_BUDGET = 90.0
ORPHANS = "children left behind for good"
# A resync is over once the operator sent nothing for this long.
QUIET = 1.5
# The retry-storm window: an operator with nothing left to do sends at most one request a second.
STORM_WINDOW = 4.0
STORM_LIMIT = 4


class InputError(ValueError):
    """An input file the suite cannot use: the message says which and why (never a traceback)."""


@dataclass
class Inputs:
    """What an author hands the suite.

    Args:
        operator: the operator's file (kopf handlers), run as ``kopf run``.
        crd: the CustomResourceDefinition (YAML).
        example: the custom resource that should converge, after any objects it needs.
        unusable: one that passes the schema but cannot work, after any objects it needs.
        bad: one the API server must refuse; by default the example with a spec field of the wrong type.
        child_selector: a label selector for the children instead of owner references
            (``{name}`` is the resource's name), for an operator whose marks are labels.
        children_outlive: the children are meant to stay when the resource goes (fail-closed).
    """

    operator: Path
    crd: Path
    example: Path
    unusable: Path | None = None
    bad: Path | None = None
    child_selector: str | None = None
    children_outlive: bool = False

    @classmethod
    def beside(cls, operator: Path) -> Inputs:
        """An operator file with its inputs in the same folder: ``crd.yaml``, ``example.yaml``,
        ``unusable.yaml`` and, if there is one, ``bad.yaml`` (the capstone's layout)."""
        folder = operator.parent
        bad = folder / "bad.yaml"
        return cls(operator, folder / "crd.yaml", folder / "example.yaml", folder / "unusable.yaml",
                   bad if bad.is_file() else None)


@dataclass
class Resource:
    """The custom resource's kind, from its CRD."""

    crd: dict[str, Any]
    kind: Kind

    @classmethod
    def of(cls, crd: dict[str, Any]) -> Resource:
        try:
            spec = crd["spec"]
            versions = spec["versions"]
            version = next((v for v in versions if v.get("storage")), versions[0])["name"]
            return cls(crd, Kind(spec["group"], version, spec["names"]["plural"], spec["names"]["kind"],
                                 spec.get("scope", "Namespaced") == "Namespaced"))
        except (KeyError, IndexError, TypeError) as e:
            raise InputError(f"the CRD lacks {e}: it needs spec.group, spec.names.plural and .kind, "
                             f"and spec.versions with a name") from e

    def is_one(self, doc: dict[str, Any]) -> bool:
        return (doc.get("kind") == self.kind.kind
                and str(doc.get("apiVersion", "")).split("/")[0] == self.kind.group)

    def schema(self) -> dict[str, Any]:
        version = next(v for v in self.crd["spec"]["versions"] if v["name"] == self.kind.version)
        return ((version.get("schema") or {}).get("openAPIV3Schema") or {})


def load_docs(path: Path, what: str) -> list[dict[str, Any]]:
    """The YAML documents of ``path``; InputError saying what is wrong with it."""
    try:
        docs = manifests.load(path)
    except FileNotFoundError as e:
        raise InputError(f"no {what} file {path}") from e
    except yaml.YAMLError as e:
        raise InputError(f"{path.name} is not valid YAML: {e}") from e
    if not docs or not all(isinstance(d, dict) and d.get("kind") and d.get("apiVersion") for d in docs):
        raise InputError(f"{path.name}: every document needs apiVersion and kind")
    return docs


def split_example(resource: Resource, docs: list[dict[str, Any]], path: Path) -> tuple[list[dict], dict]:
    """(objects it needs, the custom resource): the last document of the CRD's kind is the resource."""
    mine = [d for d in docs if resource.is_one(d)]
    if not mine:
        raise InputError(f"{path.name} holds no {resource.kind.kind} of group {resource.kind.group}")
    cr = mine[-1]
    if not (cr.get("metadata") or {}).get("name"):
        raise InputError(f"{path.name}: the {resource.kind.kind} needs metadata.name")
    return [d for d in docs if d is not cr], cr


def wrong_value(prop: dict[str, Any]) -> Any:
    """A value of the wrong type for a schema property, or None where any type goes."""
    if prop.get("x-kubernetes-int-or-string") or prop.get("x-kubernetes-preserve-unknown-fields"):
        return None
    return {"string": 12345, "integer": "not-a-number", "number": "not-a-number", "boolean": "not-a-boolean",
            "array": "not-a-list", "object": "not-an-object"}.get(prop.get("type", ""))


def derive_bad(resource: Resource, example: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The example with one spec field of the wrong type, and which: what a schema must refuse."""
    spec_schema = (resource.schema().get("properties") or {}).get("spec") or {}
    for field_name, prop in (spec_schema.get("properties") or {}).items():
        value = wrong_value(prop)
        if value is not None:
            bad = copy.deepcopy(example)
            bad.setdefault("spec", {})[field_name] = value
            return bad, f"spec.{field_name}: {value!r}"
    raise InputError("the CRD's spec has no typed field to give a wrong value: pass a bad object (--bad)")


@dataclass
class Outcome:
    """One property's result, and how long it took."""

    passed: bool
    message: str
    seconds: float = 0.0


@dataclass
class Suite:
    """One run of the properties against one operator, on the cluster of ``kubeconfig``."""

    inputs: Inputs
    kubeconfig: Path
    only: Sequence[str] = tuple(PROPERTIES)
    log: Callable[[str], None] = lambda _: None
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [p for p in self.only if p not in PROPERTIES]
        if unknown:
            raise InputError(f"unknown properties {', '.join(unknown)}; choose from {', '.join(PROPERTIES)}")
        from kubernetes import config

        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self.custom = client.CustomObjectsApi(self.api)
        self.workdir = Path(tempfile.mkdtemp(prefix="verify-", dir=_cache_dir()))
        self.proxy: FaultProxy | None = None
        self.operator: OperatorProcess | None = None
        self.namespace: str | None = None
        self.made_namespace = False
        self.applied: list[dict[str, Any]] = []
        self.kinds: list[Kind] = []
        self.child_kinds: list[Kind] = []
        self.converged: list[Child] = []
        self.writes: list[world.Request] = []
        self.crd_served = False
        self._began = time.monotonic()

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> list[Check]:
        """Every chosen property as a :class:`Check`, in the order of :data:`PROPERTIES`; never raises."""
        try:
            self._run()
        except InputError as e:
            self._fail_rest(str(e))
        except Exception as e:  # noqa: BLE001 - the operator's world, not the learner's mistake: still words
            self._fail_rest(_words(e))
        finally:
            self._teardown()
        return [Check(PROPERTIES[key], o.passed, f"{o.message} ({o.seconds:.1f} s)")
                for key in PROPERTIES if key in self.only and (o := self.outcomes.get(key))]

    def _run(self) -> None:
        self.resource = Resource.of(self._crd_doc())
        example_docs = load_docs(self.inputs.example, "example")
        self.needs, self.example = split_example(self.resource, example_docs, self.inputs.example)
        self.unusable_needs: list[dict] = []
        self.unusable: dict | None = None
        if "unusable" in self.only:
            if self.inputs.unusable is None:
                raise InputError("grading 'unusable' needs a custom resource that cannot work (--unusable)")
            docs = load_docs(self.inputs.unusable, "unusable")
            self.unusable_needs, self.unusable = split_example(self.resource, docs, self.inputs.unusable)
        if not self.inputs.operator.is_file():
            raise InputError(f"no operator file {self.inputs.operator}")

        self._property("crd", self.check_crd)
        if not self.crd_served:
            self._fail_rest("not run: the CRD did not apply (see above)")
            return
        if set(self.only) <= {"crd"}:
            return
        self._prepare()
        self.log(f"  operator started ({time.monotonic() - self._began:.1f} s in)")
        needs_converged = {"resync", "kill", "restore", "delete"} & set(self.only)
        if "converge" in self.only or needs_converged:
            self._property("converge", self.check_converge)
            if not self.outcomes["converge"].passed:
                self._fail_rest("not run: the example never converged (see above)")
                return
        self._property("resync", self.check_resync)
        self._property("restore", self.check_restore)
        if "delete" in self.only or "kill" in self.only:
            self._property("delete", self.check_delete)
        self._property("kill", self.check_kill)
        self._property("unusable", self.check_unusable)

    def _property(self, key: str, check: Callable[[], tuple[bool, str]]) -> None:
        if key in self.outcomes or (key not in self.only and key not in ("crd", "converge", "delete")):
            return
        started = time.monotonic()
        self.log(f"  {key} ... ({started - self._began:.1f} s in)")
        try:
            passed, message = check()
        except InputError as e:
            passed, message = False, str(e)
        except Exception as e:  # noqa: BLE001 - the operator or the cluster misbehaved: evidence, in words
            passed, message = False, _words(e)
        self.outcomes[key] = Outcome(passed, message, time.monotonic() - started)

    def _fail_rest(self, message: str) -> None:
        for key in self.only:
            self.outcomes.setdefault(key, Outcome(False, message))

    # -- the properties -----------------------------------------------------------------------

    def check_crd(self) -> tuple[bool, str]:
        try:
            manifests.apply(self.api, [self.resource.crd])
            manifests.wait_crds_established(self.api, [self.resource.crd["metadata"]["name"]], timeout=20)
            manifests.wait_crds_served(self.api, [self.resource.crd], timeout=20)
        except client.ApiException as e:
            return False, f"the API server refused the CRD: {_server_message(e)}"
        except (KeyError, TimeoutError) as e:
            return False, f"the CRD did not become usable: {e}"
        self.crd_served = True
        if self.inputs.bad:
            _, bad = split_example(self.resource, load_docs(self.inputs.bad, "bad"), self.inputs.bad)
            what = f"{self.inputs.bad.name}"
        else:
            bad, what = derive_bad(self.resource, self.example)
        try:
            self._create(bad, dry_run=True)
        except client.ApiException as e:
            if e.status in (400, 422):
                said = _server_message(e)
                return True, f"applied; {what} refused: {said[:160]}{'...' if len(said) > 160 else ''}"
            raise
        return False, f"applied, but the API server accepted a bad object ({what}): add a schema rule or CEL"

    def check_converge(self) -> tuple[bool, str]:
        self.kinds = world.listable_kinds(self.api)
        since = time.time()
        created = self._create(self.example)
        self.uid = created["metadata"]["uid"]
        outcome = converges(self._converged_children, budget=CONVERGE_BUDGET, interval=0.3,
                            give_up=self._operator_gone)
        if not outcome.ok:
            return False, self._not_converged(outcome.last)
        self.converged = outcome.last
        self.child_kinds = sorted({c.kind for c in self.converged}, key=lambda k: (k.group, k.plural))
        self._quiet(since)
        self.writes = [r for r in world.requests(self._stats(), since)
                       if r.is_write and "/events" not in r.path and not self._is_own(r.path)]
        names = ", ".join(c.text for c in self.converged)
        return True, f"Ready in {outcome.seconds:.1f} s (budget {CONVERGE_BUDGET:.0f} s); children: {names}"

    def check_resync(self) -> tuple[bool, str]:
        assert self.operator
        before = self._versions()
        self.operator.kill()  # as a crashed Pod would be (a graceful kopf stop took ~6 s here)
        since = time.time()
        self._start_operator()
        writes: list[str] = []

        def wrote() -> bool:
            writes[:] = self._stored_writes(before, since)
            return bool(writes)

        self._quiet(since, restarted=True, stop=wrote)
        if wrote():
            return False, f"a restart with nothing to change wrote: {'; '.join(writes)}"
        sent = [r for r in world.requests(self._stats(), since) if not r.watch]
        noop = [r for r in sent if r.is_write]
        unchanged = f"; {len(noop)} PATCH/PUT that changed nothing ({world.tally(noop, 2)})" if noop else ""
        return True, f"restarted; {len(sent) - len(noop)} read(s), no resourceVersion moved{unchanged}"

    def check_restore(self) -> tuple[bool, str]:
        assert self.operator
        victim = _pick_victim(self.converged)
        self.operator.kill()
        self._delete_object(victim.kind, victim.name, victim.namespace, uid=victim.uid)
        def deleted() -> bool:
            now = self._current(victim)
            return now is None or now.uid != victim.uid

        gone = converges(deleted, budget=DELETE_BUDGET, interval=0.3)
        if not gone.ok:
            return False, f"{victim.text} could not be deleted for the test (finalizers {victim.finalizers})"
        self._start_operator()
        back = converges(lambda: (c := self._current(victim)) is not None and not c.terminating
                         and self._ready(), budget=CONVERGE_BUDGET, interval=0.3, give_up=self._operator_gone)
        if not back.ok:
            return False, f"{victim.text} deleted while the operator was down is not back within " \
                          f"{CONVERGE_BUDGET:.0f} s of its restart{self._operator_note()}"
        return True, f"{victim.text} deleted while down; restored {back.seconds:.1f} s after the restart"

    def check_delete(self) -> tuple[bool, str]:
        path = self._cr_path(self.example)
        self._cr_call("delete", self.example)
        left: list[str] = []
        outcome = converges(lambda: self._cleaned_up(path, left), budget=DELETE_BUDGET, interval=0.3,
                            give_up=lambda: bool(left) and left[-1].startswith(ORPHANS))
        if not outcome.ok:
            return False, f"after {outcome.seconds:.1f} s: {left[-1] if left else outcome.last}"
        kept = ""
        if self.inputs.children_outlive:  # as their owner's README says: delete them by hand, to start afresh
            kept = " (its children stayed, as declared; the suite then deleted them)"
            for child in self._children():
                self._delete_object(child.kind, child.name, child.namespace, uid=child.uid)
        return True, f"gone with its children in {outcome.seconds:.1f} s{kept}"

    def check_kill(self) -> tuple[bool, str]:
        assert self.operator and self.proxy
        distinct = list(dict.fromkeys((r.method, r.path) for r in self.writes))
        if not distinct:
            return False, "the operator wrote no child while converging: nothing to kill it at"
        pending = list(distinct)
        kills = 0
        result: list[Child] | str = ""
        try:
            self._arm(pending)
            self._create(self.example)
            deadline = time.monotonic() + KILL_BUDGET
            while time.monotonic() < deadline:
                if not self.operator.running:
                    fired = set(self._stats().get("hits") or {})
                    pending = [w for w in pending if _rule_name(w) not in fired]
                    kills += 1
                    self._restart_armed(pending)
                    continue
                result = self._converged_children()
                if result:
                    break
                time.sleep(0.3)
        finally:
            self.proxy.clear()
            if not self.operator.running:
                self._start_operator()
        if isinstance(result, str):
            return False, f"{kills} kill(s); not converged within {KILL_BUDGET:.0f} s{self._operator_note()}"
        if kills == 0:
            return False, "no write happened again on re-creation: nothing was killed"
        before = [c.key for c in self.converged]
        after = [c.key for c in result]
        if sorted(after) != sorted(before):
            extra = [f"{k[0]} {k[2]}" for k in after if k not in before]
            return False, f"{kills} kill(s); converged with other children than before: " \
                          f"{', '.join(extra) or 'fewer'} (duplicates from a create that is not idempotent?)"
        return True, f"killed after {kills} of {len(distinct)} writes to children, restarted each time; converged, " \
                     f"{len(result)} children, no duplicates"

    def check_unusable(self) -> tuple[bool, str]:
        assert self.unusable is not None
        self._apply_needs(self.unusable_needs)
        created = self._create(self.unusable)
        uid, path = created["metadata"]["uid"], self._cr_path(self.unusable)
        reported = converges(lambda: world.failure_reported(world.get_object(self.api, path)),
                             budget=REPORT_BUDGET, interval=0.3, give_up=self._operator_gone)
        if not reported.ok:
            status = ((world.get_object(self.api, path) or {}).get("status"))
            return False, f"no condition with status False and a message within {REPORT_BUDGET:.0f} s; " \
                          f"status: {status or 'none'}{self._operator_note()}"
        warned = converges(lambda: world.warning_events(self.api, uid), budget=5.0, interval=0.3)
        if not warned.ok:
            return False, f"status says {reported.last.get('reason')!r}, but no Warning Event was posted about it"
        since = time.time()
        time.sleep(STORM_WINDOW)
        sent = [r for r in world.requests(self._stats(), since) if not r.watch]
        if len(sent) > STORM_LIMIT:
            return False, f"reported, then {len(sent)} requests in {STORM_WINDOW:.0f} s with nothing to change " \
                          f"(a retry storm): {world.tally(sent)}"
        return True, f"{reported.last.get('type')}=False ({reported.last.get('reason')}) and a Warning Event in " \
                     f"{reported.seconds:.1f} s; then {len(sent)} request(s) in {STORM_WINDOW:.0f} s"

    # -- the world ---------------------------------------------------------------------------

    def _crd_doc(self) -> dict[str, Any]:
        docs = load_docs(self.inputs.crd, "CRD")
        crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
        if len(crds) != 1:
            raise InputError(f"{self.inputs.crd.name} must hold one CustomResourceDefinition, holds {len(crds)}")
        return crds[0]

    def _prepare(self) -> None:
        """The namespace, the proxy, the operator; leftovers of an earlier run removed."""
        if self.resource.kind.namespaced:
            self.namespace = (self.example.get("metadata") or {}).get("namespace") or \
                f"verify-{secrets.token_hex(3)}"
            core = client.CoreV1Api(self.api)
            try:
                core.read_namespace(self.namespace)
            except client.ApiException:
                core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": self.namespace}}))
                self.made_namespace = True
        for cr in (self.example, self.unusable):
            if cr is not None:
                self._purge(cr)
        self._apply_needs(self.needs)
        self.proxy = FaultProxy(self.kubeconfig, self.workdir).start()
        self.operator = OperatorProcess(
            self.inputs.operator, kubeconfig=self.proxy.kubeconfig, log_path=self.workdir / "operator.log",
            namespaces=[self.namespace] if self.namespace else ())
        self._start_operator()

    def _start_operator(self, on_spawn: Callable[[OperatorProcess], None] | None = None) -> None:
        assert self.operator
        try:
            self.operator.start(timeout=60, on_spawn=on_spawn)
        except (RuntimeError, FileNotFoundError) as e:
            raise InputError(f"the operator did not start: {e}") from e

    def _restart_armed(self, pending: list[tuple[str, str]]) -> None:
        """Start the operator with the kill rules armed for it as soon as it exists, before kopf
        could write anything. A kill may then come before its liveness probe answers: that is
        no failure to start, and the caller's loop starts it again."""
        assert self.operator
        fired = set(self._stats().get("hits") or {})
        try:
            self.operator.start(timeout=60, on_spawn=lambda _: self._arm(pending))
        except RuntimeError as e:
            if set(self._stats().get("hits") or {}) - fired:
                return
            raise InputError(f"the operator did not start: {e}") from e

    def _operator_gone(self) -> bool:
        return self.operator is not None and not self.operator.running

    def _operator_note(self) -> str:
        if self._operator_gone():
            assert self.operator
            return f"; the operator exited: {self.operator.log_tail(3)}"
        return ""

    def _stats(self) -> dict[str, Any]:
        assert self.proxy
        return self.proxy.stats()

    def _versions(self) -> dict[str, str]:
        """The resourceVersion of the resource and of each child: any stored write moves one."""
        obj = world.get_object(self.api, self._cr_path(self.example)) or {}
        found = {f"{self.resource.kind.kind} {self.example['metadata']['name']}":
                 (obj.get("metadata") or {}).get("resourceVersion", "")}
        found.update({c.text: c.resource_version for c in self._children()})
        return found

    def _stored_writes(self, before: dict[str, str], since: float) -> list[str]:
        """What was written since: objects whose resourceVersion moved (or that appeared or went),
        and every create or delete the operator sent (Events included).

        A PATCH or PUT that changes nothing (a server-side apply of the same fields) is not
        stored: the API server keeps the resourceVersion, and it is no write.
        """
        after = self._versions()
        moved = [f"{key} (resourceVersion {before.get(key) or 'none'} -> {after.get(key) or 'gone'})"
                 for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]
        sent = [r for r in world.requests(self._stats(), since) if r.method in ("POST", "DELETE") and not r.watch]
        return moved + ([world.tally(sent)] if sent else [])

    def _quiet(self, since: float, *, restarted: bool = False, longest: float = 20.0,
               stop: Callable[[], bool] = lambda: False) -> None:
        """Wait until the operator sent nothing (but watches) for QUIET seconds; if it was
        ``restarted`` since, first until it watches the resource's kind again.

        That watch is the generic sign that a restarted operator has seen the objects
        (kopf runs resume handlers as the watch's first events arrive).
        """
        end = time.monotonic() + longest
        plural = f"/{self.resource.kind.plural}"
        while time.monotonic() < end and not stop():
            seen = world.requests(self._stats(), since)
            watching = [r.t for r in seen if r.watch and plural in r.path] if restarted else [since]
            if watching:
                sent = [r.t for r in seen if not r.watch]
                if time.time() - max([*watching, *sent]) >= QUIET:
                    return
            time.sleep(0.3)

    def _is_own(self, path: str) -> bool:
        """A request to the resource itself (kopf's finalizer and progress, the status), not to a child."""
        k = self.resource.kind
        return path.startswith(f"/apis/{k.group}/{k.version}/") and (
            f"/{k.plural}/" in path or path.endswith(f"/{k.plural}"))

    def _arm(self, writes: list[tuple[str, str]]) -> None:
        assert self.proxy and self.operator and self.operator.identity
        identity = self.operator.identity
        self.proxy.set_rules([{"action": "kill", "method": method, "path": f"^{_escape(path)}$", "times": 1,
                               "pid": identity.pid, "started": identity.started, "name": _rule_name((method, path))}
                              for method, path in writes])

    def _with_namespace(self, doc: dict[str, Any]) -> dict[str, Any]:
        doc = copy.deepcopy(doc)
        meta = doc.setdefault("metadata", {})
        namespaced = self._namespaced(doc)
        if namespaced and not meta.get("namespace"):
            meta["namespace"] = self.namespace or "default"
        if not namespaced:
            meta.pop("namespace", None)
        return doc

    def _namespaced(self, doc: dict[str, Any]) -> bool:
        if self.resource.is_one(doc):
            return self.resource.kind.namespaced
        group = str(doc.get("apiVersion", "")).rpartition("/")[0]
        kinds = self.kinds or world.listable_kinds(self.api)
        self.kinds = kinds
        return next((k.namespaced for k in kinds if k.kind == doc.get("kind") and k.group == group), True)

    def _cr_path(self, cr: dict[str, Any]) -> str:
        doc = self._with_namespace(cr)
        return self.resource.kind.path(doc["metadata"]["name"], doc["metadata"].get("namespace"))

    def _create(self, cr: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        doc = self._with_namespace(cr)
        k = self.resource.kind
        mode = "All" if dry_run else None
        if k.namespaced:
            made = self.custom.create_namespaced_custom_object(k.group, k.version, doc["metadata"]["namespace"],
                                                               k.plural, doc, dry_run=mode)
        else:
            made = self.custom.create_cluster_custom_object(k.group, k.version, k.plural, doc, dry_run=mode)
        return dict(made) if isinstance(made, dict) else {}

    def _apply_needs(self, docs: list[dict[str, Any]]) -> None:
        placed = [self._with_namespace(d) for d in docs]
        manifests.apply(self.api, placed)
        self.applied.extend(placed)

    def _ready(self) -> bool:
        return world.is_ready(world.get_object(self.api, self._cr_path(self.example)))

    def _children(self, kinds: Sequence[Kind] | None = None) -> list[Child]:
        selector = self.inputs.child_selector
        if selector:
            selector = selector.replace("{name}", self.example["metadata"]["name"])
        return world.children(self.api, kinds if kinds is not None else (self.child_kinds or self.kinds),
                              getattr(self, "uid", ""), selector)

    def _converged_children(self) -> list[Child] | str:
        obj = world.get_object(self.api, self._cr_path(self.example))
        if obj is None:
            return ""
        self.uid = obj["metadata"]["uid"]
        if not world.is_ready(obj):
            return ""
        found = [c for c in self._children() if not c.terminating]
        return found or ""

    def _not_converged(self, last: Any) -> str:
        obj = world.get_object(self.api, self._cr_path(self.example))
        condition = world.ready(obj)
        if obj is not None and world.is_ready(obj):
            how = "children" if not self.inputs.child_selector else f"objects selected by {self.inputs.child_selector}"
            return f"Ready, but no {how} with an owner reference to it{self._operator_note()}"
        seen = f"Ready={condition.get('status')} ({condition.get('reason')}: {condition.get('message')})" \
            if condition else f"no Ready condition in status (status: {(obj or {}).get('status') or 'none'})"
        error = f"; {last}" if isinstance(last, BaseException) else ""
        return f"not Ready within {CONVERGE_BUDGET:.0f} s: {seen}{error}{self._operator_note()}"

    def _current(self, child: Child) -> Child | None:
        return next((c for c in self._children([child.kind]) if (c.name, c.namespace) == (child.name, child.namespace)),
                    None)

    def _cleaned_up(self, path: str, evidence: list[str]) -> bool:
        """Whether the resource and its children are gone; if not, what is left goes to ``evidence``."""
        obj = world.get_object(self.api, path)
        if obj is not None:
            meta = obj["metadata"]
            evidence.append(f"{self.resource.kind.kind} {meta.get('name')} still Terminating, finalizers "
                            f"{meta.get('finalizers')}" if meta.get("deletionTimestamp") else "still there")
            return False
        left = self._children()
        if self.inputs.children_outlive:
            left = [c for c in left if c.terminating]
        if left and not any(c.owned or c.terminating for c in left):
            # The resource is gone, so its finalizer (if any) has run, and no owner reference is left
            # for the garbage collector to follow: nothing will ever delete these.
            evidence.append(f"{ORPHANS}: {', '.join(c.text for c in left)} (no owner reference, and no "
                            f"cleanup before the resource went)")
        elif left:
            evidence.append(f"children left: {', '.join(c.text for c in left)}")
        return not left

    def _delete_object(self, kind: Kind, name: str, namespace: str | None, *, uid: str | None = None) -> None:
        """Delete one object (only if it is still ``uid``); gone already, or another of the name now, is fine."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", **({"preconditions": {"uid": uid}} if uid else {})}
        world.delete(self.api, kind.path(name, namespace), body)

    def _cr_call(self, verb: str, cr: dict[str, Any], body: Any = None) -> None:
        """``delete`` or ``patch`` (a merge patch) one custom resource; gone already is fine."""
        doc = self._with_namespace(cr)
        k, name, namespace = self.resource.kind, doc["metadata"]["name"], doc["metadata"].get("namespace")
        args: tuple[Any, ...] = (k.group, k.version, namespace, k.plural, name) if k.namespaced else \
            (k.group, k.version, k.plural, name)
        scope = "namespaced" if k.namespaced else "cluster"
        try:
            if verb == "delete":
                getattr(self.custom, f"delete_{scope}_custom_object")(*args)
            else:
                getattr(self.custom, f"patch_{scope}_custom_object")(*args, body)
        except client.ApiException as e:
            if e.status != 404:
                raise

    def _purge(self, cr: dict[str, Any]) -> None:
        """Remove a resource of this name left by an earlier run (its finalizers too: no operator runs yet)."""
        path = self._cr_path(cr)
        if world.get_object(self.api, path) is None:
            return
        self._strip_and_delete(cr)
        converges(lambda: world.get_object(self.api, path) is None, budget=DELETE_BUDGET, interval=0.3)

    def _strip_and_delete(self, cr: dict[str, Any]) -> None:
        self._cr_call("patch", cr, {"metadata": {"finalizers": None}})
        self._cr_call("delete", cr)

    def _teardown(self) -> None:
        """Leave nothing, without waiting: the operator killed, the resources deleted (their
        finalizers stripped: no operator runs any more; their children go by owner reference
        or with the namespaces), what was applied deleted, the suite's namespace deleted."""
        self.log(f"  cleaning up ({time.monotonic() - self._began:.1f} s in)")
        try:
            if self.operator:
                self.operator.kill()
            crs = [cr for cr in (getattr(self, "example", None), getattr(self, "unusable", None)) if cr]
            for cr in crs if hasattr(self, "resource") and self.crd_served else []:
                self._strip_and_delete(cr)
            for doc in reversed(self.applied):
                self._delete_doc(doc)
            if self.made_namespace and self.namespace:
                client.CoreV1Api(self.api).delete_namespace(self.namespace)
        except Exception as e:  # noqa: BLE001 - cleanup is best effort; say so
            self.log(f"  cleanup incomplete: {_words(e)}")
        finally:
            if self.operator:
                self.operator.kill()
            if self.proxy and self.proxy.identity:
                # SIGKILL: it keeps nothing, and on SIGTERM it waits ~5 s for its open upstream watches.
                self.proxy.identity.stop(sig=signal.SIGKILL, timeout=5)
            self.log(f"  done ({time.monotonic() - self._began:.1f} s)")

    def _delete_doc(self, doc: dict[str, Any]) -> None:
        group, _, version = str(doc["apiVersion"]).rpartition("/")
        kind = next((k for k in self.kinds if k.kind == doc["kind"] and k.group == group), None)
        if kind is not None:
            self._delete_object(Kind(group, version, kind.plural, kind.kind, kind.namespaced),
                                doc["metadata"]["name"], doc["metadata"].get("namespace"))


def _cache_dir() -> Path:
    directory = paths.cache_root() / "verify"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _pick_victim(found: list[Child]) -> Child:
    """The child to delete: a namespaced one of the core group first (fewest dependants), then any."""
    return sorted(found, key=lambda c: (not c.kind.namespaced, c.kind.group != "", c.kind.kind))[0]


def _rule_name(write: tuple[str, str]) -> str:
    return f"verify kill after {write[0]} {write[1]}"


def _escape(path: str) -> str:
    return re.escape(path)


def _words(e: BaseException) -> str:
    """An error as a line a person can act on (an API error by the server's own message)."""
    if isinstance(e, client.ApiException):
        return f"the API server answered {e.status}: {_server_message(e)}"
    return f"{type(e).__name__}: {e}"


def _server_message(e: client.ApiException) -> str:
    try:
        return str(json.loads(e.body or "")["message"])
    except (TypeError, ValueError, KeyError):
        return f"{e.status} {e.reason}"


def verify(inputs: Inputs, kubeconfig: Path, *, only: Sequence[str] = tuple(PROPERTIES),
           log: Callable[[str], None] = lambda _: None) -> list[Check]:
    """Grade the operator of ``inputs`` on the cluster of ``kubeconfig``: one Check per chosen property."""
    try:
        suite = Suite(inputs, kubeconfig, only=only, log=log)
    except Exception as e:  # noqa: BLE001 - an unknown property, an unreadable kubeconfig: words, not a traceback
        return [Check("the suite can run", False, _words(e))]
    return suite.run()
