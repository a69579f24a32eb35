"""Reference solution: the reflector's loop (lesson 02) reduced to its rules: resume from the last
resourceVersion seen, relist only when the history is gone, wait before trying again."""

import threading

from operatorlab.controllers.backoff import BackoffManager
from operatorlab.controllers.listwatch import ListerWatcher, ReflectorSink, StreamBroken, WatchEvent
from operatorlab.controllers.reflector_policy import RequestFailed

WATCH_TIMEOUT = 300.0  # seconds; the server ends each stream after about that long
LIST_TIMEOUT = 60.0


def follow(list_watch: ListerWatcher, sink: ReflectorSink, stop: threading.Event, backoff: BackoffManager) -> None:
    resource_version = ""
    relist = True
    while not stop.is_set():
        if relist:
            try:
                listed = list_watch.list(resource_version="", limit=0, continue_token="", timeout=LIST_TIMEOUT)
            except RequestFailed:
                stop.wait(backoff.step())
                continue
            resource_version = listed["metadata"]["resourceVersion"]
            sink.replace(listed["items"], resource_version)
            relist = False
        try:
            stream = list_watch.watch(resource_version=resource_version, timeout=WATCH_TIMEOUT)
        except RequestFailed as e:
            # A 429: the server is busy, the history is still good. Anything else: list again.
            relist = not e.failure.too_many_requests
            stop.wait(backoff.step())
            continue
        error = None
        try:
            for raw in stream.events():
                event = WatchEvent.from_raw(raw)
                if event.type == "ERROR":
                    error = event
                    break
                sink.apply(event)
                resource_version = event.resource_version or resource_version  # a BOOKMARK's too
        except StreamBroken:
            pass  # the connection broke: nothing is lost, resume from resource_version
        if error is not None:  # 410 Gone: that history is no longer kept; list again (429: wait, resume)
            relist = error.code != 429
            stop.wait(backoff.step())
