"""NamespaceBaseline operator: baseline NetworkPolicies in every labelled namespace.

A ``hedronite.io/v1alpha1`` ``NamespaceBaseline`` (cluster-scoped, shortName
``nsb``) names a label, ``spec.namespaceLabel: key=value``. In every namespace
carrying that label the operator keeps:

* ``baseline-default-deny``: a NetworkPolicy selecting every Pod
  (``podSelector: {}``) with ``policyTypes: [Ingress, Egress]`` and no rules,
  so nothing may connect in or out unless another policy allows it;
* ``baseline-allow-dns`` (when ``spec.allowDNS``, the default): egress on UDP
  and TCP port 53 to the cluster DNS Pods only (label ``k8s-app: kube-dns`` in
  ``kube-system``, as kubeadm, kind and minikube label CoreDNS), so names still
  resolve and nothing else in ``kube-system`` is reachable. A cluster that runs
  NodeLocal DNSCache answers on the node (hostNetwork) instead: there this
  policy needs that cache's address as well.

Both are labelled ``app.kubernetes.io/managed-by=namespacebaseline-operator``
and ``hedronite.io/namespacebaseline=<baseline>``: that label is how the
operator finds, counts and removes its own policies, and never touches anyone
else's.

Ownership
---------
The policies carry no owner reference, on purpose: the garbage collector
would delete them with the NamespaceBaseline, and this operator is
**fail-closed** (deleting the baseline must not open every namespace). The
label ``hedronite.io/namespacebaseline=<baseline>`` marks them as ours instead:

* **Claim before touching.** A policy of one of our names without that label
  (someone's own ``baseline-default-deny``) is never modified or deleted: the
  baseline reports ``Ready=False``, reason ``NameTaken``, naming the policy and
  how to resolve it, with one Warning Event; the other namespaces get their
  policies as usual. The resync timer looks again every ``NSB_RESYNC_SECONDS``:
  no faster retry, no Event per look.
* **Adoption is explicit**: ``kubectl annotate networkpolicy <name> -n <ns>
  hedronite.io/adopt=<baseline>``, by whoever may annotate it (RBAC decides).
  The operator then relabels it as the baseline's, restores the baseline's
  spec, removes the annotation and posts ``PolicyAdopted``.
* **Delete only what is ours**: every delete follows a LIST by our label and
  keeps only policies of our two names (a label is easily copied onto a
  policy of one's own); a policy another baseline labelled is left to that
  baseline.
* **What outlives its owner, deliberately**: the policies stay when their
  NamespaceBaseline is deleted (fail-closed); its status says so in the Ready
  condition's message. Delete them by label to open the namespaces:
  ``kubectl delete networkpolicy -A -l hedronite.io/namespacebaseline=<name>``.

Design
------
Three triggers, one idempotent reconcile:

* **A baseline changes** (create, update, and every baseline at startup via
  on.resume): :func:`reconcile_baseline` lists the namespaces carrying the
  label, makes each one's policies match (GET, create if missing, replace
  if the spec differs: compare and write only what differs), then removes
  this baseline's policies from namespaces that no longer carry the label
  (and the DNS policy everywhere if ``allowDNS`` turned false).
* **A namespace changes** (``@kopf.on.event`` on namespaces: created,
  relabelled): the baselines come from an in-memory index (``@kopf.index``,
  filled by kopf's own watch, no API call), and so does the knowledge of
  which namespaces hold which baseline's policies. A namespace that gained
  the label gets its policies, one that lost it loses them, within a second
  or so, without waiting for any timer.
* **Drift** (someone deletes or edits a policy, an event was missed): a
  ``@kopf.timer`` re-runs :func:`reconcile_baseline` for every baseline every
  ``NSB_RESYNC_SECONDS`` (default 60). Level-triggered: it does not need to
  know what happened, only what is.

A timer makes kopf put its finalizer on every NamespaceBaseline, so that it
can stop the timer before the object goes. There is no delete handler: when a
NamespaceBaseline is deleted, kopf stops its timer and removes the finalizer,
and the **policies stay** (fail-closed: deleting the policy object must not
silently open every namespace). The catch of that finalizer: while the
operator is not running, a deleted NamespaceBaseline stays Terminating until
the operator is back (or the finalizer is removed by hand).

Errors are routed by what a retry can achieve:

==========================================  ==============  ===========================
cause                                       raised as       kopf then
==========================================  ==============  ===========================
namespaceLabel or name unusable             PermanentError  stops; status Failed, one
(``ValueError``)                                            Warning Event; the timer
                                                            skips it quietly
API 422: the API refuses our object         PermanentError  same
API 429 or 5xx: overload or outage          TemporaryError  retries after Retry-After
                                                            (else 10 s)
API 409: a policy changed under us          TemporaryError  retries after 1 s
a policy's name is taken (not ours)         -               status NameTaken, one
                                                            Event; the timer retries
API 403: RBAC denies a verb                 TemporaryError  retries; fixing the
                                                            ClusterRole heals it
any other error                             unchanged       retries with its backoff
==========================================  ==============  ===========================

Two baselines matching one namespace ask for the same two policy names: the
first to create them keeps them, the other leaves them alone. When the first
lets go while the other still matches, the other takes them over by relabelling
them in place, so the namespace is never without its default-deny. (A hand-over
between two of our own baselines, not an adoption of someone else's policy.)

A namespace being deleted (Terminating) is skipped: its policies go with it.
The namespace watcher is fire-and-forget (kopf does not retry on.event
handlers): if its write fails, it logs a warning and the timer heals it.

Run it against the current kubeconfig (or in-cluster, see ``deploy/``)::

    NSB_RESYNC_SECONDS=10 kopf run --all-namespaces operators/namespacebaseline/namespacebaseline_operator.py

It imports only kopf, kubernetes and the standard library: it runs alone in
its image.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import kopf
import kubernetes.client
from kubernetes.client import ApiException, CoreV1Api, CustomObjectsApi, NetworkingV1Api

GROUP, VERSION, PLURAL, KIND = "hedronite.io", "v1alpha1", "namespacebaselines", "NamespaceBaseline"
OPERATOR = "namespacebaseline-operator"  # managed-by label, ClusterRole, Event source
BASELINE_LABEL = "hedronite.io/namespacebaseline"
# Put on an existing policy of one of our names by whoever may annotate it,
# naming a baseline: that baseline takes the policy over (see "Ownership").
ADOPT_ANNOTATION = "hedronite.io/adopt"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
DENY_POLICY = "baseline-default-deny"
DNS_POLICY = "baseline-allow-dns"
# The label kubeadm (cmd/kubeadm/app/phases/addons/dns/manifests.go, v1.36), kind and minikube put on
# the CoreDNS Pods; kept from the kube-dns days so that existing selectors still match.
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
# Ours is a policy of one of these names that carries our label: a label alone
# is not enough (anyone may copy it onto a policy of their own).
OUR_POLICIES = frozenset({DENY_POLICY, DNS_POLICY})

# The same pattern as spec.namespaceLabel in crds/namespacebaseline.yaml (a
# unit test checks they match): key=value, the key an optional DNS-subdomain
# prefix and a name, the value a label value (possibly empty).
NAMESPACE_LABEL_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?=([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
)
LABEL_KEY_PREFIX_MAX_LENGTH = 253
# The baseline's name becomes a label value on its policies.
NAME_MAX_LENGTH = 63

RESYNC_ENV = "NSB_RESYNC_SECONDS"
DEFAULT_RESYNC_SECONDS = 60.0
# Seconds to wait before a retry when the API server does not say (Retry-After).
DEFAULT_RETRY_DELAY = 10.0
# An object changed between our read and our write (409): read it again soon.
CONFLICT_RETRY_DELAY = 1.0

# report(reason, message) is called once for every write the operator makes.
Reporter = Callable[[str, str], None]


class Baseline(NamedTuple):
    """One NamespaceBaseline, parsed: which namespaces, and what they get."""

    name: str
    key: str
    value: str
    allow_dns: bool

    @property
    def selector(self) -> str:
        """The label selector of its namespaces, ``key=value``."""
        return f"{self.key}={self.value}"

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return (labels or {}).get(self.key) == self.value


# --- Desired state: pure functions, unit-tested without a cluster -----------


def resync_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """The resync timer's interval: ``$NSB_RESYNC_SECONDS``, else 60.

    Raises ValueError if it is set but not a positive number.
    """
    text = environ.get(RESYNC_ENV, "").strip()
    if not text:
        return DEFAULT_RESYNC_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):  # also refuses nan
        raise ValueError(f"{RESYNC_ENV} must be a positive number of seconds, e.g. 60; got {text!r}")
    return seconds


def parse_namespace_label(text: Any) -> tuple[str, str]:
    """Split ``spec.namespaceLabel`` into ``(key, value)``.

    Raises ValueError, saying what is wrong and how to fix it, if it is not
    ``key=value`` with a valid label key and value.
    """
    if not isinstance(text, str) or not re.fullmatch(NAMESPACE_LABEL_PATTERN, text):
        raise ValueError(
            f"spec.namespaceLabel must be a label as key=value, e.g. team=payments or "
            f"example.com/team=payments, got {text!r}; fix spec.namespaceLabel"
        )
    key, value = text.split("=", 1)
    prefix = key.rpartition("/")[0]
    if len(prefix) > LABEL_KEY_PREFIX_MAX_LENGTH:
        raise ValueError(
            f"spec.namespaceLabel: the key's prefix {prefix[:20]!r}... is longer than "
            f"{LABEL_KEY_PREFIX_MAX_LENGTH} characters; fix spec.namespaceLabel"
        )
    return key, value


def parse_baseline(name: str, spec: Mapping[str, Any]) -> Baseline:
    """Validate a NamespaceBaseline; raises ValueError as parse_namespace_label does."""
    if not name or len(name) > NAME_MAX_LENGTH:
        raise ValueError(
            f"NamespaceBaseline name {name!r} is longer than {NAME_MAX_LENGTH} characters: "
            f"it labels the policies, and a label value may not be; rename the NamespaceBaseline"
        )
    key, value = parse_namespace_label(spec.get("namespaceLabel"))
    allow_dns = spec.get("allowDNS", True)
    if not isinstance(allow_dns, bool):
        raise ValueError(f"spec.allowDNS must be true or false, got {allow_dns!r}; fix spec.allowDNS")
    return Baseline(name=name, key=key, value=value, allow_dns=allow_dns)


def policy_labels(baseline: str) -> dict[str, str]:
    """The labels marking a policy as this baseline's."""
    return {MANAGED_BY_LABEL: OPERATOR, BASELINE_LABEL: baseline}


