"""Optimistic concurrency, as lesson 11 measures it: a write that carries the resourceVersion it read.

The API server stores a replace (PUT) whose ``metadata.resourceVersion`` is not the object's
current one only as a ``409 Conflict``: nothing is written, and the client must read again.
client-go wraps "read, change, write; on a conflict do it all again" as
``retry.RetryOnConflict(backoff, fn)`` (``k8s.io/client-go/util/retry/util.go``, v0.36.3:
``OnError(backoff, errors.IsConflict, fn)``, with ``DefaultRetry`` 5 steps of 10 ms). The
Python client (``kubernetes`` 37.0.3) has no such helper: its ``Configuration.retries`` and
``client_go_retries`` retry connection errors and, for GET and HEAD, a ``Retry-After``; a 409
reaches the caller as an ``ApiException``. :func:`retry_on_conflict` is the helper it lacks.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException

T = TypeVar("T")

#: client-go's ``retry.DefaultRetry`` takes 5 steps; a busy 2-core machine gets more.
STEPS = 10


def retry_on_conflict(attempt: Callable[[], T], *, steps: int = STEPS, delay: float = 0.01) -> T:
    """Run ``attempt`` (one read-change-write) until it does not end in a 409, at most ``steps`` times.

    Any other error is raised at once (a retry cannot mend a 404 or a 403); the last 409 is
    raised when the steps run out. ``delay`` (client-go's 10 ms), jittered up to twice that so that
    racing writers do not come back together, separates attempts.
    """
    for step in range(steps):
        try:
            return attempt()
        except ApiException as e:
            if e.status != 409 or step == steps - 1:
                raise
            time.sleep(delay * random.uniform(1.0, 2.0))
    raise AssertionError("unreachable")  # the loop returns or raises


def bump(core: client.CoreV1Api, namespace: str, name: str, key: str, *, blind: bool = False) -> None:
    """One attempt: read the ConfigMap, add one to ``data[key]``, replace it.

    ``blind`` drops the resourceVersion read before the replace: the server then takes the write
    whatever happened in between (a "last write wins" update), which is how updates are lost.
    """
    config_map = core.read_namespaced_config_map(name, namespace)
    data = config_map.data or {}
    data[key] = str(int(data.get(key, "0")) + 1)
    config_map.data = data
    if blind and config_map.metadata is not None:
        config_map.metadata.resource_version = None
    core.replace_namespaced_config_map(name, namespace, config_map)


def add_one(core: client.CoreV1Api, namespace: str, name: str, key: str) -> None:
    """Add one to ``data[key]`` of a ConfigMap, losing no other writer's update."""
    retry_on_conflict(lambda: bump(core, namespace, name, key), steps=50, delay=0.02)


@dataclass(frozen=True)
class Race:
    """What :func:`race` measured: the count reached, the count owed, the 409s and the seconds."""

    final: int
    expected: int
    conflicts: int
    seconds: float

    @property
    def lost(self) -> int:
        return self.expected - self.final


def race(core: client.CoreV1Api, namespace: str, name: str, *, writers: int, each: int, blind: bool) -> Race:
    """``writers`` threads add one ``each`` times to a fresh counter ConfigMap ``name``; returns what came of it.

    With ``blind`` every write is a last-write-wins replace (no resourceVersion); without it each
    write carries the resourceVersion read and a 409 is retried (:func:`retry_on_conflict`).
    The ConfigMap is made anew (``data.count = "0"``) and deleted afterwards.
    """
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"count": "0"})
    try:
        core.delete_namespaced_config_map(name, namespace)
    except ApiException as e:
        if e.status != 404:
            raise
    core.create_namespaced_config_map(namespace, body)
    conflicts = 0
    lock = threading.Lock()
    errors: list[BaseException] = []

    def counted() -> None:
        nonlocal conflicts
        try:
            bump(core, namespace, name, "count", blind=blind)
        except ApiException as e:
            if e.status == 409:
                with lock:
                    conflicts += 1
            raise

    def work() -> None:
        try:
            for _ in range(each):
                retry_on_conflict(counted, steps=10 * writers)
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
            errors.append(e)

    started = time.monotonic()
    threads = [threading.Thread(target=work, name=f"writer-{i}", daemon=True) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.monotonic() - started
    try:
        if errors:
            raise errors[0]
        final = int((core.read_namespaced_config_map(name, namespace).data or {})["count"])
    finally:
        core.delete_namespaced_config_map(name, namespace)
    return Race(final=final, expected=writers * each, conflicts=conflicts, seconds=seconds)
