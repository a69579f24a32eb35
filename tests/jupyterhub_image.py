"""What workshop/jupyterhub/Dockerfile puts where, read from the Dockerfile itself.

Shared by tests/unit/test_jupyterhub_image.py (the image, the start script and values.yaml
agree) and tests/integration/test_jupyterhub_unprivileged.py (which lays out the image's
course the way the Dockerfile does, so what it proves holds for what the image holds).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HUB = REPO / "workshop" / "jupyterhub"
DOCKERFILE = HUB / "Dockerfile"
START_SCRIPT = HUB / "start.sh"
VALUES = HUB / "values.yaml"

#: Where the image keeps the read-only course that operatorlab-start copies for each learner.
COURSE = "/opt/operatorlab"


def instructions(stage: int = -1) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of one build stage (default: the last), continuations joined."""
    lines: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        pending += raw.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        lines.append(pending.strip())
        pending = ""
    parsed = [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]
    starts = [i for i, (name, _) in enumerate(parsed) if name == "FROM"]
    start = starts[stage]
    end = starts[stage + 1] if stage != -1 and stage + 1 < len(starts) else len(parsed)
    return parsed[start:end]


def args() -> dict[str, str]:
    """The final stage's ``ARG name=default`` values."""
    out = {}
    for name, rest in instructions():
        if name == "ARG" and "=" in rest:
            key, value = rest.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def expand(text: str) -> str:
    """``text`` with the final stage's ``${ARG}`` defaults substituted."""
    values = args()
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], text)


def env() -> dict[str, str]:
    """The final stage's ``ENV`` (``KEY=value`` pairs), ARGs substituted."""
    out = {}
    for name, rest in instructions():
        if name == "ENV":
            for pair in shlex.split(rest):
                key, value = pair.split("=", 1)
                out[key] = expand(value)
    return out


def copies() -> list[tuple[list[str], str]]:
    """The final stage's ``COPY`` instructions from the build context: ``(sources, destination)``."""
    out = []
    for name, rest in instructions():
        if name != "COPY":
            continue
        words = [w for w in shlex.split(rest) if not w.startswith("--")]
        if "--from=" not in rest:
            out.append((words[:-1], words[-1]))
    return out


def course_dirs() -> list[str]:
    """The top-level directories of the checkout the image copies into :data:`COURSE`."""
    return [src.rstrip("/") for sources, dest in copies() for src in sources
            if dest.rstrip("/") == f"{COURSE}/{src.rstrip('/')}"]
