"""Where each node id of a file lies in its text: the line and column its node starts and ends.

The facts hold lines only: columns would cost every run, and only an explanation shows them.  So
a file a proof touches is extracted again, as a run extracts it (`extract_source`: the same
checks, parse and numbering), by an extractor that also keeps the PNode behind each id it gives
(the two methods that give ids, `_node` and `_new_node`, are overridden); the parser's tree is
then walked beside the PNode tree to read each PNode's range.  Nothing of the converter
(facts.tree) is repeated: a PNode's children are its parser node's children, in order, less
some unnamed tokens, so they are found again by kind; a mismatch raises SpanDrift.
"""

from __future__ import annotations

from dataclasses import dataclass

from ast_grep_py import SgNode, SgRoot

from . import Skipped, SourceText, extract_source
from .extract import FileExtractor, Row, Rows, _Ctx
from .tree import PNode


@dataclass(frozen=True, slots=True)
class Span:
    """Where a node is: lines count from 1, columns (characters) from 1; the end is exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int


class SpanDrift(RuntimeError):
    """The PNode tree does not follow the parser's tree: facts.tree changed in a way this module
    does not know (a bug, which tests/test_explain_spans.py is there to catch)."""


@dataclass
class FileSpans:
    spans: dict[int, Span]  # file-local node id -> where its node is
    nodes: list[Row]  # the `node` rows, as a run extracts them (file-local ids)
    comments: dict[int, int]  # line -> column where the comment on that line starts


class SpanExtractor(FileExtractor):
    """A FileExtractor that keeps the PNode each node id stands for."""

    def __init__(self, file: str, module: str, is_package: bool = False) -> None:
        super().__init__(file, module, is_package)
        self.pnodes: dict[int, PNode] = {}
        self.root: PNode | None = None

    def extract(self, root: PNode, lines: int, errors: list[tuple[int, int]] | None = None) -> Rows:
        self.root = root
        return super().extract(root, lines, errors)

    def _new_node(self, node: PNode, kind: str, scope: int) -> int:
        nid = super()._new_node(node, kind, scope)
        self.pnodes[nid] = node
        return nid

    def _node(self, node: PNode, kind: str, ctx: _Ctx) -> int:
        nid = super()._node(node, kind, ctx)
        self.pnodes[nid] = node
        return nid


def file_spans(relpath: str, text: str) -> FileSpans | None:
    """The spans of the node ids of `text` assessed as `relpath` (None if a run skips it)."""
    made: list[SpanExtractor] = []

    def extractor(file: str, module: str, is_package: bool) -> FileExtractor:
        made.append(SpanExtractor(file, module, is_package))
        return made[-1]

    facts = extract_source(SourceText(relpath, text), extractor=extractor)
    if isinstance(facts, Skipped) or not made:
        return None
    walker = made[0]
    if walker.root is None:
        return None
    ranges, comments = _ranges(walker.root, text)
    spans = {nid: ranges[id(pnode)] for nid, pnode in walker.pnodes.items()}
    return FileSpans(spans, facts.rows["node"], comments)


def _ranges(root: PNode, text: str) -> tuple[dict[int, Span], dict[int, int]]:
    """The span of every named PNode under `root` (by id()), and where comments start."""
    sg_root = SgRoot(text, "python").root()
    if sg_root.kind() != root.kind:
        raise SpanDrift(f"the tree's root is {sg_root.kind()}, the PNode's {root.kind}")
    spans = {id(root): _span(sg_root)}
    comments: dict[int, int] = {}
    stack = [(sg_root, root)]
    while stack:
        sg, pnode = stack.pop()
        kids = pnode.children
        i = 0
        for child in sg.children():
            if i == len(kids):
                break
            kid = kids[i]
            # The children left out are unnamed tokens of other kinds than those kept.
            if kid.kind != child.kind() or kid.named != child.is_named():
                continue
            i += 1
            if kid.named:  # unnamed tokens (operators) are kept for their kind, never numbered
                span = spans[id(kid)] = _span(child)
                if kid.kind == "comment":
                    comments.setdefault(span.line, span.column)
            if kid.children:
                stack.append((child, kid))
        if i != len(kids):
            raise SpanDrift(
                f"line {pnode.line}: {pnode.kind} has PNode children the parser's tree lacks "
                f"({', '.join(k.kind for k in kids[i:])})"
            )
    return spans, comments


def _span(sg: SgNode) -> Span:
    rng = sg.range()
    start, end = rng.start, rng.end
    return Span(start.line + 1, start.column + 1, end.line + 1, end.column + 1)
