"""Reference solution: a Tenant may ask for at most MAX_CPU CPUs; above that it is refused, in words."""

import kopf
from kubernetes.utils import parse_quantity

MAX_CPU = 8  # CPUs: the most one Tenant may ask for


def validate_quota(spec, **_):
    """kopf calls this for every create and update of a Tenant it is sent: raise kopf.AdmissionError to refuse."""
    asked = spec.get("cpuQuota")
    # A quantity, not a string or an int: "8000m" is 8 CPUs, "9" is more than 8, and 12 > "8" is no comparison.
    if parse_quantity(str(asked)) > MAX_CPU:
        # The message is what kubectl prints; the code is the HTTP status the user gets (kopf's default is 500).
        raise kopf.AdmissionError(f"cpuQuota {asked} is above the cap of {MAX_CPU} CPUs", code=422)
