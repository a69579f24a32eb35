"""Sieve's three fault classes (Sun et al., OSDI 2022), reproduced through the fault proxy.

Each demo runs a small controller built on the course's own informer
(:mod:`operatorlab.controllers.informer`, lesson 03) through a
:class:`~operatorlab.faults.proxy.FaultProxy`, injects one fault, and reports what the
cluster holds afterwards (read directly, not through the proxy):

1. **stale view** (:func:`stale_view`): the children's watch is held by a ``stall`` rule, so
   the controller's cache does not show the child it has just created while resyncs
   reconcile the parent again. With ``generateName`` every reconcile creates another child;
   with a deterministic name the server answers the second create ``409 AlreadyExists``.
2. **unobserved state** (:func:`missed_delete`): the watch is dropped and answered ``410
   Gone``, the child is deleted meanwhile, and the reflector relists. A relist carries no
   ``DELETED`` event: a controller that acts on watch events never hears of the delete; one
   that compares desired with actual on every notification (the relist's tombstone
   included) recreates the child.
3. **intermediate state** (:func:`intermediate_state`): a controller process writes two
   ConfigMaps that belong together; a ``kill`` rule SIGKILLs it as soon as the apiserver has
   stored the first. A restart that creates blindly fails on ``409 AlreadyExists`` forever;
   an idempotent, level-triggered reconcile completes the pair.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from operatorlab.cluster import process
from operatorlab.controllers.informer import Informer
from operatorlab.controllers.listwatch import ListWatch, Resource, WatchEvent
from operatorlab.faults.proxy import FaultProxy
from operatorlab.wait import eventually

#: Where the demos' children live (the parents live in ``default``).
NAMESPACE = "lesson11-sieve"
PARENT = "lesson11-parent"
PARENT_LABEL = "lesson11/parent"
KEEP = "lesson11-keep"
PAIR = ("lesson11-pair-config", "lesson11-pair-companion")
#: The path regex of the children's collection, for the proxy's rules.
CHILDREN_PATH = f"/namespaces/{NAMESPACE}/configmaps"
#: How long the stale-view demo holds the children's watch: several resyncs long.
STALL = 4.0
RESYNC = 0.3


@dataclass(frozen=True)
class ConfigMaps(Resource):
    """Core v1 ConfigMaps of one namespace as a :class:`Resource`, so the course's ListWatch serves them."""

    group: str = ""
    version: str = "v1"
    plural: str = "configmaps"

    def list(self, api: client.CustomObjectsApi, **kwargs: Any) -> Any:
        assert self.namespace, "ConfigMaps are listed in one namespace"
        answer = client.CoreV1Api(api.api_client).list_namespaced_config_map(self.namespace, **kwargs)
        if kwargs.get("_preload_content") is False:
            return answer  # a watch: the raw stream
        return api.api_client.sanitize_for_serialization(answer)


def child_name(parent: str, *, deterministic: bool) -> dict[str, str]:
    """The child's name: one the server can refuse twice, or a ``generateName`` prefix (V1ObjectMeta arguments)."""
    return {"name": f"{parent}-child"} if deterministic else {"generate_name": f"{parent}-child-"}


def children_of(objects: list[Mapping[str, Any]], parent: str) -> list[str]:
    """The names of the objects labelled as ``parent``'s children."""
    return sorted(o["metadata"]["name"] for o in objects
                  if (o["metadata"].get("labels") or {}).get(PARENT_LABEL) == parent)


def _unless(code: int, call: Callable[..., object], *args: Any) -> bool:
    """``call(*args)``: True if it succeeded, False if the API answered ``code`` (any other error raises)."""
    try:
        call(*args)
        return True
    except ApiException as e:
        if e.status != code:
            raise
        return False


def _exists(core: client.CoreV1Api, name: str) -> bool:
    return _unless(404, core.read_namespaced_config_map, name, NAMESPACE)


def _create(core: client.CoreV1Api, metadata: dict[str, Any]) -> None:
    core.create_namespaced_config_map(NAMESPACE, client.V1ConfigMap(metadata=client.V1ObjectMeta(**metadata)))


