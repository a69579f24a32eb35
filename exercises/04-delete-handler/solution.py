"""Reference solution: the Tenant operator's own function, as operators/tenant/tenant_operator.py defines it.

``operatorlab exercise solution 04-delete-handler`` prints its source.
"""

from operatorlab.operators import load_module

delete_tenant_namespace = load_module("tenant").delete_tenant_namespace
