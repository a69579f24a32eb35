"""Reference solution: spec.region is set once; every other change to the spec passes."""

RULES = [
    {
        # A transition rule (it names oldSelf): the API server runs it on updates only, so a create
        # passes. On spec, not on region: a rule on region itself would not run when the region is
        # removed (a field's rules run only where the field is), and one comparing the whole spec
        # would refuse every update.
        "rule": "!has(oldSelf.region) || has(self.region) && self.region == oldSelf.region",
        "message": "region is immutable: it cannot be changed or removed once set",
    },
]
