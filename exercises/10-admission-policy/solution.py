"""Reference solution: every Tenant names its team, when created and for as long as it lives."""


def policy(group: str, resource: str) -> dict:
    """The spec of a ValidatingAdmissionPolicy for the Tenants of ``group`` (resource ``resource``, version v1)."""
    return {
        "failurePolicy": "Fail",
        # The Tenants and nothing else: a policy that matched every resource would refuse every
        # ConfigMap, Pod and Lease without the label. UPDATE too: a label can be removed later.
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": [resource],
        }]},
        "validations": [{
            # labels may be absent altogether: has() first, or the expression fails (and failurePolicy decides).
            "expression": "has(object.metadata.labels) && 'hedronite.io/team' in object.metadata.labels",
            "message": "a Tenant must name its team in the label hedronite.io/team",
        }],
    }


# What the binding does when a validation fails: Deny refuses the request; Warn and Audit let it through.
VALIDATION_ACTIONS = ["Deny"]
