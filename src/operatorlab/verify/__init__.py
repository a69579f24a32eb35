"""``operatorlab verify``: one behavioural suite that grades any operator from the outside.

- :mod:`~operatorlab.verify.suite`: the seven properties and their run (:func:`verify`).
- :mod:`~operatorlab.verify.world`: what it reads: a resource's children by owner
  reference, its conditions and Events, the operator's requests as the fault proxy saw them.
- :mod:`~operatorlab.verify.cli`: the command; its verdict is the exercise engine's.

The capstone exercise (``exercises/08-capstone``) grades a learner's operator with it.
"""

from operatorlab.verify.suite import PROPERTIES, InputError, Inputs, verify

__all__ = ["PROPERTIES", "InputError", "Inputs", "verify"]
