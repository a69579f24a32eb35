"""Reference solution: one worker step, as client-go's sample-controller writes processNextWorkItem."""


def process_next_work_item(queue, sync) -> bool:
    key, shutdown = queue.get()
    if shutdown:
        return False  # the queue is shutting down: the worker exits
    try:
        sync(key)
    except Exception:  # noqa: BLE001 - any failure: try again later, each time a little later
        queue.add_rate_limited(key)
    else:
        queue.forget(key)  # success: the key's backoff starts over next time
    finally:
        queue.done(key)  # always: else the key stays "processing" and is never handed out again
    return True
