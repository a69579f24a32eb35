"""Reference solution: read, change, write with the resourceVersion read; on a 409, read again and redo."""

import random
import time

from kubernetes import client
from kubernetes.client.rest import ApiException

ATTEMPTS = 20  # client-go's retry.DefaultRetry tries 5 times, 10 ms apart; several racing writers need more


def increment(core: client.CoreV1Api, namespace: str, name: str, key: str) -> None:
    for attempt in range(ATTEMPTS):
        try:
            config_map = core.read_namespaced_config_map(name, namespace)  # a fresh read, each attempt
            data = config_map.data or {}
            data[key] = str(int(data.get(key, "0")) + 1)
            config_map.data = data
            # The object read carries metadata.resourceVersion: the server stores this write only if
            # nobody wrote in between, and answers 409 Conflict otherwise.
            core.replace_namespaced_config_map(name, namespace, config_map)
            return
        except ApiException as e:
            if e.status != 409 or attempt == ATTEMPTS - 1:
                raise  # not a conflict (a 404, a 403): a retry cannot help
            time.sleep(random.uniform(0.0, 0.05))  # jitter: racing writers do not all come back at once
