"""How the command line speaks: colour where a person is watching, words always.

Colour is a courtesy, never the message: every verdict is also a word (``PASS``,
``FAIL``, ``error:``), because logs, CI and some terminals show no colour, and
``NO_COLOR`` (https://no-color.org) turns it off.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

GREEN, RED, YELLOW, BOLD, DIM = "32", "31", "33", "1", "2"


def color(text: str, code: str, *, stream: TextIO | None = None) -> str:
    """``text`` in ANSI colour ``code`` when ``stream`` (stdout) is a terminal and NO_COLOR is unset."""
    stream = sys.stdout if stream is None else stream
    return f"\033[{code}m{text}\033[0m" if stream.isatty() and not os.environ.get("NO_COLOR") else text
