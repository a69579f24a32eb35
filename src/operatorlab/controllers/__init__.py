"""Reference hand-written controllers: the loop the control plane runs, built up three times.

All of them drive the *same* idempotent reconcile, the Tenant operator's own
``reconcile_tenant`` (``operators/tenant/tenant_operator.py``), against a real API
server, so only the machinery around it changes -- and its cost is measured.

========================  ======  ==========================================================
module                    lesson  what it is
========================  ======  ==========================================================
:mod:`.reconciler`        01-03   :class:`~.reconciler.TenantReconciler`: the shared
                                  reconcile step (reconcile a Tenant, or clean up after one)
:mod:`.polling`           01      :class:`~.polling.PollingController`: LIST every N seconds,
                                  reconcile each; an orphan sweep handles deletions
:mod:`.metrics`           01-03   API cost, measured twice: a counting ``ApiClient``
                                  (this controller's requests) and the API server's own
                                  ``/metrics`` ``apiserver_request_total`` (everyone's)
:mod:`.listwatch`         02      :class:`~.listwatch.Reflector` (LIST, then WATCH from the
                                  list's resourceVersion; bookmarks; reconnect; back off,
                                  then relist on 410 Gone) and
                                  :class:`~.listwatch.ListWatchController`
:mod:`.reflector_policy`  02      :func:`~.reflector_policy.decide`: client-go's retry rules
                                  (relist, re-watch, back off) as one pure function
:mod:`.backoff`           02      client-go's reflector backoff (800 ms doubling to 30 s,
                                  jitter, reset every 2 min)
:mod:`.pager`             02      client-go ``tools/pager``: LIST in pages (limit + continue)
:mod:`.keys`              03      work-queue keys: ``namespace/name`` (client-go key funcs)
:mod:`.workqueue`         03      client-go ``util/workqueue``: de-duplicating, delaying,
                                  rate-limited queue
:mod:`.listener`          03      client-go ``processorListener``: each event handler on its
                                  own thread
:mod:`.informer`          03      :class:`~.informer.Informer` (a store kept by the
                                  reflector, event handlers, resync) and
                                  :class:`~.informer.InformerController` (sample-controller:
                                  handlers enqueue keys, workers reconcile from the cache)
========================  ======  ==========================================================

Every controller has the same shape: ``start()`` (background threads; returns
once ready), ``stop()`` (joins them), use as a context manager, and
``stats()`` returning a :class:`~.metrics.ControllerStats` (lists, watches,
reconciles, writes, ...).

Sources: client-go ``tools/cache`` (``reflector.go`` ``ListAndWatch``,
``shared_informer.go``, ``delta_fifo.go``), ``util/workqueue``;
kubernetes/sample-controller ``controller.go``; Kubernetes API concepts
(https://kubernetes.io/docs/reference/using-api/api-concepts/): watch,
bookmarks, resource versions and 410 Gone.
"""
