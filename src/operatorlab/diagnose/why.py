"""``operatorlab why KIND/NAME``: why did my kopf handler not fire, or not finish?

Decides from the evidence :func:`~operatorlab.diagnose.evidence.gather` read, and prints the
likely cause first with the command that fixes it. :func:`diagnose` is a pure function of
:class:`~operatorlab.diagnose.evidence.Facts`; what it recognises:

- **stuck Terminating**: a ``deletionTimestamp`` and kopf's finalizer, and no operator seen
  running to run the delete handler (start it; or strip the finalizer, at a cost said);
  a finalizer kopf does not own;
- **a handler backing off**: kopf's progress annotation with ``delayed`` in the future (its
  retry time) and the last error; a retry long overdue; a handler started and never
  finished; a permanent failure (kopf purges progress once every handler is done, so a
  record means a cycle in progress, see :mod:`~operatorlab.diagnose.kopfstate`);
- **never handled** (no finalizer, no progress, no last-handled configuration) or **changed
  since last handled**; or, for a healthy object, "handlers completed";
- the operator's own verdict: ``Ready`` and ``observedGeneration``;
- **a version not served** (kopf resolves handlers through discovery: they never fire), and
  a schema that **prunes status**;
- a **peering pause** (``kopf freeze``, or replicas of equal priority);
- the verbs kopf needs, for ``--as system:serviceaccount:NS:NAME``: list, watch, patch, patch
  status, create events.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from datetime import UTC, datetime

from operatorlab.diagnose import kopfstate, resolve
from operatorlab.diagnose.evidence import EVENTS_SHOWN, AccessCheck, Facts, service_account
from operatorlab.diagnose.report import Finding, ranked, render, summary
from operatorlab.terminal import BOLD, color

#: Seconds after which a deletion no kopf handler acted on is stuck (kopf acts within a second or two).
STUCK_AFTER = 10.0
#: Seconds a handler's due retry (or a started handler) may wait before the operator counts as gone.
LATE_AFTER = 60.0


# --- deciding -------------------------------------------------------------------------


def diagnose(f: Facts) -> list[Finding]:
    """Every finding about the object, the likely cause first (see :func:`report.ranked`)."""
    if f.resource is None:
        return _unresolved(f)
    findings = _version(f)
    if f.obj is None:
        scope = " -A" if f.resource.namespaced else ""
        return [*findings, Finding("PROBLEM", f"there is no {f.label}",
                                   ("deleted already, or another name or namespace; the Events below may tell",),
                                   fix=f"kubectl get {f.resource.qualified}{scope}"),
                *_access_findings(f), *_operator_findings(f)]
    findings += _deletion(f) + _progress(f) + _handled(f) + _conditions(f) + _schema(f)
    findings += _peering_findings(f) + _access_findings(f) + _operator_findings(f)
    return ranked(findings)


def settled(f: Facts) -> bool:
    """kopf completed a cycle for the object as it is now: nothing pending, nothing running, not deleted."""
    annotations = f.meta.get("annotations") or {}
    return (f.obj is not None and not f.meta.get("deletionTimestamp") and not kopfstate.progress(annotations)
            and kopfstate.unhandled_changes(f.obj) == [])


def _unresolved(f: Facts) -> list[Finding]:
    if f.crd is not None:
        return [Finding("PROBLEM", f"CRD {f.crd.name} serves no version: nothing of it can be read or handled",
                        fix=f"kubectl patch crd {f.crd.name} --type=json "
                            f"-p '[{{\"op\":\"replace\",\"path\":\"/spec/versions/0/served\",\"value\":true}}]'")]
    details = ("kubectl api-resources lists what this cluster serves; the Operator Lab kinds come from crds/",)
    fix = f"kubectl apply -f {f.crd_file}" if f.crd_file else f"kubectl api-resources | grep -i {f.target.resource}"
    return [Finding("PROBLEM", f"this cluster has no resource type {f.target.resource!r}"
                    + (f" in group {f.target.group}" if f.target.group else ""), details, fix=fix)]


def _version(f: Facts) -> list[Finding]:
    wanted = f.target.version
    if not (wanted and f.crd and f.resource and wanted != f.resource.version):
        return []
    have = ", ".join(f"{v.name} ({'served' if v.served else 'not served'})" for v in f.crd.versions)
    version = f.crd.version(wanted)
    unresolved = (f"kopf resolves its handlers' resources through discovery, which lists only served versions: "
                  f"a handler for {f.crd.group}/{wanted} never fires, and kopf logs \"Unresolved resources cannot "
                  f"be served\" at startup")
    if version is None:
        return [Finding("PROBLEM", f"CRD {f.crd.name} has no version {wanted}", (f"its versions: {have}", unresolved,
                        f"use a served version in the operator's handlers, e.g. {f.resource.version}"))]
    return [Finding("PROBLEM", f"version {wanted} of {f.crd.name} is not served (served: false in the CRD)",
                    (f"its versions: {have}", unresolved,
                     f"the object itself is read below through {f.resource.api_version}",
                     f"or change the operator's handlers to the served version {f.resource.version}"),
                    fix=f"kubectl patch crd {f.crd.name} --type=json -p "
                        f"'[{{\"op\":\"replace\",\"path\":\"/spec/versions/{version.index}/served\",\"value\":true}}]'")]


def _age(when: str | None, now: datetime) -> float | None:
    if not when:
        return None
    return (now - datetime.fromisoformat(when.replace("Z", "+00:00"))).total_seconds()


def _quoted_json(value: object) -> str:
    """``value`` as compact JSON, quoted for a shell: a kubectl ``-p`` argument to paste."""
    return shlex.quote(json.dumps(value, separators=(",", ":")))


def _finalizer_patch(f: Facts, keep: Sequence[str]) -> str:
    patch = {"metadata": {"finalizers": list(keep) or None}}  # a merge patch replaces the whole list
    return f"kubectl patch {f.kubectl_ref} --type=merge -p {_quoted_json(patch)}"


def _deletion(f: Facts) -> list[Finding]:
    deleted = f.meta.get("deletionTimestamp")
    if not deleted:
        return []
    finalizers: list[str] = list(f.meta.get("finalizers") or [])
    age = _age(deleted, f.now) or 0.0
    since = f"deletionTimestamp {deleted} ({age:.0f} s ago); finalizers: {', '.join(finalizers) or 'none'}"
    records = [r for r in kopfstate.progress(f.meta.get("annotations") or {})]
    if kopfstate.FINALIZER in finalizers:
        others = [x for x in finalizers if x != kopfstate.FINALIZER]
        cost = ("Removing kopf's finalizer instead lets the object go without its @kopf.on.delete handler: "
                "what it owns through owner references is still deleted by the garbage collector"
                + (" (for a Tenant, its namespace and quota)" if f.kind == "Tenant" else "")
                + ", anything else that handler would have cleaned up stays behind.")
        if records:
            return [Finding("INFO", "Terminating: kopf's finalizer waits for the delete handler (progress below)",
                            (since,))]
        if not f.operator_running:
            return [Finding("PROBLEM", "stuck Terminating: kopf's finalizer waits for the operator's delete handler, "
                            "and no operator is seen running for this cluster",
                            (since, "looked for: " + "; ".join(f.looked_for) + ": none runs", cost),
                            fix=f.start_operator(), alternative=_finalizer_patch(f, others))]
        if age > STUCK_AFTER:
            return [Finding("PROBLEM", f"stuck Terminating for {age:.0f} s: an operator runs, but no kopf handler "
                            "has acted on the deletion",
                            (since, "it may be paused by peering, watch another group or version (its startup log "
                             "lists what it serves), or be refused by RBAC: see the other findings", cost),
                            alternative=_finalizer_patch(f, others))]
        return [Finding("INFO", f"being deleted ({age:.0f} s ago): kopf's delete handler should act now", (since,))]
    if finalizers and age > STUCK_AFTER:
        return [Finding("PROBLEM", f"stuck Terminating for {age:.0f} s: waiting for finalizer(s) "
                        f"{', '.join(finalizers)}, which kopf does not own",
                        (since, "the controller that added them must remove them; removing them by hand skips its "
                         "cleanup"), fix=_finalizer_patch(f, []))]
    return [Finding("INFO", "being deleted", (since,))]


def _suggested_command(message: str | None) -> str | None:
    """A ``kubectl ...`` command an operator's error message ends with (ours do, e.g. for NameTaken)."""
    if not message or (start := message.rfind("kubectl ")) < 0:
        return None
    return message[start:].strip().rstrip(".")


