"""Version numbers as the doctor compares them: Python against ``requires-python``, packages
against their pins in ``pyproject.toml`` (kubectl against the API server is
:func:`operatorlab.kubectl.skew_warning`'s).

A small reader rather than the ``packaging`` library: the lab's pins use only ``>=``,
``<`` and friends on dotted numbers, and the doctor must run in a venv that may be
missing things (that is what it checks).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

Version = tuple[int, ...]

_OPERATORS: dict[str, Callable[[Version, Version], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq, "!=": operator.ne,
}
_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*v?([0-9]+(?:\.[0-9]+)*)\s*$")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*?)\s*(?:;.*)?$")


def parse(text: str) -> Version:
    """The leading dotted number of ``text``: ``3.11.7``, ``v1.32.4-dispatcher`` -> (1, 32, 4), ``go1.26.8``.

    Raises:
        ValueError: ``text`` holds no number.
    """
    match = re.search(r"[0-9]+(?:\.[0-9]+)*", text)
    if not match:
        raise ValueError(f"no version number in {text!r}")
    return tuple(int(part) for part in match.group(0).split("."))


def satisfies(version: Version, specifier: str) -> bool:
    """Whether ``version`` meets every comma-separated clause of ``specifier`` (``">=1.44,<2"``).

    Shorter versions are padded with zeros (``3.11`` is ``3.11.0``); an empty specifier
    allows anything.

    Raises:
        ValueError: a clause this reader does not know (``~=``, wildcards).
    """
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        match = _CLAUSE.match(clause)
        if not match:
            raise ValueError(f"cannot read the version clause {clause!r}")
        op, bound = match.group(1), parse(match.group(2))
        width = max(len(version), len(bound))
        if not _OPERATORS[op](_pad(version, width), _pad(bound, width)):
            return False
    return True


def requirement(text: str) -> tuple[str, str]:
    """``"kopf>=1.44,<2"`` -> ``("kopf", ">=1.44,<2")``: a dependency's name (lower case) and its pins.

    Raises:
        ValueError: not a requirement.
    """
    match = _REQUIREMENT.match(text)
    if not match:
        raise ValueError(f"cannot read the requirement {text!r}")
    return match.group(1).lower().replace("_", "-"), match.group(2)


def _pad(version: Version, width: int) -> Version:
    return version + (0,) * (width - len(version))


