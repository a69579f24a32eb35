"""A conversion webhook for a CRD's versions, in the kopf process that serves its admission handlers (lesson 14).

kopf 1.45.2 serves admission only: ``kopf/_core/engines/admission.py`` answers ``AdmissionReview``
(validating and mutating handlers) and nothing in kopf reads a ``ConversionReview``. So this file,
run by ``kopf run`` as :mod:`operatorlab.kopf_webhook` is, adds an aiohttp server of its own on
kopf's event loop (aiohttp comes with kopf) at startup, and stops it at cleanup.
:class:`operatorlab.conversion.ConversionWebhook` starts it and says in the environment what to serve:

- ``OPERATORLAB_CONVERSION_HANDLERS``: the file defining ``convert(obj, version) -> dict``;
- ``OPERATORLAB_WEBHOOK_PORT``, ``..._CERT``, ``..._KEY``: where and with which certificate it listens.

:func:`review` is the protocol (``apiextensions.k8s.io/v1`` ``ConversionReview``), pure.
"""

from __future__ import annotations

import importlib.util
import os
import ssl
import sys
import traceback
from collections.abc import Callable
from typing import Any

SENTINEL = "sentinel: the conversion webhook answers"

Convert = Callable[[dict[str, Any], str], dict[str, Any]]


def review(body: dict[str, Any], convert: Convert) -> dict[str, Any]:
    """The ``ConversionReview`` answering ``body``: every object converted to ``request.desiredAPIVersion``.

    The response echoes the request's ``uid``; ``result.status`` is ``Success``, or ``Failure`` with a
    message the API server passes on (one object failing fails them all: the request is one LIST or GET).
    An object named ``sentinel-...`` is refused before ``convert`` sees it: the caller's proof that its
    CRD's conversion is in force and this server answers.
    """
    request = body.get("request") or {}
    desired = str(request.get("desiredAPIVersion", ""))
    response: dict[str, Any] = {"uid": request.get("uid", "")}
    try:
        version = desired.split("/")[-1]
        objects = request.get("objects") or []
        if any(str((o.get("metadata") or {}).get("name", "")).startswith("sentinel-") for o in objects):
            raise LookupError(SENTINEL)
        converted = [convert(obj, version) for obj in objects]
        for obj in converted:
            obj["apiVersion"] = desired
        response.update(convertedObjects=converted, result={"status": "Success"})
    except Exception as e:  # noqa: BLE001 - the learner's code failed: that is the answer, not a crash
        response["result"] = {"status": "Failure", "message": f"{type(e).__name__}: {e}"}
        traceback.print_exc()
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


def _load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("operatorlab_conversion_handlers", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


if "OPERATORLAB_CONVERSION_HANDLERS" in os.environ:  # run by kopf, not imported to be read
    import kopf
    from aiohttp import web

    _convert: Convert = _load(os.environ["OPERATORLAB_CONVERSION_HANDLERS"]).convert
    _runner: web.AppRunner | None = None

    async def _handle(request: web.Request) -> web.Response:
        return web.json_response(review(await request.json(), _convert))

    @kopf.on.startup()
    async def serve(**_: Any) -> None:
        global _runner
        env = os.environ
        app = web.Application()
        app.router.add_post("/convert", _handle)
        _runner = web.AppRunner(app)
        await _runner.setup()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(env["OPERATORLAB_WEBHOOK_CERT"], env["OPERATORLAB_WEBHOOK_KEY"])
        await web.TCPSite(_runner, "127.0.0.1", int(env["OPERATORLAB_WEBHOOK_PORT"]), ssl_context=context).start()

    @kopf.on.cleanup()
    async def stop(**_: Any) -> None:
        if _runner is not None:
            await _runner.cleanup()