def _progress(f: Facts) -> list[Finding]:
    findings = []
    for r in kopfstate.progress(f.meta.get("annotations") or {}):
        state = r.state(f.now)
        what = f"handler {r.handler!r}" + (f" ({r.purpose})" if r.purpose else "")
        evidence = f"annotation {r.annotation}: started {_hms(r.started)}, {r.retries} attempt(s) so far"
        error = (f"last error: {r.message}",) if r.message else ()
        absent = () if f.operator_running else ("and no operator is seen running to retry it",)
        if state == "backing off" and r.delayed is not None:
            wait = (r.delayed - f.now).total_seconds()
            findings.append(Finding("PROBLEM", f"{what} failed and is backing off: kopf retries it at "
                                    f"{_hms(r.delayed)} (in {wait:.0f} s)", (*error, evidence, *absent),
                                    fix=_suggested_command(r.message)))
        elif state == "retry due" and r.delayed is not None:
            late = (f.now - r.delayed).total_seconds()
            if late > LATE_AFTER or not f.operator_running:
                findings.append(Finding("PROBLEM", f"{what} was due for a retry {late:.0f} s ago and has not run",
                                        (*error, evidence, *absent), fix=f.start_operator()))
            else:
                findings.append(Finding("INFO", f"{what}: retry due now", (*error, evidence)))
        elif state == "running":
            started = _age(r.started.isoformat() if r.started else None, f.now) or 0.0
            if not f.operator_running and started > LATE_AFTER:
                findings.append(Finding("PROBLEM", f"{what} started {started:.0f} s ago and never finished: "
                                        "its operator stopped during it (kopf runs it again on start)",
                                        (evidence, *absent), fix=f.start_operator()))
            else:
                findings.append(Finding("INFO", f"{what} is running (started {started:.0f} s ago)", (evidence,)))
        elif state == "failed":
            findings.append(Finding("PROBLEM", f"{what} failed permanently: kopf will not retry it until the "
                                    "object changes", (*error, evidence), fix=_suggested_command(r.message)))
        else:
            findings.append(Finding("INFO", f"{what} succeeded; the rest of the cycle is still running", (evidence,)))
    if kopfstate.status_progress(f.obj or {}):
        findings.append(Finding("INFO", "status.kopf.progress holds handler records of an older kopf "
                                "(kopf 1.45 reads them but keeps its progress in annotations)"))
    return findings


