"""Reference solution: a watcher on the Website operator's own Deployments that re-applies a Website they drift from.

It runs inside the Website operator (the check appends it to a copy), so it calls that
operator's helpers: ``owning_website`` (the owner reference), the ``websites`` index
(the Website's uid and spec, kept from the watch kopf already runs: no GET per event),
``deployment_drift`` and ``_heal`` (the same reconcile as the Website's own handlers).
"""

from typing import Any

import kopf


@kopf.on.event("apps", "v1", "deployments", labels={"app.kubernetes.io/managed-by": "website-operator"})
def watch_children(type: str | None, body: kopf.Body, namespace: str | None, logger: kopf.Logger,
                   websites: kopf.Index[Any, dict[str, Any]] | None = None, **_: Any) -> None:
    """On every event of an owned Deployment: put it back if it was deleted or changed by hand."""
    website = owning_website(body)  # noqa: F821 - the operator's own
    if website is None or namespace is None or websites is None:
        return
    known = next(iter(websites.get((namespace, website), [])), None)
    if known is None:
        return  # its Website is gone (or going): nothing to restore
    if type == "DELETED":
        _heal(namespace, website, known, "its Deployment was deleted", logger)  # noqa: F821
        return
    drift = deployment_drift(body, website_spec(website, known["spec"]))  # noqa: F821
    if drift:
        _heal(namespace, website, known, f"its Deployment was changed: {drift}", logger)  # noqa: F821
