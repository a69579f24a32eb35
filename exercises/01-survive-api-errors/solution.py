"""Reference solution: a polling loop that outlives a failing API server, waiting longer after each failure."""

import logging
import threading
from collections.abc import Callable

from kubernetes.client import ApiException

log = logging.getLogger(__name__)


def run_polling(tick: Callable[[], object], stop: threading.Event, *, interval: float, max_delay: float) -> None:
    delay = interval
    while not stop.is_set():
        try:
            tick()
        except Exception as e:  # noqa: BLE001 - any error: an API status, a cut connection, a timeout
            delay = min(delay * 2, max_delay)  # the server is in trouble: ask less often
            wait = max(delay, retry_after(e))  # and never sooner than it asked
            log.warning("tick failed (%s); next in %.1f s", type(e).__name__, wait)
        else:
            delay = wait = interval
        stop.wait(wait)  # returns at once when stop is set


def retry_after(e: Exception) -> float:
    """The seconds a 429 or 503 asks the client to wait (its Retry-After header), else 0."""
    if not isinstance(e, ApiException):
        return 0.0
    try:
        return float((e.headers or {}).get("Retry-After", 0))
    except ValueError:
        return 0.0
