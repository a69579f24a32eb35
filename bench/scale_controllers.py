"""The two Python controllers of the scale bench, each run as a process of its own.

``python -m bench.scale_controllers handwritten|official [--workers N]`` runs, against
``$KUBECONFIG``, until SIGTERM:

- ``handwritten``: lesson 03's :class:`~operatorlab.controllers.informer.InformerController`
  (our reflector + informer + rate-limited work queue), no periodic resync;
- ``official``: the kubernetes client's own informer,
  ``kubernetes.informer.SharedInformer`` (kubernetes 37.0.2), feeding the same work
  queue (lesson 03's :class:`~operatorlab.controllers.workqueue.RateLimitingQueue`: the
  client ships an informer and leader election, no work queue) and the same
  :class:`~operatorlab.controllers.reconciler.TenantReconciler`.

Both drive the Tenant operator's own ``reconcile_tenant`` (namespace + quota, GET then
write only what differs); neither writes status nor puts a finalizer (lesson 03's
controllers leave deletion to the garbage collector and their delete path). A process
of its own, so that its peak RSS (``VmHWM``) is its own, as the kopf operator's and the
Go reference's are.

``SharedInformer`` with a custom resource: its ``list_func`` must be a generated
``list_*`` method, since the informer reads ``resp.items`` and
``resp.metadata.resource_version`` as attributes; ``CustomObjectsApi`` returns a dict,
whose ``.items`` is the dict method. :func:`tenant_lister` adapts the list call (and
passes the watch call through, which ``kubernetes.watch.Watch`` recognises by the
``watch`` parameter in the docstring).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from types import SimpleNamespace
from typing import Any

GROUP, VERSION, PLURAL = "hedronite.io", "v1", "tenants"


def tenant_lister(custom: Any) -> Any:
    """``list_func`` for ``SharedInformer``: Tenants as dicts, the list response as attributes."""

    def list_tenants(**kwargs: Any) -> Any:
        result = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs)
        if kwargs.get("watch"):
            return result  # the raw stream: Watch.stream decodes it
        return SimpleNamespace(
            items=result.get("items") or [],
            metadata=SimpleNamespace(resource_version=(result.get("metadata") or {}).get("resourceVersion")))

    # kubernetes.watch.Watch finds the watch argument's name in the docstring.
    list_tenants.__doc__ = custom.list_cluster_custom_object.__doc__
    return list_tenants


def run_official(workers: int, stop: threading.Event) -> None:
    """SharedInformer -> work queue -> ``workers`` threads -> TenantReconciler.sync, until ``stop``."""
    from kubernetes import client, config
    from kubernetes.informer import ADDED, DELETED, MODIFIED, SharedInformer

    from operatorlab.controllers.reconciler import TenantReconciler
    from operatorlab.controllers.workqueue import RateLimitingQueue

    api = config.new_client_from_config()
    reconciler = TenantReconciler(api)
    informer = SharedInformer(tenant_lister(client.CustomObjectsApi(api)))
    queue: RateLimitingQueue[str] = RateLimitingQueue(name="tenants")
    for event in (ADDED, MODIFIED, DELETED):
        informer.add_event_handler(event, lambda obj: queue.add(obj["metadata"]["name"]))

    def work() -> None:
        while True:
            key, shutdown = queue.get()
            if shutdown or key is None:
                return
            try:
                reconciler.sync(key, informer.cache.get_by_key(key))
            except Exception as e:  # noqa: BLE001 - every failure is retried with backoff
                logging.warning("official informer: %s failed, retrying: %s", key, e)
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
            finally:
                queue.done(key)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    informer.start()
    print("official informer controller: started", flush=True)
    stop.wait()
    queue.shut_down()
    informer.stop()


def run_handwritten(workers: int, stop: threading.Event) -> None:
    """Lesson 03's InformerController, until ``stop``."""
    from kubernetes import config

    from operatorlab.controllers.informer import InformerController

    controller = InformerController(config.new_client_from_config(), workers=workers, resync_period=None)
    controller.start()
    print("hand-written informer controller: started", flush=True)
    stop.wait()
    controller.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_controllers", description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["handwritten", "official"])
    parser.add_argument("--workers", type=int, default=4, help="reconcile worker threads (default 4)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    (run_handwritten if args.kind == "handwritten" else run_official)(args.workers, stop)


if __name__ == "__main__":
    main()