def deny_policy_manifest(baseline: str, namespace: str) -> dict[str, Any]:
    """Deny all ingress and egress of every Pod in the namespace."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": DENY_POLICY, "namespace": namespace, "labels": policy_labels(baseline)},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


def dns_policy_manifest(baseline: str, namespace: str) -> dict[str, Any]:
    """Allow every Pod in the namespace DNS queries to the cluster DNS Pods (UDP and TCP 53), nothing else.

    One peer with both selectors (one list item, so they AND): Pods labelled ``k8s-app:
    kube-dns`` *in* kube-system. Two list items would OR them: every Pod of kube-system,
    or DNS-labelled Pods anywhere.
    """
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": DNS_POLICY, "namespace": namespace, "labels": policy_labels(baseline)},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    # kubernetes.io/metadata.name is set on every namespace by
                    # the API server itself, so it cannot be forged by a label.
                    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                            "podSelector": {"matchLabels": DNS_POD_LABELS}}],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                }
            ],
        },
    }


def desired_policies(baseline: Baseline, namespace: str) -> list[dict[str, Any]]:
    """The policies a matching namespace must hold."""
    policies = [deny_policy_manifest(baseline.name, namespace)]
    if baseline.allow_dns:
        policies.append(dns_policy_manifest(baseline.name, namespace))
    return policies


def is_unwanted(baseline: Baseline, policy: Mapping[str, Any], matching: set[str]) -> bool:
    """Whether one of this baseline's policies must go: its namespace lost the
    label, or it is the DNS policy and allowDNS is now false."""
    meta = policy.get("metadata") or {}
    if meta.get("namespace") not in matching:
        return True
    return meta.get("name") == DNS_POLICY and not baseline.allow_dns


def plan_namespace(
    labels: Mapping[str, str] | None,
    baselines: Mapping[str, Mapping[str, Any]],
    holding: set[str],
) -> tuple[list[str], list[Baseline]]:
    """What one namespace needs, from its labels alone: ``(release, claim)``.

    ``baselines`` maps each baseline's name to its spec; ``holding`` names the
    baselines whose policies the namespace holds now. Baselines it no longer
    matches but holds policies of are released (their policies go); baselines
    it matches are claimed (their policies are ensured). Baselines that cannot
    work (a bad namespaceLabel) are skipped: their own status says why.
    """
    release, claim = [], []
    for name in sorted(baselines):
        try:
            baseline = parse_baseline(name, baselines[name])
        except ValueError:
            continue
        if baseline.matches(labels):
            claim.append(baseline)
        elif name in holding:
            release.append(name)
    return release, claim


# --- Reconcile: observed state -> desired state -----------------------------


def reconcile_baseline(
    name: str,
    spec: Mapping[str, Any],
    *,
    core: kubernetes.client.CoreV1Api | None = None,
    networking: kubernetes.client.NetworkingV1Api | None = None,
    report: Reporter | None = None,
) -> dict[str, Any]:
    """Make every namespace match one NamespaceBaseline; return its status.

    Every namespace carrying the label gets its policies (created if missing,
    replaced if they differ); this baseline's policies elsewhere are deleted.
    Nothing is written when nothing differs.

    Returns ``{"namespaces": <n>, "policies": <n>, "phase": "Ready"}``: how
    many namespaces hold this baseline's policies and how many policies that
    is. If policies of our names that are not ours stood in the way, phase is
    ``NameTaken`` and ``nameTaken`` says which and how to resolve it (the
    other namespaces are served all the same). Raises kopf.PermanentError
    when retrying cannot help and kopf.TemporaryError (with a delay) when it
    can; see the module docstring.
    """
    try:
        baseline = parse_baseline(name, spec)
    except ValueError as e:
        raise kopf.PermanentError(str(e)) from e
    core = CoreV1Api() if core is None else core
    networking = NetworkingV1Api() if networking is None else networking
    report = _ignore if report is None else report

    try:
        listed = _as_dict(core.list_namespace(label_selector=baseline.selector))
        matching = {
            ns["metadata"]["name"]
            for ns in listed.get("items") or []
            if not ns["metadata"].get("deletionTimestamp")  # going anyway, and refuses creates
        }
        taken: list[str] = []
        for namespace in sorted(matching):
            try:
                apply_to_namespace(baseline, namespace, networking=networking, report=report)
            except NameTaken as e:
                taken.append(str(e))
        for policy in _policies_of(networking, name):
            if is_unwanted(baseline, policy, matching):
                _delete_policy(networking, policy, report)
        counts = count_applied(name, networking=networking)
    except ApiException as e:
        routed = _route_api_error(e)
        if routed is None:
            raise
        raise routed from e
    if taken:
        more = f" (and {len(taken) - 1} more namespace(s) like it)" if len(taken) > 1 else ""
        return {**counts, "phase": "NameTaken", "nameTaken": taken[0] + more}
    return {**counts, "phase": "Ready"}


def apply_to_namespace(
    baseline: Baseline,
    namespace: str,
    *,
    networking: kubernetes.client.NetworkingV1Api,
    report: Reporter,
    takeover: frozenset[str] = frozenset(),
) -> int:
    """Create or correct the baseline's policies in one namespace; return how many it wrote.

    Policies of the baselines named in ``takeover`` (ones letting go of this
    namespace) are relabelled as this baseline's, not deleted and re-created:
    the namespace is never without its default-deny, not even for a moment.

    Raises NameTaken, after writing the policies it could, if a policy of one
    of our names is nobody's baseline's and not marked for adoption.
    """
    written, taken = 0, None
    for desired in desired_policies(baseline, namespace):
        try:
            written += _ensure_policy(networking, desired, report, takeover)
        except NameTaken as e:
            taken = taken or e
    if taken is not None:
        raise taken
    return written


def remove_from_namespace(
    baseline: str, namespace: str, *, networking: kubernetes.client.NetworkingV1Api, report: Reporter
) -> int:
    """Delete the baseline's policies from one namespace; return how many it deleted."""
    listed = _as_dict(networking.list_namespaced_network_policy(
        namespace=namespace, label_selector=f"{BASELINE_LABEL}={baseline}"))
    policies = _ours(listed)
    for policy in policies:
        _delete_policy(networking, policy, report)
    return len(policies)


