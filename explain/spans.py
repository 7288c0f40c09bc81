"""A proof's nodes as code: the column each starts at and its own text, and a notebook's lines
as cells.

Only at explain time: the files a proof touches are extracted again from the text they were
assessed from, recording where each node id is (facts.spans); the facts themselves hold lines
only.  A file whose text on disk is no longer that text shows no code, rather than code that is
no longer there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..facts.discover import SourceText, read_source
from ..facts.spans import FileSpans, Span, SpanDrift, file_spans

if TYPE_CHECKING:
    from ..pipeline.assessment import Assessment

CODE_WIDTH = 60  # characters of a node's text shown; longer ones end in "…"
_OPENERS = "([{"


class NotebookLines(Protocol):
    """What a notebook's cells are read from (facts.notebook.NotebookSource)."""

    def location(self, line: int) -> tuple[int, int]: ...


@dataclass(frozen=True, slots=True)
class NodeCode:
    column: int  # 1-based
    code: str  # the node's own text, as `node_text` shows it


class AssessedSources:
    """The text each file was assessed from (relative path -> text; a notebook's cells joined
    into one module), the notebooks' way back from module lines to cells and, with `root`,
    the tree the files are read from, to check that a file is still that text."""

    def __init__(
        self,
        texts: Mapping[str, str],
        notebooks: Mapping[str, NotebookLines] | None = None,
        root: Path | None = None,
    ) -> None:
        self.texts = texts
        self.notebooks = notebooks or {}
        self.root = root
        self._current: dict[str, bool] = {}
        self._spans: dict[str, FileSpans | None] = {}
        self._lines: dict[str, list[str]] = {}

    @classmethod
    def of(cls, result: Assessment) -> AssessedSources:
        return cls(result.sources, result.notebooks, result.root)

    def current(self, file: str) -> bool:
        """Whether `file` is known and, when there is a root, still reads as it was assessed."""
        known = self._current.get(file)
        if known is None:
            known = self._current[file] = file in self.texts and self._unchanged(file)
        return known

    def _unchanged(self, file: str) -> bool:
        if self.root is None:
            return True
        path = self.root if self.root.is_file() else self.root / file
        found = read_source(path, file, max_file_size=1 << 62)
        # Compared as text (a notebook's cells joined), which is what the facts were made from.
        return isinstance(found, SourceText) and found.text == self.texts[file]

    def line(self, file: str, line: int) -> str:
        """Line `line` of `file`, stripped; "" when it is not known or not current."""
        lines = self._file_lines(file)
        return lines[line - 1].strip() if lines is not None and 1 <= line <= len(lines) else ""

    def cell(self, file: str, line: int) -> tuple[int, int] | None:
        """(cell, line within it) of a module line of a notebook; None for other files."""
        notebook = self.notebooks.get(file)
        if notebook is None:
            return None
        try:
            return notebook.location(line)
        except ValueError:
            return None

    def node(self, file: str, local_id: int) -> NodeCode | None:
        """The column and text of node `local_id` (numbered from 0 in its file, as extracted)."""
        spans = self._file_spans(file)
        lines = self._file_lines(file)
        if spans is None or lines is None:
            return None
        try:
            span = spans.span(local_id)
            if span is None:
                return None
            comment = spans.comment_column(span.line)
        except SpanDrift:  # a bug (the tests look for it): the proof is shown without code
            return None
        return NodeCode(span.column, node_text(lines, span, {} if comment is None else {span.line: comment}))

    def _file_lines(self, file: str) -> list[str] | None:
        if not self.current(file):
            return None
        lines = self._lines.get(file)
        if lines is None:
            lines = self._lines[file] = self.texts[file].split("\n")
        return lines

    def _file_spans(self, file: str) -> FileSpans | None:
        if file not in self._spans:
            found = None
            if self.current(file):
                try:
                    found = file_spans(file, self.texts[file])
                except SpanDrift:  # a bug (the tests look for it): the proof is shown without code
                    found = None
            self._spans[file] = found
        return self._spans[file]


def node_text(lines: list[str], span: Span, comments: Mapping[int, int]) -> str:
    """A node's text on its first line (a statement's header, `for i in range(n):`), comment
    left out, whitespace collapsed, cut to CODE_WIDTH; "…" when the node goes on below."""
    if not 1 <= span.line <= len(lines):
        return ""
    row = lines[span.line - 1]
    start = span.column - 1
    end = span.end_column - 1 if span.end_line == span.line else len(row)
    comment = comments.get(span.line)
    if comment is not None and start < comment - 1 < end:
        end = comment - 1
    text = " ".join(row[start:end].split())
    if span.end_line > span.line and text and not text.endswith(":"):
        text += "…" if text[-1] in _OPENERS else " …"
    if len(text) > CODE_WIDTH:
        text = text[: CODE_WIDTH - 1] + "…"
    return text
