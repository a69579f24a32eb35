"""Waiting for the cluster to converge: the one polling helper tests, notebooks and labs share.

A controller is eventually consistent, so every check of its effect is "poll until
true or give up", never a fixed sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def eventually(check: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.2, message: str = "") -> Any:
    """Poll ``check`` until it returns a truthy value (returned) or ``timeout`` s pass.

    Exceptions raised by ``check`` count as "not yet"; the last one is reported.

    Raises:
        AssertionError: the condition never held; includes ``message`` and the last value/error.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - reported below if it persists
            last = e
        time.sleep(interval)
    raise AssertionError(f"not true after {timeout:.0f}s: {message} (last: {last!r})")
