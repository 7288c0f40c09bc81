"""Extract relational facts from Python source (see `facts.schema` for the relations)."""

from __future__ import annotations

from dataclasses import dataclass

from .discover import Skipped, SourceText, iter_sources, read_source
from .extract import FileExtractor, Rows, module_name_for
from .schema import INPUT_RELATIONS, NO_NODE
from .tree import parse

__all__ = [
    "INPUT_RELATIONS",
    "NO_NODE",
    "FileFacts",
    "Skipped",
    "SourceText",
    "extract_source",
    "iter_sources",
    "read_source",
]


@dataclass
class FileFacts:
    relpath: str
    rows: Rows
    node_count: int
    lines: int


def extract_source(source: SourceText, module: str | None = None) -> FileFacts | Skipped:
    """Parse one file and return its facts with file-local node ids, or why it was skipped."""
    try:
        parsed = parse(source.text)
    except Exception as exc:  # the native parser must never take the run down
        return Skipped(source.relpath, f"parser failure: {exc.__class__.__name__}")
    if parsed.error_line is not None:
        return Skipped(source.relpath, f"SyntaxError: invalid syntax at line {parsed.error_line}")
    lines = source.text.count("\n") + (0 if source.text.endswith("\n") else 1)
    is_package = source.relpath.endswith("__init__.py")
    name = module if module is not None else module_name_for(source.relpath)
    extractor = FileExtractor(source.relpath, name, is_package)
    try:
        rows = extractor.extract(parsed.root, lines)
    except RecursionError:
        return Skipped(source.relpath, "too deeply nested to analyse")
    return FileFacts(source.relpath, rows, extractor.node_count, lines)
