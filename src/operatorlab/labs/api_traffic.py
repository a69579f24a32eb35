"""What an operator asks of the API server, read from the lab's fault proxy: counts and spacing.

A lab that runs its operator behind :class:`~operatorlab.faults.proxy.FaultProxy` can grade
how the operator behaves, not only what it leaves behind: how many requests it makes while
nothing changes (a resync set absurdly fast hammers the API server for nothing), and how
far apart its retries of a refused request are (a retry loop that ignores ``Retry-After``
makes an overload worse). The proxy records every request it forwards or answers, with
its time (its ``requests`` log, the last 2000) and each rule's hits.
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass

from operatorlab.faults.proxy import FaultProxy


@dataclass(frozen=True)
class Request:
    """One request the proxy saw: when, what, and the rule that answered it (None: forwarded)."""

    t: float
    method: str
    path: str
    watch: bool
    rule: str | None


def requests(proxy: FaultProxy) -> list[Request]:
    """The requests the proxy logged, oldest first."""
    return [Request(r["t"], r["method"], r["path"], r["watch"], r["rule"]) for r in proxy.stats()["requests"]]


def matching(seen: list[Request], *, method: str, path: str, since: float, until: float | None = None,
             watch: bool = False) -> list[Request]:
    """The requests of ``method`` whose path matches the regex ``path``, between ``since`` and ``until``."""
    end = until if until is not None else float("inf")
    return [r for r in seen if r.method == method and r.watch == watch and re.search(path, r.path)
            and since <= r.t <= end]


def count_during(proxy: FaultProxy, seconds: float, *, method: str, path: str) -> int:
    """How many ``method`` requests matching ``path`` (not watches) the operator makes in the next ``seconds``."""
    started = time.time()
    time.sleep(seconds)
    return len(matching(requests(proxy), method=method, path=path, since=started))


def gaps(times: list[float]) -> list[float]:
    """Seconds between consecutive times (sorted)."""
    return [b - a for a, b in itertools.pairwise(sorted(times))]