def count_applied(baseline: str, *, networking: kubernetes.client.NetworkingV1Api) -> dict[str, int]:
    """How many namespaces hold this baseline's policies, and how many policies."""
    policies = _policies_of(networking, baseline)
    return {
        "namespaces": len({p["metadata"]["namespace"] for p in policies}),
        "policies": len(policies),
    }


def _policies_of(networking: NetworkingV1Api, baseline: str) -> list[dict[str, Any]]:
    """The baseline's policies in every namespace: our label naming it, and one of our names."""
    listed = _as_dict(networking.list_network_policy_for_all_namespaces(
        label_selector=f"{BASELINE_LABEL}={baseline}"))
    return _ours(listed)


def _ours(listed: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The policies of a LIST by our label that also bear one of our names (see OUR_POLICIES)."""
    return [p for p in listed.get("items") or [] if p["metadata"]["name"] in OUR_POLICIES]


def _ensure_policy(
    networking: NetworkingV1Api, desired: dict[str, Any], report: Reporter, takeover: frozenset[str] = frozenset()
) -> int:
    """Create or correct one policy; return 1 if it wrote, else 0.

    A policy of the same name that another baseline manages is left alone
    (the first baseline to claim a namespace keeps it; both ask for the same
    policy), unless that baseline is in ``takeover``. A policy of that name
    no baseline manages is someone else's: NameTaken, unless it is marked for
    adoption by this baseline.
    """
    meta = desired["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    where = f"{namespace}/{name}"
    try:
        observed = _as_dict(networking.read_namespaced_network_policy(name=name, namespace=namespace))
    except ApiException as e:
        if e.status != 404:
            raise
        try:
            networking.create_namespaced_network_policy(
                namespace=namespace, body=kubernetes.client.V1NetworkPolicy.model_validate(desired)
            )
        except ApiException as e:
            if e.status != 409:  # someone created it since our GET: compare theirs
                raise
            observed = _as_dict(networking.read_namespaced_network_policy(name=name, namespace=namespace))
        else:
            report("PolicyCreated", f"created NetworkPolicy {where}")
            return 1
    observed_meta = observed.get("metadata") or {}
    labels = observed_meta.get("labels") or {}
    annotations = observed_meta.get("annotations") or {}
    ours = meta["labels"][BASELINE_LABEL]
    owner = labels.get(BASELINE_LABEL)
    if owner and owner != ours and owner not in takeover:
        return 0
    adopting = not owner
    if adopting and annotations.get(ADOPT_ANNOTATION) != ours:
        raise policy_taken(where, ours)
    if not adopting and observed.get("spec") == desired["spec"] and all(
            labels.get(k) == v for k, v in meta["labels"].items()):
        return 0
    # Replace, not merge: a rule someone added must go too. resourceVersion
    # makes it conditional: a 409 if the policy changed since our GET.
    kept = {k: v for k, v in observed_meta.items() if k not in ("managedFields", "annotations")}
    remaining = {k: v for k, v in annotations.items() if k != ADOPT_ANNOTATION}
    replacement = {
        "apiVersion": desired["apiVersion"],
        "kind": desired["kind"],
        "metadata": {
            **kept,
            **({"annotations": remaining} if remaining else {}),
            "labels": {**labels, **meta["labels"]},
        },
        "spec": desired["spec"],
    }
    networking.replace_namespaced_network_policy(
        name=name, namespace=namespace, body=kubernetes.client.V1NetworkPolicy.model_validate(replacement)
    )
    if adopting:
        report("PolicyAdopted", f"adopted NetworkPolicy {where} ({ADOPT_ANNOTATION}={ours})")
    else:
        report("PolicyUpdated", f"restored NetworkPolicy {where} to the baseline")
    return 1


class NameTaken(Exception):
    """A policy of one of our names exists and is no baseline's: it is left untouched.

    Not a kopf error: the reconcile carries on with the other namespaces and
    reports it in status; the resync timer is the (slow) retry.
    """


def policy_taken(where: str, baseline: str) -> NameTaken:
    """The NameTaken error for someone else's policy: which, why, and how to resolve it."""
    namespace, _, name = where.partition("/")
    return NameTaken(
        f"NetworkPolicy {where} exists and was not created for this {KIND}: it is left untouched, "
        f"and namespace {namespace} lacks the baseline's own policy of that name. Delete or rename it; "
        f"or hand it over to {KIND} {baseline} (which then keeps it as the baseline says): "
        f"kubectl annotate networkpolicy {name} -n {namespace} {ADOPT_ANNOTATION}={baseline}"
    )


def _delete_policy(networking: NetworkingV1Api, policy: Mapping[str, Any], report: Reporter) -> None:
    meta = policy["metadata"]
    try:
        networking.delete_namespaced_network_policy(name=meta["name"], namespace=meta["namespace"])
    except ApiException as e:
        if e.status == 404:
            return  # gone already
        raise
    report("PolicyRemoved", f"removed NetworkPolicy {meta['namespace']}/{meta['name']}")


def write_counts(
    baseline: str, counts: Mapping[str, int], *, custom: kubernetes.client.CustomObjectsApi | None = None
) -> bool:
    """Merge fresh counts into a baseline's status; False if the baseline is gone."""
    custom = CustomObjectsApi() if custom is None else custom
    try:
        custom.patch_cluster_custom_object_status(
            group=GROUP, version=VERSION, plural=PLURAL, name=baseline, body={"status": dict(counts)})
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


# --- Errors and API objects (the same code in every operator here) ----------


def _route_api_error(e: ApiException) -> kopf.PermanentError | kopf.TemporaryError | None:
    """Map an API error to what a retry can achieve; None: leave it as it is."""
    status = e.status or 0
    message = _server_message(e)
    if status == 422:
        return kopf.PermanentError(f"the API refused an object (422): {message}; fix the {KIND}")
    if status == 409:
        return kopf.TemporaryError(
            f"an object changed while we wrote it (409): {message}; retrying",
            delay=CONFLICT_RETRY_DELAY,
        )
    if status == 403 and "being terminated" in message:
        # The NamespaceLifecycle admission plugin, not RBAC: the namespace
        # is being deleted while we work in it.
        return kopf.TemporaryError(
            f"the namespace is being deleted (403): {message}; retrying",
            delay=DEFAULT_RETRY_DELAY,
        )
    if status == 403:
        return kopf.TemporaryError(
            f"forbidden (403): {message}; grant the verb in the ClusterRole "
            f"'{OPERATOR}' (deploy/clusterrole.yaml); the operator retries by itself",
            delay=DEFAULT_RETRY_DELAY,
        )
    if status == 429 or status >= 500:
        return kopf.TemporaryError(
            f"the API server is overloaded or failing ({status}): {message}; retrying",
            delay=retry_delay(e),
        )
    return None


def retry_delay(e: ApiException, default: float = DEFAULT_RETRY_DELAY) -> float:
    """Seconds to wait before retrying: the server's Retry-After, else ``default``."""
    value = (e.headers or {}).get("Retry-After")
    if value is None:
        return default
    try:
        return max(1.0, float(value))
    except (TypeError, ValueError):  # an HTTP date: not worth parsing
        return default


def _server_message(e: ApiException) -> str:
    """The API server's own explanation (a Status object's message), if any."""
    try:
        return str(json.loads(e.body or "")["message"])
    except (TypeError, ValueError, KeyError):
        return e.reason or "no message"


@functools.cache
def _serializer() -> kubernetes.client.ApiClient:
    return kubernetes.client.ApiClient()


def _as_dict(obj: Any) -> dict[str, Any]:
    """An API object as the API's own JSON shape (camelCase keys, no nulls)."""
    if isinstance(obj, Mapping):
        return dict(obj)
    # The client leaves this method unannotated; it returns the JSON shape of obj.
    result: dict[str, Any] = _serializer().sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    return result


def _ignore(reason: str, message: str) -> None:
    pass


# --- Status: one Ready condition (the same code in every operator here) -----


def ready_conditions(
    previous: Sequence[Mapping[str, Any]],
    *,
    ready: bool,
    reason: str,
    message: str,
    generation: int | None,
    now: str,
) -> list[dict[str, Any]]:
    """``status.conditions`` with its ``Ready`` condition set as given, the others kept.

    ``lastTransitionTime`` moves only when the status flips between True and
    False, as the Kubernetes API conventions ask; ``observedGeneration`` says
    which spec the condition is about.
    """
    status = "True" if ready else "False"
    old = next((c for c in previous if c.get("type") == "Ready"), None)
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
    condition = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since or now,
    }
    others = [dict(c) for c in previous if c.get("type") != "Ready"]
    return [*others, condition]


