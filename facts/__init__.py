"""Source → facts, with no judgement: the files found (discover.py), a notebook turned into one
module (notebook.py), the relational facts of each file (extract.py; `facts.schema` lists the
relations), extracted in worker processes (parallel.py) and packed for the store (store.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .discover import Skipped, SourceText, iter_sources, read_source
from .extract import FileExtractor, Rows, module_name_for
from .schema import INPUT_RELATIONS, NO_NODE
from .tree import ParseResult, parse

__all__ = [
    "INPUT_RELATIONS",
    "NO_NODE",
    "FileFacts",
    "Skipped",
    "SourceText",
    "extract_source",
    "iter_sources",
    "line_count",
    "read_source",
]


@dataclass
class FileFacts:
    relpath: str
    rows: Rows
    node_count: int
    lines: int
    partial: str | None = None  # why only the intact parts were extracted


def line_count(text: str) -> int:
    """Lines of a source text, a last line without a newline included."""
    return text.count("\n") + (0 if text.endswith("\n") else 1)


# A file whose syntax errors cover more than this share of its lines is beyond recovery.
MAX_BROKEN_SHARE = 0.5


def extract_source(
    source: SourceText,
    module: str | None = None,
    extractor: Callable[[str, str, bool], FileExtractor] = FileExtractor,
    parsed: ParseResult | None = None,
) -> FileFacts | Skipped:
    """Parse one file and return its facts with file-local node ids, or why it was skipped.

    A file with syntax errors is still extracted, statement by statement, when the errors are
    local: the statements they touch are left out and the file is marked partial.  `extractor`
    makes the FileExtractor (file, module, is_package): a subclass may record more as it goes
    (facts.spans), numbering the nodes as a run does since everything else is this code;
    `parsed` is the text already parsed (facts.spans keeps the parser's tree)."""
    try:
        if parsed is None:
            parsed = parse(source.text)
    except Exception as exc:  # the native parser must never take the run down
        return Skipped(source.relpath, f"parser failure: {exc.__class__.__name__}")
    if parsed.python2_line is not None:
        return Skipped(
            source.relpath,
            f"Python 2 (a print/exec statement at line {parsed.python2_line}): port it to Python 3 first",
        )
    lines = line_count(source.text)
    first_error = parsed.error_line
    unknown_syntax = first_error is not None and _newer_syntax_only(source.text, parsed.errors)
    if first_error is not None and parsed.error_lines() > MAX_BROKEN_SHARE * max(lines, 1):
        return Skipped(source.relpath, _syntax_reason(first_error, unknown_syntax))
    is_package = source.relpath.endswith("__init__.py")
    name = module if module is not None else module_name_for(source.relpath)
    walker = extractor(source.relpath, name, is_package)
    try:
        rows = walker.extract(parsed.root, lines, parsed.errors, parsed.binding_lines)
    except RecursionError:
        return Skipped(source.relpath, "too deeply nested to analyse")
    partial = None
    if first_error is not None:
        if walker.intact_statements == 0:
            return Skipped(source.relpath, _syntax_reason(first_error, unknown_syntax))
        if unknown_syntax:
            partial = (
                f"{NEWER_SYNTAX} at line {first_error}: {walker.dropped_statements} statement(s) "
                "left out, the rest assessed"
            )
        else:
            partial = (
                f"SyntaxError at line {first_error}: {walker.dropped_statements} statement(s) "
                "left out, the intact parts assessed"
            )
        rows["partial_file"].append((source.relpath, partial))
    return FileFacts(source.relpath, rows, walker.node_count, lines, partial)


# Valid Python the tree-sitter grammar cannot read yet: type parameter defaults (PEP 696,
# Python 3.13), as in `def f[T = float](x: T)`, `class C[T = int]`, `type A[T = int] = list[T]`.
NEWER_SYNTAX = "Python 3.13 syntax the parser does not know (a type parameter default, PEP 696)"
_TYPE_PARAMETER_DEFAULT = re.compile(r"^\s*(?:async\s+def|def|class|type)\s+\w+\s*\[[^\]]*?=")


def _newer_syntax_only(text: str, errors: list[tuple[int, int]]) -> bool:
    """Whether every syntax error the parser found is on a line that opens a definition with
    a type parameter default: valid code, which the parser's grammar is too old for."""
    lines = text.split("\n")
    return all(
        any(_TYPE_PARAMETER_DEFAULT.match(lines[n - 1]) for n in range(start, end + 1) if 0 < n <= len(lines))
        for start, end in errors
    )


def _syntax_reason(line: int, newer_syntax: bool) -> str:
    return f"{NEWER_SYNTAX} at line {line}" if newer_syntax else f"SyntaxError: invalid syntax at line {line}"
