"""Memory of a process, from ``/proc/<pid>/status`` (Linux): what every part of the bench reports."""

from __future__ import annotations

from pathlib import Path


def status_mib(pid: int, field: str = "VmRSS") -> float:
    """A ``kB`` field of ``/proc/<pid>/status`` in MiB (``VmRSS``: resident now; ``VmHWM``: its peak); 0 if gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except FileNotFoundError:
        return 0.0
    return next((int(line.split()[1]) for line in lines if line.startswith(f"{field}:")), 0) / 1024
