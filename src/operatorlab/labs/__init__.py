"""Guided fault-injection labs and CKA-style drills, checked automatically on a real cluster.

- :mod:`~operatorlab.labs.base`: :class:`Lab` (setup, inject, check, hints, solve, reset),
  :class:`Check`, :class:`LabContext` (cluster + state file).
- :mod:`~operatorlab.labs.registry`: finds ``labs/<id>/lab.py``.
- :mod:`~operatorlab.labs.runner`: start/check/hint/solve/reset and drills, for the CLI
  (``operatorlab lab ...``, ``operatorlab drill ...``) and the notebook panel.
- :mod:`~operatorlab.labs.faults`: operator kill at a reconcile point, control-plane
  component stop/start, broken operator variants.
- :mod:`~operatorlab.labs.proxy`: an API fault proxy (429/500/503, cut watches, 410 Gone).
"""

from operatorlab.labs.base import Check, Lab, LabContext, LabNotStarted, LabUnavailable
from operatorlab.labs.registry import UnknownLab, discover, drills, get

__all__ = ["Check", "Lab", "LabContext", "LabNotStarted", "LabUnavailable", "UnknownLab", "discover", "drills", "get"]
