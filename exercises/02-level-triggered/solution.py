"""Reference solution: a level-triggered sink. An event only says *which* Tenant to look at; a LIST is the world."""

from collections.abc import Callable, Mapping
from typing import Any

from operatorlab.controllers.listwatch import WatchEvent
from operatorlab.controllers.reconciler import TenantReconciler


class LevelTriggered:
    def __init__(self, reconciler: TenantReconciler, get_tenant: Callable[[str], Mapping[str, Any] | None]) -> None:
        self.reconciler = reconciler
        self.get_tenant = get_tenant
        self.known: set[str] = set()  # the Tenants of the last LIST and the events since

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        names = {obj["metadata"]["name"] for obj in objects}
        for name in sorted(self.known - names):  # deleted while we were not watching
            self.reconciler.sync(name, None)
        self.known = names
        for obj in objects:  # a LIST is the state as it is: reconcile every Tenant in it
            self.reconciler.sync(obj["metadata"]["name"], obj)

    def apply(self, event: WatchEvent) -> None:
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return  # a BOOKMARK changes no object
        tenant = self.get_tenant(event.name)  # as it is now, not as the event saw it
        if tenant is None:
            self.known.discard(event.name)
        else:
            self.known.add(event.name)
        self.reconciler.sync(event.name, tenant)
