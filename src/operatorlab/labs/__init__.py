"""Guided fault-injection labs and CKA-style drills, checked automatically on a real cluster.

- :mod:`~operatorlab.labs.base`: :class:`Lab` (setup, inject, check, hints, solve, reset),
  :class:`Check`, :class:`LabContext` (cluster + state folder).
- :mod:`~operatorlab.labs.state`: the typed records a lab keeps between commands.
- :mod:`~operatorlab.labs.cleanup`: reset, through the dynamic client.
- :mod:`~operatorlab.labs.registry`: finds ``labs/<id>/lab.py``.
- :mod:`~operatorlab.labs.runner`: start/check/hint/solve/reset and drills, for the CLI
  (``operatorlab lab ...``, ``operatorlab drill ...``) and the notebook panel.
- :mod:`~operatorlab.labs.tenantlab`: labs around the Tenant operator and its broken variants.

The faults themselves (the API fault proxy, control-plane components, broken variants)
are a layer below, in :mod:`operatorlab.faults`, and know nothing of labs.
"""

from operatorlab.labs.base import Check, Lab, LabContext
from operatorlab.labs.errors import LabError, LabNotStarted, LabUnavailable, UnknownLab
from operatorlab.labs.registry import discover, drills, get

__all__ = ["Check", "Lab", "LabContext", "LabError", "LabNotStarted", "LabUnavailable", "UnknownLab", "discover",
           "drills", "get"]
