"""Reference solution: the NamespaceBaseline operator's resync timer, with a floor under its interval.

The body is the operator's own ``resync``; the interval is its ``resync_seconds`` plus the
floor: a resync re-reads every namespace and policy of every baseline, so an interval of
0.01 s would be a hundred full reconciles a second against the API server.
"""

import math
import os
from collections.abc import Mapping

import kopf

RESYNC_ENV = "NSB_RESYNC_SECONDS"
DEFAULT_RESYNC_SECONDS = 60.0
MIN_RESYNC_SECONDS = 1.0  # below this a resync is a load test, not a safety net


def resync_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """``$NSB_RESYNC_SECONDS``, else 60; raised to MIN_RESYNC_SECONDS; ValueError if not a positive number."""
    text = environ.get(RESYNC_ENV, "").strip()
    if not text:
        return DEFAULT_RESYNC_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:  # also refuses nan
        raise ValueError(f"{RESYNC_ENV} must be a positive number of seconds, e.g. 60; got {text!r}")
    return max(seconds, MIN_RESYNC_SECONDS)


def resync(name: str, spec: kopf.Spec, body: kopf.Body, patch: kopf.Patch, **_: object) -> None:
    """Heal drift: the whole level-triggered reconcile, every interval; it writes only what differs."""
    try:
        _reconcile_and_record(name, spec, body, patch)  # noqa: F821 - the operator's own
    except kopf.PermanentError:
        return  # recorded once already; raised, kopf would log a traceback every interval
