"""Terminal output shared by every command: one rule for colour."""

from __future__ import annotations

import os
import sys


def color(text: str, code: str) -> str:
    """``text`` in the ANSI colour ``code`` when stdout is a terminal and ``NO_COLOR`` is unset."""
    return f"\033[{code}m{text}\033[0m" if sys.stdout.isatty() and not os.environ.get("NO_COLOR") else text
