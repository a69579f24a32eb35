"""GET any path of the Kubernetes API as JSON: what ``why`` and ``doctor`` read beyond the typed clients.

Custom resources, discovery documents and peering objects have no typed model, and a
typed model would drop fields anyway. The request goes through the client's REST layer
with the client's credentials, as ``operatorlab.controllers.metrics`` reads ``/metrics``:
``ApiClient.call_api`` changed its signature between the kubernetes client versions
pyproject.toml allows (31 to 37), ``rest_client.request(method, url, headers=...)`` did not.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any


def get_json(api_client: Any, path: str, query: Mapping[str, str] | None = None, *,
             timeout: float = 30.0) -> dict[str, Any]:
    """``GET path?query`` as a dict (``query``: e.g. ``{"fieldSelector": "involvedObject.uid=..."}``).

    Raises:
        kubernetes.client.ApiException: the API server refused (404, 403, ...); ``status`` set.
    """
    from kubernetes import client

    configuration = api_client.configuration
    headers = {"Accept": "application/json", "User-Agent": api_client.user_agent}
    for auth in configuration.auth_settings().values():  # a bearer token, if any (client certs are in the pool)
        if auth.get("in") == "header" and auth.get("value"):
            headers[auth["key"]] = auth["value"]
    url = configuration.host + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
    request: Callable[..., Any] = api_client.rest_client.request  # untyped in the client package
    response = request("GET", url, headers=headers, _request_timeout=timeout)
    if getattr(response, "data", None) is None:
        response.read()
    body = response.data.decode("utf-8", errors="replace") if isinstance(response.data, bytes) else str(response.data)
    if not 200 <= response.status <= 299:
        raise client.ApiException(status=response.status, reason=f"GET {path}: {body[:300]}")
    decoded = json.loads(body)
    return decoded if isinstance(decoded, dict) else {}


def get_or_none(api_client: Any, path: str, query: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """As :func:`get_json`, but None where the object does not exist (404) or may not be read (403)."""
    from kubernetes import client

    try:
        return get_json(api_client, path, query)
    except client.ApiException as e:
        if e.status in (403, 404):
            return None
        raise
