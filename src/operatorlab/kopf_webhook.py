"""A kopf operator that serves admission handlers from another file: run by ``kopf run`` (lesson 10).

:class:`operatorlab.admission.Webhook` starts it as an :class:`~operatorlab.operators.OperatorProcess`
and says, in the environment, what to serve:

- ``OPERATORLAB_WEBHOOK_HANDLERS``: the file with the handler functions (the lesson's
  ``tenant_webhooks.py``, or a learner's exercise file), loaded here as a module;
- ``OPERATORLAB_WEBHOOK_FUNCTIONS``: ``id=function,...``: each function is registered with
  ``@kopf.on.validate`` under that id, for the resource ``OPERATORLAB_WEBHOOK_RESOURCE``
  (``group/version/plural``);
- ``OPERATORLAB_WEBHOOK_PORT``, ``..._CERT``, ``..._KEY``, ``..._CA``: where and with which
  certificate :class:`kopf.WebhookServer` listens (made by ``cryptography``, never kopf's
  self-signing, which needs ``certbuilder``).

``settings.admission.managed`` stays ``None`` (kopf 1.45's default): kopf then creates no
``ValidatingWebhookConfiguration`` and the caller writes its own, which says which objects
are sent here, and what the API server does when this server does not answer.
One more handler, ``sentinel``, refuses any object named ``sentinel-...``: the caller's
proof that its configuration is in force and this server answers.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

import kopf

GROUP, VERSION, PLURAL = os.environ["OPERATORLAB_WEBHOOK_RESOURCE"].split("/")


def _load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("operatorlab_webhook_handlers", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


handlers = _load(os.environ["OPERATORLAB_WEBHOOK_HANDLERS"])
for pair in os.environ["OPERATORLAB_WEBHOOK_FUNCTIONS"].split(","):
    handler_id, function = pair.split("=")
    kopf.on.validate(GROUP, VERSION, PLURAL, id=handler_id)(getattr(handlers, function))


@kopf.on.validate(GROUP, VERSION, PLURAL, id="sentinel")
def sentinel(name: str | None, **_: Any) -> None:
    if (name or "").startswith("sentinel-"):
        raise kopf.AdmissionError("sentinel: the webhook answers", code=422)


@kopf.on.startup()
def serve(settings: kopf.OperatorSettings, **_: Any) -> None:
    env = os.environ
    settings.admission.server = kopf.WebhookServer(
        addr="127.0.0.1", host="127.0.0.1", port=int(env["OPERATORLAB_WEBHOOK_PORT"]),
        certfile=env["OPERATORLAB_WEBHOOK_CERT"], pkeyfile=env["OPERATORLAB_WEBHOOK_KEY"],
        cafile=env["OPERATORLAB_WEBHOOK_CA"])
    settings.admission.managed = None  # the caller writes the ValidatingWebhookConfiguration