def prepare(core: client.CoreV1Api) -> None:
    """A clean slate: the namespace, with none of the demos' ConfigMaps, and no parent."""
    _unless(409, core.create_namespace, client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    core.delete_collection_namespaced_config_map(NAMESPACE, label_selector=PARENT_LABEL)
    for name in (KEEP, *PAIR):
        _unless(404, core.delete_namespaced_config_map, name, NAMESPACE)
    _unless(404, core.delete_namespaced_config_map, PARENT, "default")


# -- 1. stale view ------------------------------------------------------------------------


@dataclass(frozen=True)
class StaleView:
    reconciles: int
    children: list[str]
    already_exists: int


def stale_view(core: client.CoreV1Api, proxy: FaultProxy, *, deterministic: bool) -> StaleView:
    """Hold the children's watch for :data:`STALL` s while a parent is reconciled every :data:`RESYNC` s.

    The controller reads the children from its cache and creates one when it sees none.
    """
    prepare(core)
    api = config.new_client_from_config(str(proxy.kubeconfig))
    parents = Informer(ListWatch(api, ConfigMaps(namespace="default")), resync_period=RESYNC, name="parents")
    children = Informer(ListWatch(api, ConfigMaps(namespace=NAMESPACE)), name="children")
    counts = {"reconciles": 0, "already_exists": 0}

    def reconcile(parent: Mapping[str, Any]) -> None:
        name = parent["metadata"]["name"]
        if (parent["metadata"].get("labels") or {}).get(PARENT_LABEL) != "true":
            return
        counts["reconciles"] += 1
        if children_of(children.list(), name):
            return  # the cache shows a child: nothing to do
        metadata = {**child_name(name, deterministic=deterministic), "labels": {PARENT_LABEL: name}}
        if not _unless(409, _create, client.CoreV1Api(api), metadata):
            counts["already_exists"] += 1  # the server refuses a second child of that name

    parents.add_event_handler(on_add=reconcile, on_update=lambda _old, new: reconcile(new))
    # The children's watch, opened after their first LIST, waits STALL s before it is forwarded.
    proxy.set_rules([{"action": "stall", "method": "GET", "path": CHILDREN_PATH, "watch": True,
                      "after": STALL, "times": 1}])
    try:
        children.start()
        parents.start()
        assert children.wait_for_cache_sync(30) and parents.wait_for_cache_sync(30), "informers did not sync"
        core.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=PARENT, labels={PARENT_LABEL: "true"})))

        def caught_up() -> bool:  # the stall is over and the cache holds what the server holds
            actual = core.list_namespaced_config_map(NAMESPACE, label_selector=PARENT_LABEL).items
            return bool(actual) and len(children_of(children.list(), PARENT)) == len(actual)

        eventually(caught_up, timeout=60, message="the children's cache never caught up")
        parents.wait_for_handlers(10)
    finally:
        parents.stop()
        children.stop()
        proxy.clear()
    actual = core.list_namespaced_config_map(NAMESPACE, label_selector=PARENT_LABEL).items
    names = sorted(str(c.metadata and c.metadata.name) for c in actual)
    result = StaleView(counts["reconciles"], names, counts["already_exists"])
    prepare(core)
    return result


# -- 2. unobserved state ------------------------------------------------------------------


@dataclass(frozen=True)
class MissedDelete:
    deleted_event_heard: bool
    child_back: bool


def missed_delete(core: client.CoreV1Api, proxy: FaultProxy, *, level_triggered: bool) -> MissedDelete:
    """Delete the child while the controller's watch is down, so it learns the world from a relist.

    Edge-triggered: recreate the child on a ``DELETED`` watch event for it. Level-triggered:
    on every notification (add, update, delete, the relist's tombstone), compare: no child in
    the cache, create it.
    """
    prepare(core)
    _create(core, {"name": KEEP})
    api = config.new_client_from_config(str(proxy.kubeconfig))
    own = client.CoreV1Api(api)
    informer = Informer(ListWatch(api, ConfigMaps(namespace=NAMESPACE)), name="keeper")
    deleted_heard = threading.Event()

    def ensure(*_: object) -> None:
        if informer.get(f"{NAMESPACE}/{KEEP}") is None:
            _unless(409, _create, own, {"name": KEEP})

    def on_watch_event(event: WatchEvent) -> None:
        if event.type == "DELETED" and event.name == KEEP:
            deleted_heard.set()
            if not level_triggered:
                ensure()

    informer.on_event(on_watch_event)
    if level_triggered:
        informer.add_event_handler(on_add=ensure, on_update=ensure, on_delete=ensure)
    since = time.time()
    try:
        informer.start()
        assert informer.wait_for_cache_sync(30), "the informer did not sync"
        _wait_watching(proxy, since)
        # The open watch is dropped now (a gone rule matches it); the next one hears 410 Gone,
        # and the relist after it is held 1.5 s, so the delete below is done before it.
        since = time.time()
        proxy.set_rules([
            {"action": "gone", "path": CHILDREN_PATH, "watch": True, "times": 1},
            {"action": "stall", "method": "GET", "path": CHILDREN_PATH + "$", "watch": False, "after": 1.5,
             "times": 1},
        ])
        core.delete_namespaced_config_map(KEEP, NAMESPACE)
        eventually(lambda: _answered(proxy, since, "stall"), timeout=60, message="the reflector did not relist")
        if level_triggered:
            eventually(lambda: _exists(core, KEEP), timeout=30, message="the child was not recreated")
        else:  # the relist has reached the cache
            eventually(lambda: informer.get(f"{NAMESPACE}/{KEEP}") is None, timeout=30, message="no relist")
        informer.wait_for_handlers(10)
        back = _exists(core, KEEP)
    finally:
        informer.stop()
        proxy.clear()
    prepare(core)
    return MissedDelete(deleted_heard.is_set(), back)


