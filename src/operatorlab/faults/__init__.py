"""Faults injected from outside an operator: any operator, a learner's included, can meet them.

- :mod:`~operatorlab.faults.proxy`: an API fault proxy between an operator and the apiserver:
  429/5xx answers, cut watches, 410 Gone, and SIGKILL of the operator right after the
  apiserver acknowledged a chosen write.
- :mod:`~operatorlab.faults.components`: stop and start control-plane components of a local cluster.
- :mod:`~operatorlab.faults.variants`: broken variants of an operator, by editing named
  functions, decorators and assignments of its source.

This layer sits below the labs (:mod:`operatorlab.labs`) and imports nothing of them.
"""