def _handled(f: Facts) -> list[Finding]:
    annotations = f.meta.get("annotations") or {}
    if f.meta.get("deletionTimestamp") or kopfstate.progress(annotations):
        return []
    changes = kopfstate.unhandled_changes(f.obj or {})
    finalizers = f.meta.get("finalizers") or []
    causes = ("no operator is seen running for this cluster",) if not f.operator_running else (
        "an operator runs but has not handled it: it may watch another group or version (its startup log lists "
        "what it serves), be paused by peering, or lack list/watch (try --as system:serviceaccount:NS:NAME)",)
    if changes is None:
        if kopfstate.FINALIZER in finalizers:
            return [Finding("WARNING", "kopf added its finalizer but has not completed a cycle for this object yet",
                            causes, fix=None if f.operator_running else f.start_operator())]
        return [Finding("PROBLEM", f"no kopf handler has ever handled this {f.kind}: no finalizer, no progress, "
                        f"no {kopfstate.LAST_HANDLED}", causes,
                        fix=None if f.operator_running else f.start_operator())]
    if changes:
        changed = f"changed since kopf last handled it: {', '.join(changes)}"
        if f.operator_running:
            return [Finding("WARNING", f"{changed}; an update cycle is pending or running")]
        return [Finding("PROBLEM", f"{changed}, and no operator is seen running to handle it", causes,
                        fix=f.start_operator())]
    return [Finding("OK", "kopf's handlers completed for the object as it is now",
                    (f"{kopfstate.LAST_HANDLED} matches it, and no handler is in progress",))]