def record_status(
    body: kopf.Body,
    patch: kopf.Patch,
    fields: Mapping[str, Any],
    *,
    ready: bool,
    reason: str,
    message: str,
) -> bool:
    """Patch status: ``fields``, the Ready condition, observedGeneration; return whether Ready changed.

    Only what differs is written, so the same outcome again (a retry, a
    resync) costs no write. Callers post a Warning Event only when Ready
    changed: one per retry would bury the one that matters. The top-level
    ``message`` repeats a not-Ready message for ``kubectl get -o yaml``
    readers and is removed once Ready.
    """
    status = body.get("status") or {}
    generation = body.metadata.get("generation")
    previous = status.get("conditions") or []
    conditions = ready_conditions(
        previous, ready=ready, reason=reason, message=message, generation=generation, now=_now()
    )
    wanted = {
        **fields,
        "message": None if ready else message,  # None removes it
        "observedGeneration": generation,
        "conditions": conditions,
    }
    changed = {key: value for key, value in wanted.items() if status.get(key) != value}
    if changed:
        patch.status.update(changed)
    before: Mapping[str, Any] = next((c for c in previous if c.get("type") == "Ready"), {})
    after = conditions[-1]
    return any(before.get(key) != after[key] for key in ("status", "reason", "message"))


def _now() -> str:
    """The current time as the API writes it (RFC 3339, UTC, seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _reference(name: str, uid: str) -> kopf.Body:
    """Enough of a NamespaceBaseline for kopf to post an Event about it."""
    return kopf.Body({"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name, "uid": uid}})


# --- kopf wiring ------------------------------------------------------------

# Read once, when kopf loads this file: the timer's interval is fixed then.
# A bad value stops the operator at startup with the message above.
RESYNC_SECONDS = resync_seconds()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, logger: kopf.Logger, **_: Any) -> None:
    """Configure kopf before any handler runs.

    The kubernetes client needs no loader here: with no ``@kopf.on.login``
    handler and the ``kubernetes`` package installed, kopf's fallback login
    (``login_via_client``, kopf 1.45) calls ``load_incluster_config()`` and
    else ``load_kube_config()``, which set the client's default
    Configuration that ``CoreV1Api()`` uses, before any resource handler runs.
    """
    # Watches end quietly on some networks and proxies; asking the server to
    # close each stream after 5 minutes (and giving up client-side a little
    # later) makes kopf reconnect regularly instead of waiting forever.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.posting.reporting_component = OPERATOR
    # A NamespaceBaseline deleted while its resync timer runs waits for the timer to
    # stop; kopf 1.45 then looks again only every `cancellation_polling` seconds
    # (default 60), so the delete took up to a minute. Our timer's run takes well
    # under a second: look again soon.
    settings.background.cancellation_polling = 5
    logger.info(f"resync every {RESYNC_SECONDS:g}s ({RESYNC_ENV})")


@kopf.index(GROUP, VERSION, PLURAL)
def baselines(name: str, uid: str, spec: kopf.Spec, **_: Any) -> dict[str, dict[str, Any]]:
    """In-memory index of the NamespaceBaselines: name -> {uid, spec}.

    kopf keeps it current from its watch of NamespaceBaselines, and fills it
    before any other handler runs; the namespace watcher reads it instead of
    listing the baselines on every namespace event.
    """
    return {name: {"uid": uid, "spec": dict(spec)}}


@kopf.index("networking.k8s.io", "v1", "networkpolicies", labels={BASELINE_LABEL: kopf.PRESENT})
def baseline_policies(
    name: str, namespace: str | None, labels: kopf.Labels, **_: Any
) -> dict[tuple[str, str], bool]:
    """In-memory index of where each baseline's policies are: (namespace, baseline)."""
    if namespace is None:  # kopf's signature allows it; a NetworkPolicy always has one
        raise kopf.PermanentError(f"NetworkPolicy labelled {BASELINE_LABEL} without a namespace: not indexed")
    if name not in OUR_POLICIES:  # someone's own policy that copied our label
        return {}
    return {(namespace, labels[BASELINE_LABEL]): True}


