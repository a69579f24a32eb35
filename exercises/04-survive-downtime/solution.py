"""Reference solution: the Tenant operator's own reconcile handler, decorators and all, as
operators/tenant/tenant_operator.py defines it.

``operatorlab exercise solution 04-survive-downtime`` prints its source.
"""

from operatorlab.operators import load_module

reconcile = load_module("tenant").reconcile
