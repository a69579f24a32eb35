"""Reference solution: cpuQuota is a CPU quantity, as Kubernetes reads quantities, and not below zero."""

RULES = [
    {
        # int-or-string: self is an int or a string. A string is judged by the API server's own
        # quantity parser (the Kubernetes CEL quantity library), so "1e3" and "500m" pass and
        # "2 cores" does not; either form must not be negative.
        "rule": "type(self) == int ? self >= 0 : isQuantity(self) && !quantity(self).isLessThan(quantity('0'))",
        "message": "cpuQuota must be a CPU quantity, such as 2, 500m or 1e3",
    },
]