def _conditions(f: Facts) -> list[Finding]:
    status = (f.obj or {}).get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    findings = []
    generation = f.meta.get("generation")
    observed = (ready or {}).get("observedGeneration", status.get("observedGeneration"))
    if ready is not None:
        said = f"Ready={ready.get('status')} ({ready.get('reason')}): {ready.get('message')}"
        phase = (f"status.phase: {status['phase']}",) if status.get("phase") else ()
        if ready.get("status") == "True":
            findings.append(Finding("OK", f"the operator reports {said}", phase))
        else:
            findings.append(Finding("PROBLEM", f"the operator reports {said}", phase,
                                    fix=_suggested_command(ready.get("message"))))
    # Deleting a custom resource bumps its generation too: no new spec to report on then.
    deleting = bool(f.meta.get("deletionTimestamp"))
    if generation is not None and observed is not None and observed < generation and not deleting:
        findings.append(Finding("WARNING", f"status describes generation {observed}, the object is at generation "
                                f"{generation}: the operator has not reported on its latest spec yet"))
    return findings


def _schema(f: Facts) -> list[Finding]:
    if f.crd is None or f.resource is None or (version := f.crd.version(f.resource.version)) is None:
        return []
    pruned = resolve.status_pruning(version.schema)
    if pruned is None:
        return [Finding("OK", f"CRD {f.crd.name} serves {version.name}; its schema keeps what is written to status")]
    base = f"/spec/versions/{version.index}/schema/openAPIV3Schema/properties/status"
    declared = "status" in (version.schema.get("properties") or {})
    op = ({"op": "add", "path": f"{base}/x-kubernetes-preserve-unknown-fields", "value": True} if declared else
          {"op": "add", "path": base, "value": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}})
    return [Finding("WARNING", f"the schema of {f.crd.name} {version.name} prunes status: {pruned}",
                    ("the API server drops undeclared fields silently: a write succeeds and the field is gone",
                     "kopf stores what a handler returns in status.<handler id>, and its progress in status.kopf "
                     "when the operator uses kopf.StatusProgressStorage (kopf 1.45's default keeps progress in "
                     "annotations): both are lost here",
                     "fix it for good in the CRD's manifest; the command below fixes the cluster now"),
                    fix=f"kubectl patch crd {f.crd.name} --type=json -p {_quoted_json([op])}")]


def _peering_findings(f: Facts) -> list[Finding]:
    findings = []
    for p in f.peerings:
        where = f"{p.kind} {p.namespace + '/' if p.namespace else ''}{p.name}"
        live = [f"{peer.identity} (priority {peer.priority}, alive until {_hms(peer.until())})"
                for peer in p.live(f.now)]
        pause = p.pause(f.now)
        if pause is None:
            if live:
                findings.append(Finding("INFO", f"kopf peering {where}: live: {'; '.join(live)}"))
            continue
        how = ("operators started with --peering=" + p.name
               + (" (or with neither --peering nor --standalone)" if p.name == "default" else "")
               + " handle nothing while paused; --standalone operators ignore peering")
        paused = ", ".join(peer.identity for peer in pause.paused)
        if pause.tie:
            findings.append(Finding("WARNING" if settled(f) else "PROBLEM",
                                    f"kopf peering {where} pauses every operator in it: "
                                    f"{len(pause.by)} share the top priority {pause.by[0].priority}",
                                    ("live: " + "; ".join(live), how,
                                     "give each replica its own priority (kopf run --priority=N), or stop one"),
                                    fix=f"kopf resume --id {shlex.quote(pause.by[-1].identity)} --peering={p.name} "
                                        f"{p.cli_scope()}"))
            continue
        by = pause.by[0]
        findings.append(Finding("WARNING" if settled(f) else "PROBLEM",
                                f"kopf peering {where} pauses {paused} in favour of {by.identity} "
                                f"(priority {by.priority})",
                                ("live: " + "; ".join(live), how,
                                 f"the fix removes {by.identity}'s entry: right for a `kopf freeze`; a running "
                                 "operator would write it back (stop it instead)"),
                                fix=f"kopf resume --id {shlex.quote(by.identity)} --peering={p.name} {p.cli_scope()}"))
    return findings


