"""What can go wrong driving a lab; each message names the command that fixes it."""

from __future__ import annotations


class LabError(RuntimeError):
    """Base of the lab engine's errors (the CLI prints them without a traceback)."""


class LabUnavailable(LabError):
    """The lab needs something this cluster cannot give (e.g. stopping a control-plane component)."""


class LabNotStarted(LabError):
    """``check``/``solve``/``hint`` on a lab that was never set up (no state file)."""


class UnknownLab(LabError, ValueError):
    """No lab of that id (the message lists those there are)."""


class BadState(LabError):
    """A state file this version cannot read (written by another version, or edited by hand)."""
