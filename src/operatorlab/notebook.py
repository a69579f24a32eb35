"""Small helpers for the lesson notebooks.

Notebooks *reveal* the reference implementations instead of pasting copies of
them, so the code a learner reads is the code that runs and is tested.
"""

from __future__ import annotations

import inspect
from typing import Any


def show_source(obj: Any) -> Any:
    """Display the source of a function, class or module, syntax-highlighted.

    Returns an ``IPython.display.Code`` (rendered by Jupyter when it is a cell's value).

    Raises:
        TypeError: ``obj`` has no Python source (a builtin, say).
    """
    from IPython.display import Code

    return Code(inspect.getsource(obj), language="python")
