"""Reference solution: the lesson's own conversion (operatorlab.nsb_conversion), lossless both ways."""

from operatorlab.nsb_conversion import EXEMPT, convert  # noqa: F401 - what the webhook serves