# Said in the Ready condition of every working baseline: what deleting it does.
FAIL_CLOSED = "its policies stay if this NamespaceBaseline is deleted (fail-closed)"


def _reconcile_and_record(name: str, spec: kopf.Spec, body: kopf.Body, patch: kopf.Patch) -> None:
    """Run the reconcile for one baseline and record the outcome in status and Events.

    Status is written only where it changed and a Warning Event posted only
    when the Ready condition changed: the resync timer runs this every
    interval, and the same outcome again is no news.

    Raises:
        kopf.PermanentError: the baseline cannot work (after recording it once).
        kopf.TemporaryError: retry later (status says Retrying).
    """

    def post_event(reason: str, message: str) -> None:
        kopf.info(body, reason=reason, message=message)

    try:
        status = reconcile_baseline(name, spec, report=post_event)
    except kopf.PermanentError as e:
        # kopf only logs a permanent failure, so record it where users look.
        if record_status(body, patch, {"phase": "Failed"}, ready=False, reason="ReconcileFailed", message=str(e)):
            kopf.warn(body, reason="ReconcileFailed", message=str(e))
        raise
    except kopf.TemporaryError as e:
        record_status(body, patch, {"phase": "Retrying"}, ready=False, reason="Retrying", message=str(e))
        raise
    taken = status.pop("nameTaken", None)
    if taken:
        if record_status(body, patch, status, ready=False, reason="NameTaken", message=f"{taken}; {FAIL_CLOSED}"):
            kopf.warn(body, reason="NameTaken", message=taken)
        return
    message = f"{status['policies']} policies in {status['namespaces']} namespace(s); {FAIL_CLOSED}"
    record_status(body, patch, status, ready=True, reason="Applied", message=message)


