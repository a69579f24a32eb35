"""Reference solution: a streaming list with the official client's Watch, synced at the bookmark that ends
the initial events, and the resourceVersion to resume from taken from that bookmark."""

import time

from kubernetes import client, watch

END = "k8s.io/initial-events-end"  # the annotation on the bookmark that ends the initial events
TIMEOUT = 60  # seconds the server keeps the stream open


def stream_list(core: client.CoreV1Api, namespace: str) -> tuple[dict[str, str], str]:
    store: dict[str, str] = {}
    resource_version = ""
    started = time.monotonic()
    # Watch().stream passes these on to list_namespaced_config_map, which sends them as
    # sendInitialEvents=true, resourceVersionMatch=NotOlderThan, allowWatchBookmarks=true.
    events = watch.Watch().stream(core.list_namespaced_config_map, namespace, send_initial_events=True,
                                  resource_version_match="NotOlderThan", allow_watch_bookmarks=True,
                                  timeout_seconds=TIMEOUT)
    try:
        for event in events:
            meta = event["raw_object"]["metadata"]
            if event["type"] == "BOOKMARK":
                if (meta.get("annotations") or {}).get(END) == "true":
                    return store, meta["resourceVersion"]  # the state just sent is the state at this point
                continue
            if event["type"] == "DELETED":
                store.pop(meta["name"], None)
            else:
                store[meta["name"]] = meta["resourceVersion"]
            resource_version = meta["resourceVersion"]
    finally:
        events.close()  # the stream's connection is released
    raise TimeoutError(f"the stream ended after {time.monotonic() - started:.0f} s, before the initial-events-end "
                       f"bookmark (last resourceVersion seen: {resource_version or 'none'})")