def _answered(proxy: FaultProxy, since: float, rule: str) -> bool:
    """Whether a request the rule named ``rule...`` matched since ``since`` has been answered."""
    return any(r["t"] >= since and (r["rule"] or "").startswith(rule) and r["status"] is not None
               for r in proxy.stats()["requests"])


def _wait_watching(proxy: FaultProxy, since: float) -> None:
    """Until a watch on the children, begun since ``since``, is open through the proxy (so a rule can drop it)."""
    eventually(lambda: any(r["t"] >= since and r["watch"] and CHILDREN_PATH in r["path"] and r["status"] == 200
                           for r in proxy.stats()["requests"]), timeout=30, message="no watch open")


# -- 3. intermediate state ----------------------------------------------------------------


def create_pair_blindly(core: client.CoreV1Api) -> None:
    """The two writes that belong together, each a plain create: a second run meets ``409``."""
    for name in PAIR:
        _create(core, {"name": name})


def reconcile_pair(core: client.CoreV1Api) -> None:
    """Level-triggered and idempotent: create whichever of the pair is missing, take ``409`` as done."""
    for name in PAIR:
        if not _exists(core, name):
            _unless(409, _create, core, {"name": name})


@dataclass(frozen=True)
class Intermediate:
    killed: bool
    after_kill: tuple[bool, bool]
    blind_restart: str
    after_blind_restart: tuple[bool, bool]
    after_reconcile: tuple[bool, bool]


def intermediate_state(core: client.CoreV1Api, proxy: FaultProxy) -> Intermediate:
    """Run :func:`create_pair_blindly` in a process that the proxy SIGKILLs after the first write is stored."""
    prepare(core)
    workdir = Path(tempfile.mkdtemp(prefix="lesson11-"))
    go = workdir / "go"
    pid = process.spawn([sys.executable, "-m", "operatorlab.sieve", "--kubeconfig", str(proxy.kubeconfig),
                         "--go", str(go)], workdir / "pair.log")
    writer = process.Identity.of(pid)
    try:
        proxy.set_rules([{"action": "kill", "method": "POST", "path": CHILDREN_PATH + "$", "response": 201,
                          "pid": writer.pid, "started": writer.started, "times": 1}])
        go.touch()
        eventually(lambda: not writer.alive, timeout=60,
                   message=f"the writer was not killed:\n{process.tail(workdir / 'pair.log')}")
    finally:
        writer.stop(timeout=5)
        proxy.clear()
    killed = not _exists(core, PAIR[1])

    def pair() -> tuple[bool, bool]:
        return _exists(core, PAIR[0]), _exists(core, PAIR[1])

    after_kill = pair()
    try:
        create_pair_blindly(core)
        blind = "completed"
    except ApiException as e:
        blind = f"{e.status} {json.loads(e.body or '{}').get('reason')}"
    after_blind = pair()
    reconcile_pair(core)
    result = Intermediate(killed, after_kill, blind, after_blind, pair())
    prepare(core)
    return result


def main(argv: list[str] | None = None) -> int:
    """The writer process of :func:`intermediate_state`: wait for ``--go``, then write the pair."""
    parser = argparse.ArgumentParser(prog="python -m operatorlab.sieve")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--go", required=True, type=Path)
    args = parser.parse_args(argv)
    core = client.CoreV1Api(config.new_client_from_config(args.kubeconfig))
    ready = threading.Event()
    while not args.go.exists():
        ready.wait(0.05)
    create_pair_blindly(core)
    return 0


if __name__ == "__main__":
    sys.exit(main())
