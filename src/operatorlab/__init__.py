"""Operator Lab: learn to write Kubernetes controllers in Python, on a real API server.

Subpackages, one concern each (data flows downward only):

- :mod:`operatorlab.cluster`      start, find and describe a real cluster (local or existing)
- :mod:`operatorlab.controllers`  the hand-written reference controllers the notebooks build
- :mod:`operatorlab.operators`    run the kopf operators in ``operators/`` as processes
- :mod:`operatorlab.widgets`      ipywidgets views for the notebooks
- :mod:`operatorlab.labs`         the guided-lab engine
"""

__version__ = "0.1.0"
