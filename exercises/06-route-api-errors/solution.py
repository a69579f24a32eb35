"""Reference solution: route an API error by what a retry can achieve (as the worked-example operators do)."""

import kopf
from kubernetes.client import ApiException

DEFAULT_RETRY_DELAY = 10.0  # seconds, when the server does not say
CONFLICT_RETRY_DELAY = 1.0


def route(e: ApiException) -> kopf.TemporaryError | kopf.PermanentError | None:
    status = e.status or 0
    if status == 422:
        return kopf.PermanentError(f"the API refused the object (422): {e.reason}")
    if status == 409:
        return kopf.TemporaryError(f"changed under us (409): {e.reason}", delay=CONFLICT_RETRY_DELAY)
    if status == 429 or status >= 500:
        return kopf.TemporaryError(f"the API server is overloaded or failing ({status})", delay=retry_after(e))
    return None


def retry_after(e: ApiException) -> float:
    """The server's Retry-After (seconds), else the default; never 0 (that would be a hot loop)."""
    try:
        return max(1.0, float((e.headers or {}).get("Retry-After", DEFAULT_RETRY_DELAY)))
    except ValueError:  # an HTTP date instead of seconds: take the default
        return DEFAULT_RETRY_DELAY