def _rbac_fix(f: Facts, denied: Sequence[AccessCheck]) -> str:
    """One command granting the denied verbs: a rule added to a ClusterRole bound to the identity, else a new one."""
    rules: dict[tuple[str, str], list[str]] = {}
    for a in denied:
        resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        rules.setdefault((a.group, resource), []).append(a.verb)
    if f.roles:
        ops = [{"op": "add", "path": "/rules/-", "value": {"apiGroups": [g], "resources": [r], "verbs": v}}
               for (g, r), v in rules.items()]
        return f"kubectl patch clusterrole {f.roles[0]} --type=json -p {_quoted_json(ops)}"
    name = f"kopf-{f.resource.plural if f.resource else 'operator'}"
    verbs = ",".join(sorted({a.verb for a in denied}))
    resources = ",".join(sorted({a.name + (f"/{a.subresource}" if a.subresource else "") for a in denied}))
    sa = service_account(f.user or "")
    who = f"--serviceaccount={sa[0]}:{sa[1]}" if sa else f"--user={f.user}"
    return (f"kubectl create clusterrole {name} --verb={verbs} --resource={resources} && "
            f"kubectl create clusterrolebinding {name} --clusterrole={name} {who}")


def _access_findings(f: Facts) -> list[Finding]:
    if not f.user:
        return []
    denied = [a for a in f.access if not a.allowed]
    if not denied:
        return [Finding("OK", f"{f.user} may do what kopf needs: "
                        + "; ".join(a.describe() for a in f.access))]
    details = [f"{a.describe()}: denied; kopf needs it to {a.purpose}" for a in denied]
    details += [f"check: {a.can_i(f.user)}" for a in denied]
    if not f.roles:
        details.append("no ClusterRole is bound to it: the fix creates one (each verb on each resource listed)")
    return [Finding("PROBLEM", f"{f.user} may not " + ", ".join(a.describe() for a in denied), tuple(details),
                    fix=_rbac_fix(f, denied))]


def _operator_findings(f: Facts) -> list[Finding]:
    findings = [Finding("INFO" if s.running else "WARNING", f"operator seen: {s.where}: {s.what}"
                        + (f" (does not handle {f.kind})" if s.handles is False else "")) for s in f.seen]
    if not f.operator_running:
        findings.append(Finding("INFO", f"no {f.kind} operator seen running for this cluster",
                                ("looked for: " + "; ".join(f.looked_for),)))
    return findings


# --- printing -------------------------------------------------------------------------


def _hms(when: datetime | None) -> str:
    return when.astimezone(UTC).strftime("%H:%M:%S UTC") if when else "?"


def describe(f: Facts) -> list[str]:
    """The facts a person would look up next, as ``kubectl get -o yaml`` and ``kubectl events`` show them."""
    if f.obj is None:
        lines = []
    else:
        annotations = f.meta.get("annotations") or {}
        records = kopfstate.progress(annotations)
        handled = kopfstate.last_handled(annotations)
        status = (f.obj.get("status") or {})
        lines = [
            f"  uid {f.meta.get('uid')}, generation {f.meta.get('generation')}, "
            f"created {f.meta.get('creationTimestamp')}",
            f"  deletionTimestamp: {f.meta.get('deletionTimestamp') or 'none'}",
            f"  finalizers: {', '.join(f.meta.get('finalizers') or []) or 'none'}",
            "  kopf progress: " + (", ".join(f"{r.handler} {r.state(f.now)}" for r in records)
                                   or "none (no cycle running)"),
            f"  kopf last handled: {json.dumps(handled, separators=(',', ':')) if handled is not None else 'never'}",
            f"  status: {json.dumps({k: v for k, v in status.items() if k != 'conditions'}, separators=(',', ':'))}",
        ]
    lines.append(f"Events (latest {EVENTS_SHOWN}, oldest first):" if f.events else "Events: none found")
    lines += [f"  {e.time}  {e.type:<7}  {e.reason:<20}  {e.source}: {e.message}" for e in f.events]
    return lines


def report(f: Facts, findings: Sequence[Finding] | None = None) -> str:
    """What ``operatorlab why`` prints: the object, the likely cause first, every finding, then the facts."""
    findings = ranked(diagnose(f) if findings is None else findings)
    where = (f"{f.resource.api_version}, " + ("namespaced" if f.resource.namespaced else "cluster-scoped")
             if f.resource else "unresolved")
    problems = [x for x in findings if x.severity == "PROBLEM"]
    verdict = (f"Likely cause: {problems[0].title}" if problems else
               "Nothing wrong found" + (": kopf's handlers completed" if settled(f) else ""))
    return "\n".join([color(f"{f.label} ({where})", BOLD), verdict, "", render(findings), "",
                      color("Facts", BOLD), *describe(f), "", summary(findings)])
