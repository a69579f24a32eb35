"""A streaming list (KEP-3157, "WatchList"): the initial state as watch events, ended by a bookmark.

Instead of LIST (one large answer, built whole in the API server's memory and the
client's) and then WATCH, a client opens one WATCH with

* ``sendInitialEvents=true``: begin the stream with a synthetic ``ADDED`` event for every
  object in the collection;
* ``resourceVersionMatch=NotOlderThan`` (required with it; any other value is refused
  as Invalid) and ``resourceVersion`` ``""`` (a consistent read: the state at least as
  new as the moment the request was served) or a resourceVersion it has seen (at least
  that new);
* ``allowWatchBookmarks=true``: once every initial event is sent, the server sends one
  ``BOOKMARK`` whose object carries the annotation ``k8s.io/initial-events-end: "true"``
  and the resourceVersion of the state just sent. Until that bookmark the client is
  not synced; after it the same stream goes on with the changes since.

As read in k8s.io/apimachinery v0.36.3 (``pkg/apis/meta/v1/types.go``,
``InitialEventsAnnotationKey``) and k8s.io/client-go v0.36.3
(``tools/cache/reflector.go``, ``watchList``: the options above, a temporary store
filled until the bookmark, then ``Replace`` of the real store). The server's
``WatchList`` feature gate (k8s.io/apiserver ``pkg/features``): beta, on by default in
1.32, off again in 1.33, on by default since 1.34 (so in 1.34, 1.35 and 1.36).

Pure: nothing here talks to a server. :class:`InitialEvents` is the temporary store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["INITIAL_EVENTS_END", "InitialEvents", "is_initial_events_end", "watch_list_query"]

#: The annotation on the bookmark that ends the initial events (metav1.InitialEventsAnnotationKey).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def watch_list_query(resource_version: str = "") -> dict[str, str]:
    """The query parameters of a streaming list from ``resource_version`` (``""``: a consistent read)."""
    query = {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
             "allowWatchBookmarks": "true"}
    if resource_version:
        query["resourceVersion"] = resource_version
    return query


def is_initial_events_end(raw: Mapping[str, Any]) -> bool:
    """True for the bookmark ``{"type": "BOOKMARK", ...}`` annotated ``k8s.io/initial-events-end: "true"``."""
    if raw.get("type") != "BOOKMARK":
        return False
    annotations = ((raw.get("object") or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(INITIAL_EVENTS_END) == "true"


class InitialEvents:
    """The temporary store of a streaming list: objects by namespace/name until the end bookmark.

    :meth:`add` takes each decoded event in order and returns True at the bookmark that
    ends the initial events; :attr:`resource_version` is then the bookmark's, the point
    to resume from, and :meth:`items` the collection at it. Before that bookmark,
    ``ADDED`` and ``MODIFIED`` put an object, ``DELETED`` removes it (as client-go's
    ``handleListWatch`` does with its temporary store), other bookmarks only move the
    resourceVersion on.

    Raises:
        ValueError: an event after the end bookmark (the caller applies those itself).
    """

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.resource_version = ""
        self.done = False

    def add(self, raw: Mapping[str, Any]) -> bool:
        if self.done:
            raise ValueError("the initial events have ended: apply later events to the store itself")
        obj = raw.get("object") or {}
        meta = obj.get("metadata") or {}
        kind = raw.get("type")
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if kind in ("ADDED", "MODIFIED"):
            self._objects[key] = dict(obj)
        elif kind == "DELETED":
            self._objects.pop(key, None)
        elif kind != "BOOKMARK":
            raise ValueError(f"not an event of a streaming list: {kind!r}")
        self.resource_version = meta.get("resourceVersion", "") or self.resource_version
        self.done = is_initial_events_end(raw)
        return self.done

    def items(self) -> list[dict[str, Any]]:
        """The objects so far, sorted by namespace and name."""
        return [self._objects[key] for key in sorted(self._objects)]

    def __len__(self) -> int:
        return len(self._objects)
