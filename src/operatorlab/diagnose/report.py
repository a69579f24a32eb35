"""Findings, and how ``doctor`` and ``why`` print them: a verdict in words, then the fix.

A finding is one thing checked. Its severity is a word, never a colour alone (colour is
added where a person watches, see :mod:`operatorlab.terminal`):

``PROBLEM``  something is wrong; the command exits non-zero; ``fix`` says how to fix it.
``WARNING``  works, but will surprise someone (a kubectl too old, status fields pruned).
``OK``       checked and fine.
``INFO``     a fact worth seeing, not a verdict (which operator processes were seen).

Problems print first, so the likely cause is the first thing read.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TextIO

from operatorlab.terminal import BOLD, DIM, GREEN, RED, YELLOW, color

Severity = Literal["PROBLEM", "WARNING", "OK", "INFO"]

#: Print order: what needs a person's action first.
ORDER: dict[Severity, int] = {"PROBLEM": 0, "WARNING": 1, "OK": 2, "INFO": 3}
_COLOURS: dict[Severity, str] = {"PROBLEM": RED, "WARNING": YELLOW, "OK": GREEN, "INFO": DIM}
_INDENT = " " * 11


@dataclass(frozen=True)
class Finding:
    """One check's verdict.

    Args:
        severity: see the module docstring.
        title: one line: what was found.
        details: further lines: the evidence, and what a fix costs.
        fix: the one command that fixes a problem (or heals a warning).
        alternative: a second way, when the first is not always possible (its cost in ``details``).
    """

    severity: Severity
    title: str
    details: tuple[str, ...] = ()
    fix: str | None = None
    alternative: str | None = None


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """Problems first, then warnings, OKs and facts; the order within each kept."""
    return sorted(findings, key=lambda f: ORDER[f.severity])


def exit_code(findings: Iterable[Finding]) -> int:
    """1 if any finding is a PROBLEM, else 0 (warnings do not fail a check)."""
    return 1 if any(f.severity == "PROBLEM" for f in findings) else 0


def summary(findings: Sequence[Finding]) -> str:
    """``2 problems, 1 warning`` or ``no problems``: the last line a person reads."""
    problems = sum(f.severity == "PROBLEM" for f in findings)
    warnings = sum(f.severity == "WARNING" for f in findings)
    parts = [f"{problems} problem{'s' * (problems != 1)}"] if problems else ["no problems"]
    if warnings:
        parts.append(f"{warnings} warning{'s' * (warnings != 1)}")
    return ", ".join(parts)


def render(findings: Iterable[Finding], *, rank: bool = True, stream: TextIO | None = None) -> str:
    """The findings as text, one block each, problems first (``rank=False``: as given, a checklist)::

        PROBLEM  the title
                 a detail
                 fix: the command
    """
    stream = sys.stdout if stream is None else stream
    lines = []
    for f in ranked(findings) if rank else findings:
        word = color(f"{f.severity:<8}", _COLOURS[f.severity], stream=stream)
        lines.append(f"  {word} {f.title}")
        lines.extend(f"{_INDENT}{d}" for d in f.details)
        if f.fix:
            lines.append(f"{_INDENT}{color('fix:', BOLD, stream=stream)} {f.fix}")
        if f.alternative:
            lines.append(f"{_INDENT}{color('or: ', BOLD, stream=stream)} {f.alternative}")
    return "\n".join(lines)
