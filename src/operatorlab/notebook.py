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


def benchmark(name: str) -> dict[str, Any]:
    """What ``make bench`` measured and stored in ``bench/results/<name>.json``, for a lesson to quote.

    A lesson measures at the sizes that fit in a minute; the bench goes on to the sizes that
    take minutes (1,000 Tenants), and the lesson shows those numbers beside its own, with
    when, on what machine and under what load they were measured.

    Raises:
        FileNotFoundError: the bench has not stored them (``make bench`` does).
    """
    import json

    from operatorlab import paths

    path = paths.repo_root() / "bench" / "results" / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark results {path}: `make bench` measures and stores them (minutes)")
    results: dict[str, Any] = json.loads(path.read_text())
    return results
