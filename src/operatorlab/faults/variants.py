"""Broken variants of an operator, made by replacing *named* parts of its source.

A lab's bug is described as edits of named definitions, found with :mod:`ast`, not as
exact text to search and replace:

- :class:`ReplaceFunction`: a function's ``def`` (signature and body) becomes other code;
  its decorators stay;
- :class:`DropDecorator`: one decorator (``kopf.on.resume``...) goes from a function's list;
- :class:`ReplaceAssignment`: the module-level assignment that binds a name becomes other code;
- :class:`PrependToFunction`: statements go in at the start of a function's body (a step added).

So the operator's docstrings, comments and unrelated code may change freely without
breaking a lab, and the variant is made from the real operator at setup time, so it
never drifts from what it teaches about. If a named part disappears, setup (and the lab
tests) fail loudly with :class:`VariantError` instead of teaching an outdated bug.

The reference fix is the same edits the other way round: :func:`restore` puts each named
part of the *original* back into a learner's copy, whatever else the learner changed.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class VariantError(ValueError):
    """A named part is missing, ambiguous, or an edit would change nothing: the operator changed under the lab."""


# A region of a source: lines [start, end) (0-based, end exclusive), as a list slice.
Region = tuple[int, int]


class Edit(Protocol):
    """One edit of a named part of a module's source."""

    def region(self, tree: ast.Module) -> Region:
        """Where the named part is in the source ``tree`` was parsed from."""
        ...

    def replacement(self, lines: list[str], region: Region) -> list[str]:
        """The new lines for ``region`` of ``lines`` (the broken version)."""
        ...


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    found = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    if len(found) != 1:
        raise VariantError(f"expected one module-level function {name}(), found {len(found)}")
    return found[0]


def _lines_of(source: str) -> list[str]:
    """``source`` as lines, each ending in a newline: so an edit's text joins cleanly."""
    return [line if line.endswith("\n") else line + "\n" for line in source.splitlines()]


def _dotted(node: ast.expr) -> str:
    """``kopf.on.resume`` for the decorator ``@kopf.on.resume(...)`` (its callee, dotted)."""
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ast.unparse(node)


@dataclass(frozen=True)
class ReplaceFunction:
    """Replace the ``def`` of module-level function ``name`` (signature and body) by ``source``.

    Its decorators stay: ``source`` starts at the ``def`` line.
    """

    name: str
    source: str

    def region(self, tree: ast.Module) -> Region:
        node = _function(tree, self.name)
        assert node.end_lineno is not None
        return node.lineno - 1, node.end_lineno

    def replacement(self, lines: list[str], region: Region) -> list[str]:
        return _lines_of(self.source)


@dataclass(frozen=True)
class DropDecorator:
    """Remove the decorator whose callee is ``decorator`` (e.g. ``kopf.on.resume``) from ``function``."""

    function: str
    decorator: str

    def region(self, tree: ast.Module) -> Region:
        node = _function(tree, self.function)
        if not node.decorator_list:  # an empty list sits just above the def
            return node.lineno - 1, node.lineno - 1
        first, last = node.decorator_list[0], node.decorator_list[-1]
        assert last.end_lineno is not None
        return first.lineno - 1, last.end_lineno

    def replacement(self, lines: list[str], region: Region) -> list[str]:
        start, end = region
        decorators = ast.parse("".join(lines[start:end]) + "def _(): pass\n").body[0]
        assert isinstance(decorators, ast.FunctionDef)
        kept: list[str] = []
        dropped = 0
        for node in decorators.decorator_list:
            assert node.end_lineno is not None
            text = lines[start + node.lineno - 1:start + node.end_lineno]
            if _dotted(node) == self.decorator:
                dropped += 1
            else:
                kept += text
        if dropped != 1:
            raise VariantError(f"expected one @{self.decorator} on {self.function}(), found {dropped}")
        return kept


@dataclass(frozen=True)
class ReplaceAssignment:
    """Replace the module-level assignment that binds ``name`` (``A, B = ...`` binds both) by ``source``."""

    name: str
    source: str

    def region(self, tree: ast.Module) -> Region:
        found = [n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                 and self.name in _bound_names(n)]
        if len(found) != 1:
            raise VariantError(f"expected one module-level assignment to {self.name}, found {len(found)}")
        node = found[0]
        assert node.end_lineno is not None
        return node.lineno - 1, node.end_lineno

    def replacement(self, lines: list[str], region: Region) -> list[str]:
        return _lines_of(self.source)


@dataclass(frozen=True)
class PrependToFunction:
    """Insert ``source`` (statements, unindented) at the start of ``name``'s body, after its docstring.

    For a bug that is one step *added* to working code (a handler that also stamps its own
    object): the rest of the function stays as the operator has it, and :func:`restore`
    puts back the whole ``def``, as for :class:`ReplaceFunction`.
    """

    name: str
    source: str

    def region(self, tree: ast.Module) -> Region:
        return ReplaceFunction(self.name, "").region(tree)

    def replacement(self, lines: list[str], region: Region) -> list[str]:
        start, end = region
        node = ast.parse("".join(lines[start:end]).lstrip()).body[0]  # the def alone, its decorators aside
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        first = node.body[0]
        has_docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str)
        at = (first.end_lineno if has_docstring else first.lineno - 1) or 0  # lines into the region
        indent = " " * first.col_offset
        inserted = [f"{indent}{line}" if line.strip() else line for line in _lines_of(self.source)]
        return lines[start:start + at] + inserted + lines[start + at:end]


def _bound_names(node: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _parse(source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as e:
        raise VariantError(f"{what} does not parse: {e}") from e


def apply(source: str, edits: Sequence[Edit]) -> str:
    """``source`` with each edit applied in turn.

    Raises:
        VariantError: a named part is missing or ambiguous, or an edit changes nothing.
    """
    for edit in edits:
        lines = _lines_of(source)
        start, end = edit.region(_parse(source, "the operator"))
        new = edit.replacement(lines, (start, end))
        if new == lines[start:end]:
            raise VariantError(f"{edit} changes nothing")
        source = "".join(lines[:start] + new + lines[end:])
    _parse(source, "the variant")
    return source


def restore(source: str, original: str, edits: Sequence[Edit]) -> str:
    """``source`` (a learner's copy of a variant) with each edited part put back as in ``original``.

    Raises:
        VariantError: ``source`` does not parse or lacks a part the edits name.
    """
    for edit in reversed(edits):
        lines, original_lines = _lines_of(source), _lines_of(original)
        start, end = edit.region(_parse(source, "your copy"))
        o_start, o_end = edit.region(_parse(original, "the operator"))
        source = "".join(lines[:start] + original_lines[o_start:o_end] + lines[end:])
    return source
