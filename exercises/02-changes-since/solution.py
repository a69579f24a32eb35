"""Reference solution: "what changed since resourceVersion R" is one WATCH from R, read up to the first bookmark."""

from operatorlab.controllers.listwatch import ListerWatcher, WatchEvent
from operatorlab.controllers.reflector_policy import RequestFailed

WATCH_TIMEOUT = 60.0  # seconds: the longest the server keeps the stream open if no bookmark comes


def changes_since(list_watch: ListerWatcher, resource_version: str) -> tuple[dict[str, str | None], str] | None:
    try:
        stream = list_watch.watch(resource_version=resource_version, timeout=WATCH_TIMEOUT)
    except RequestFailed as e:
        if e.failure.expired:
            return None
        raise
    changed: dict[str, str | None] = {}
    newest = resource_version
    try:
        for raw in stream.events():
            event = WatchEvent.from_raw(raw)
            if event.type == "ERROR":
                if event.code == 410:
                    return None  # that history is gone: only a LIST can say what is there now
                raise RuntimeError(f"watch error {event.code}: {event.detail}")
            if event.type == "BOOKMARK":
                return changed, event.resource_version  # the server: everything up to here was sent
            changed[event.name] = None if event.type == "DELETED" else event.resource_version
            newest = event.resource_version
    finally:
        stream.close()
    return changed, newest  # the server ended the stream before any bookmark