@kopf.on.resume(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.update(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.create(GROUP, VERSION, PLURAL, id="reconcile")
def reconcile(name: str, spec: kopf.Spec, body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    """Reconcile on create, on every spec change, and for every baseline at startup.

    Returns nothing: kopf would keep a returned dict in ``status.reconcile``,
    where its counts would go stale as namespaces come and go; the live
    counts are at the top level of status.
    """
    _reconcile_and_record(name, spec, body, patch)


@kopf.timer(GROUP, VERSION, PLURAL, id="resync", interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
def resync(name: str, spec: kopf.Spec, body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    """Heal drift: re-run the reconcile every NSB_RESYNC_SECONDS.

    A baseline that cannot work (bad namespaceLabel) makes no API call and is
    reported once, not every interval; it is re-checked each time, so fixing
    it needs no restart. Temporary errors are retried by kopf after their delay.
    """
    try:
        _reconcile_and_record(name, spec, body, patch)
    except kopf.PermanentError:
        return  # recorded once already; raised, kopf would log a traceback every interval


@kopf.on.event("", "v1", "namespaces")
def namespace_changed(
    type: str | None,
    name: str,
    meta: kopf.Meta,
    labels: kopf.Labels,
    logger: kopf.Logger,
    **kwargs: Any,
) -> None:
    """A namespace appeared or changed: give it, or take away, each baseline's policies.

    Fire-and-forget (kopf does not retry on.event handlers): a failure is
    logged and the resync timer heals it.

    The two indexes arrive as keyword arguments named like their index
    functions; kopf's handler protocol (``WatchingFn``) passes them in
    ``**kwargs``, so they are taken from there, typed.
    """
    baselines: kopf.Index[str, dict[str, Any]] = kwargs["baselines"]
    baseline_policies: kopf.Index[tuple[str, str], bool] = kwargs["baseline_policies"]
    if type == "DELETED" or meta.get("deletionTimestamp"):
        return  # its policies go with it
    known = {name_: entry for name_, entries in list(baselines.items()) for entry in entries}
    holding = {baseline for baseline in known if (name, baseline) in baseline_policies}
    release, claim = plan_namespace(labels, {b: e["spec"] for b, e in known.items()}, holding)
    networking = NetworkingV1Api()
    changed: set[str] = set()

    def act(baseline_name: str, write: Callable[[Reporter], object]) -> bool:
        reference = _reference(baseline_name, known[baseline_name]["uid"])

        def post_event(reason: str, message: str) -> None:
            kopf.info(reference, reason=reason, message=message)

        try:
            return bool(write(post_event))
        except NameTaken as e:
            logger.warning(f"{e}; the resync timer reports it in the baseline's status")
            return True  # it may have written the other policy
        except ApiException as e:
            logger.warning(
                f"namespace {name}: could not apply baseline {baseline_name!r} "
                f"({e.status}): {_server_message(e)}; the resync timer retries it"
            )
            return False

    # Claims first, taking over the policies of baselines letting go: then
    # the releases delete only what nobody claimed. Never a moment without.
    def claim_write(baseline: Baseline) -> Callable[[Reporter], int]:
        def write(report: Reporter) -> int:
            return apply_to_namespace(baseline, name, networking=networking, report=report, takeover=frozenset(release))
        return write

    def release_write(baseline_name: str) -> Callable[[Reporter], int]:
        def write(report: Reporter) -> int:
            return remove_from_namespace(baseline_name, name, networking=networking, report=report)
        return write

    def counts_write(baseline_name: str) -> Callable[[Reporter], bool]:
        def write(report: Reporter) -> bool:
            return write_counts(baseline_name, count_applied(baseline_name, networking=networking))
        return write

    for baseline in claim:
        if act(baseline.name, claim_write(baseline)):
            changed |= {baseline.name, *release}  # a takeover changes the releasing one's count too
    for baseline_name in release:
        if act(baseline_name, release_write(baseline_name)):
            changed.add(baseline_name)
    for baseline_name in sorted(changed):
        act(baseline_name, counts_write(baseline_name))
