"""PrependToFunction: a step added at the start of a function's body, and the reference fix removing it."""

from __future__ import annotations

from operatorlab.faults import variants

SOURCE = '''\
import kopf


@kopf.on.update("g", "v1", "things")
def handle(patch, **_):
    """Docstring,
    on two lines."""
    patch.status["x"] = 1


def bare(x):
    return x
'''


def test_statements_go_in_after_the_docstring_and_restore_removes_them():
    edits = [variants.PrependToFunction("handle", 'patch.metadata.annotations["a"] = "b"\n')]
    broken = variants.apply(SOURCE, edits)
    assert '    on two lines."""\n    patch.metadata.annotations["a"] = "b"\n    patch.status["x"] = 1\n' in broken
    assert '@kopf.on.update("g", "v1", "things")\ndef handle' in broken  # the decorators stay
    assert variants.restore(broken, SOURCE, edits) == SOURCE


def test_a_function_without_a_docstring_gets_them_first():
    edits = [variants.PrependToFunction("bare", "x += 1\n")]
    broken = variants.apply(SOURCE, edits)
    assert "def bare(x):\n    x += 1\n    return x\n" in broken
    assert variants.restore(broken, SOURCE, edits) == SOURCE
