"""Reference solution: a read that never hangs a handler, however the API server behaves.

The kubernetes client waits for ever by default (no ``_request_timeout``), and urllib3 (2.8,
under it) retries a timed-out GET three more times by default (``Retry.DEFAULT``), so the
longest wait is four times the read timeout.
"""

import kopf
import urllib3
from kubernetes.client import ApiException, NetworkingV1Api

REQUEST_TIMEOUT = (1.0, 1.0)  # seconds: (connect, read), per attempt; four attempts at most
RETRY_DELAY = 5.0  # seconds before kopf runs the handler again


def read_policy(networking: NetworkingV1Api, name: str, namespace: str) -> dict | None:
    """The NetworkPolicy as the API's JSON, or None if there is none; a server that does not
    answer in time becomes kopf.TemporaryError, so kopf retries the handler later."""
    try:
        policy = networking.read_namespaced_network_policy(name, namespace, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    except urllib3.exceptions.HTTPError as e:  # MaxRetryError from a ReadTimeoutError, after urllib3's retries
        raise kopf.TemporaryError(f"the API server did not answer in time: {e}", delay=RETRY_DELAY) from e
    return networking.api_client.sanitize_for_serialization(policy)
