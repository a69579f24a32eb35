"""``bench/results/latest.md``: one section per question, each replaced in place by the part that measures it."""

from __future__ import annotations

from pathlib import Path

LATEST = Path(__file__).parent / "results" / "latest.md"


def write_section(heading: str, section: str, path: Path = LATEST) -> None:
    """Put ``section`` (which starts with ``heading``) in place of an earlier one, or at the end.

    An earlier section runs from its heading to the next ``## `` heading: the sections
    after it stay as they were, so a part of the bench run alone (``--only scale``)
    rewrites its own section and nothing else.
    """
    text = path.read_text() if path.exists() else "# Operator Lab benchmarks\n\n"
    if heading not in text:
        path.write_text(text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n")
        return
    before, after = text.split(heading, 1)
    rest = after[after.index("\n## "):] if "\n## " in after else ""
    path.write_text(before.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n" + rest)
