"""Where each node id of a file lies in its text: the line and column its node starts and ends.

The facts hold lines only: columns would cost every run, and only an explanation shows them.  So
a file a proof touches is extracted again, as a run extracts it (`extract_source`: the same
checks, parse and numbering), by an extractor that also keeps the PNode behind each id it gives
(the two methods that give ids, `_node` and `_new_node`, are overridden); for a node asked
about, the parser's tree is walked beside the PNode tree along the path to it (the whole tree
would cost a large file 0.15 s for the few nodes a proof shows) to read its range.  Nothing of the converter
(facts.tree) is repeated: a PNode's children are its parser node's children, in order, less
some unnamed tokens, so they are found again by kind; a mismatch raises SpanDrift.
"""

from __future__ import annotations

from dataclasses import dataclass

from ast_grep_py import SgNode

from . import Skipped, SourceText, extract_source
from .extract import FileExtractor, Row, _Ctx
from .tree import PNode, parse


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


class FileSpans:
    """The spans of one file's node ids, read from the parser's tree when asked: a proof asks
    for a few nodes of a file, so only the path from the root to each is walked."""

    def __init__(self, pnodes: dict[int, PNode], root: PNode, sg_root: SgNode, nodes: list[Row]) -> None:
        self.pnodes = pnodes  # file-local node id -> its PNode
        self.nodes = nodes  # the `node` rows, as a run extracts them (file-local ids)
        self._root = root
        self._sg_root = sg_root
        self._found: dict[int, Span] = {}  # id(PNode) -> span
        self._parents: dict[int, PNode] | None = None  # id(PNode) -> its parent
        self._comments: dict[int, list[PNode]] | None = None  # line -> comment PNodes

    def span(self, local_id: int) -> Span | None:
        pnode = self.pnodes.get(local_id)
        return None if pnode is None else self._span_of(pnode)

    @property
    def spans(self) -> dict[int, Span]:
        """Every node id's span (the tests compare them all with the facts)."""
        return {nid: self._span_of(pnode) for nid, pnode in self.pnodes.items()}

    def comment_column(self, line: int) -> int | None:
        """Where a comment starts on `line`, if one does."""
        if self._comments is None:
            self._comments = {}
            for pnode in self._walk():
                if pnode.kind == "comment":
                    self._comments.setdefault(pnode.line, []).append(pnode)
        found = self._comments.get(line)
        return None if not found else self._span_of(found[0]).column

    def _walk(self) -> list[PNode]:
        out, stack = [], [self._root]
        while stack:
            pnode = stack.pop()
            out.append(pnode)
            stack.extend(pnode.children)
        return out

    def _span_of(self, target: PNode) -> Span:
        found = self._found.get(id(target))
        if found is not None:
            return found
        if self._parents is None:
            self._parents = {id(child): pnode for pnode in self._walk() for child in pnode.children}
        path = [target]
        while id(path[-1]) in self._parents:
            path.append(self._parents[id(path[-1])])
        path.reverse()  # root first
        if path[0] is not self._root:
            raise SpanDrift(f"line {target.line}: a {target.kind} outside the file's tree")
        sg = self._sg_root
        for parent, wanted in zip(path, path[1:], strict=False):
            sg = _child_for(sg, parent, wanted)
        span = self._found[id(target)] = _span(sg)
        return span


def _child_for(sg: SgNode, parent: PNode, wanted: PNode) -> SgNode:
    """The parser node of `wanted`, a child of `parent` whose parser node is `sg`: the PNode
    children are the parser's children in order, less some unnamed tokens, found by kind."""
    kids = parent.children
    i = 0
    for child in sg.children():
        if i == len(kids):
            break
        kid = kids[i]
        if kid.kind != child.kind() or kid.named != child.is_named():
            continue  # an unnamed token of a kind the converter leaves out
        if kid is wanted:
            return child
        i += 1
    raise SpanDrift(f"line {parent.line}: {parent.kind} has PNode children the parser's tree lacks")


class SpanExtractor(FileExtractor):
    """A FileExtractor that keeps the PNode each node id stands for."""

    def __init__(self, file: str, module: str, is_package: bool = False) -> None:
        super().__init__(file, module, is_package)
        self.pnodes: dict[int, PNode] = {}

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

    try:
        parsed = parse(text, keep_tree=True)
    except Exception:  # the native parser must never take an explanation down
        return None
    facts = extract_source(SourceText(relpath, text), extractor=extractor, parsed=parsed)
    if isinstance(facts, Skipped) or not made or parsed.tree is None:
        return None
    walker = made[0]
    if parsed.tree.kind() != parsed.root.kind:
        raise SpanDrift(f"the tree's root is {parsed.tree.kind()}, the PNode's {parsed.root.kind}")
    return FileSpans(walker.pnodes, parsed.root, parsed.tree, facts.rows["node"])


def _span(sg: SgNode) -> Span:
    rng = sg.range()
    start, end = rng.start, rng.end
    return Span(start.line + 1, start.column + 1, end.line + 1, end.column + 1)
