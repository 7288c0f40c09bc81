"""The nodes the fixable findings stand on, found in the text of their file.

A finding is a (code, file, line); rules.dl's `live_site(code, node)` says which node (several
on one line are several fixes).  facts.spans extracts the file again, as the run did, to give
the node's span; the parser's node with that span is what a recipe rewrites, never the line
around it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ast_grep_py import SgNode, SgRoot

from ..engine import Database
from ..facts.spans import FileSpans, Span, SpanDrift, file_spans


@dataclass(frozen=True, slots=True)
class Site:
    code: str
    file: str
    line: int
    node: int  # the node's id in the database
    callee: str = ""  # the resolved callee when the node is a call ("builtins.sum", "numpy.zeros")
    array_receiver: bool = False  # a method call on an array value (a.reshape(...))


def read_sites(db: Database, codes: Iterable[str]) -> list[Site]:
    """The live sites of `codes` (dead code has none), with what a recipe needs to know of them."""
    callees = {node: callee for node, callee in db.query("live_site(_, N), call(N, _, Q)")[1]}
    receivers = {row[0] for row in db.query("live_site(_, N), method_call(N, R, _), array_expr(R)")[1]}
    sites = []
    for code in sorted(set(codes)):
        for node, file, line in db.query(f'live_site("{code}", N), loc(N, F, L, _)')[1]:
            sites.append(Site(code, file, line, node, callees.get(node, ""), node in receivers))
    sites.sort(key=lambda s: (s.file, s.line, s.node))
    return sites


def module_bases(db: Database) -> dict[str, int]:
    """Each file's first node id (its module scope's): a node's id less it is the id the file's
    own extraction gives it (facts.spans)."""
    return {file: scope for scope, file in db.query('scope(S, "module", _, F, _, _)')[1]}


class FileNodes:
    """The parser's nodes of one file's text, by the span of a node id."""

    def __init__(self, file: str, text: str) -> None:
        self.text = text
        self.root = SgRoot(text, "python").root()
        try:
            self.spans: FileSpans | None = file_spans(file, text)
        except SpanDrift:  # a bug the span tests look for: no node can be placed, so no fix
            self.spans = None

    def node(self, local_id: int, kinds: frozenset[str]) -> SgNode | None:
        """The node of this id, if its span holds a node of one of `kinds`."""
        span = self.spans.spans.get(local_id) if self.spans is not None else None
        return None if span is None else node_at(self.root, span, kinds)


def node_at(root: SgNode, span: Span, kinds: frozenset[str]) -> SgNode | None:
    """The node of one of `kinds` whose range is `span`, found by going down from `root`."""
    start = (span.line - 1, span.column - 1)
    end = (span.end_line - 1, span.end_column - 1)
    node = root
    while True:
        if _bounds(node) == (start, end) and node.kind() in kinds:
            return node
        for child in node.children():
            child_start, child_end = _bounds(child)
            if child_start <= start and end <= child_end:
                node = child
                break
        else:
            return None


def _bounds(node: SgNode) -> tuple[tuple[int, int], tuple[int, int]]:
    rng = node.range()
    return (rng.start.line, rng.start.column), (rng.end.line, rng.end.column)


def start(node: SgNode) -> int:
    """The node's first character's offset in the text."""
    return node.range().start.index


def end(node: SgNode) -> int:
    return node.range().end.index


def same(a: SgNode | None, b: SgNode | None) -> bool:
    return a is not None and b is not None and _bounds(a) == _bounds(b) and a.kind() == b.kind()
