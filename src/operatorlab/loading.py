"""Load a Python file that defines exactly one subclass of a given base (a lab, an exercise)."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def one_subclass(path: Path, base: type[T], module_name: str) -> type[T]:
    """Import ``path`` as ``module_name`` and return the one subclass of ``base`` it defines.

    Raises:
        TypeError: it defines none, or several.
    """
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    found = [obj for obj in vars(module).values()
             if inspect.isclass(obj) and issubclass(obj, base) and obj is not base and obj.__module__ == module_name]
    if len(found) != 1:
        raise TypeError(f"{path} must define exactly one {base.__name__} subclass, "
                        f"found {[c.__name__ for c in found]}")
    return found[0]
