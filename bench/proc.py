"""What every part of the bench reports about the machine: a process's memory (``/proc/<pid>/status``), the machine."""

from __future__ import annotations

from pathlib import Path


def status_mib(pid: int, field: str = "VmRSS") -> float:
    """A ``kB`` field of ``/proc/<pid>/status`` in MiB (``VmRSS``: resident now; ``VmHWM``: its peak); 0 if gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except FileNotFoundError:
        return 0.0
    return next((int(line.split()[1]) for line in lines if line.startswith(f"{field}:")), 0) / 1024


def machine() -> str:
    """The machine in a few words, e.g. ``2 CPUs, 24 GiB``."""
    import os

    mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal:"))
    return f"{os.cpu_count()} CPUs, {mem / 1024 / 1024:.0f} GiB"
