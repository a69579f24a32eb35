"""Diagnoses for a workshop: is this machine ready (``doctor``), and why a kopf handler did not fire (``why``).

Both print findings (:mod:`~operatorlab.diagnose.report`): ``PROBLEM``, ``WARNING``, ``OK``
or ``INFO`` in words, and for each problem the one command that fixes it. What they
decide is pure and unit-tested (:mod:`versions`, :mod:`kopfstate`, the ``diagnose``
functions); what they read comes from the real cluster and the real machine.

- :mod:`doctor`: Python, packages, Go or the built binaries, disk, ports, the cluster,
  kubectl and its version skew, RBAC for CRDs, the CRDs of ``crds/``.
- :mod:`why`: one object's finalizers, kopf's handler progress, peering pauses, the
  CRD's served versions and status pruning, an operator's RBAC, the object's Events.
"""
