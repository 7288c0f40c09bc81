"""Where a tuple is in the user's code.

A column holds a node id when the extractor declares it so (`facts.schema`, `is_node`) or, for a
derived relation, when every rule fills it with a variable that a positive body atom reads from
a node column.  Node ids map to `file:line` through `node` ⋈ `scope` (the join `loc` is defined
by), scope ids through `scope`; a relation with a symbol column `file` and a number column
`line` (finding, counted, import_module, ...) is located by those two columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engine import Atom, Const, Program, Var
from ..facts.schema import INPUT_RELATIONS, NO_NODE
from .bodysql import literal

if TYPE_CHECKING:
    from .spans import AssessedSources


@dataclass(frozen=True, slots=True)
class Location:
    file: str
    line: int  # a line of the assessed module (in a notebook, of its code cells joined)
    source: str = ""  # the text of that line, stripped
    kind: str = ""  # the node kind ("call", "for", ...) when located through a node
    column: int | None = None  # where the node starts on the line, from 1; None when not known
    code: str = ""  # the node's own text (first line, cut: see explain.spans); "" when not known
    node: int | None = None  # the node id located, when located through one
    cell: tuple[int, int] | None = None  # in a notebook: (code cell, line within it), from 1

    @property
    def line_label(self) -> str:
        """`12`, or `cell 3:line 4` in a notebook, as the reports write lines."""
        return f"cell {self.cell[0]}:line {self.cell[1]}" if self.cell is not None else str(self.line)

    def __str__(self) -> str:
        return f"{self.file}:{self.line_label}"

    @property
    def position(self) -> str:
        """`file:line:column` (`nb.ipynb:cell 3:line 4:column`), or `file:line` without a column."""
        return f"{self}:{self.column}" if self.column is not None else str(self)


@dataclass(frozen=True, slots=True)
class NodeLocation:
    """Where the node in one node column of a tuple is."""

    name: str  # the column's name ("l" in innermost_loop(n, l))
    node: int
    location: Location | None


def node_columns(program: Program) -> dict[str, frozenset[int]]:
    return _node_columns(id(program), program)


def _node_columns(key: int, program: Program) -> dict[str, frozenset[int]]:
    # Programs are not hashable; the identity check guards against a reused id().
    cached = _CACHE.get(key)
    if cached is None or cached[0] is not program:
        cached = (program, _infer(program))
        _CACHE[key] = cached
    return cached[1]


_CACHE: dict[int, tuple[Program, dict[str, frozenset[int]]]] = {}


def _infer(program: Program) -> dict[str, frozenset[int]]:
    """Greatest fixpoint: start from every number column, drop those some rule fills otherwise."""
    cols: dict[str, set[int]] = {}
    for name, rel in program.relations.items():
        if rel.is_input or name in INPUT_RELATIONS:
            schema = INPUT_RELATIONS.get(name, ())
            cols[name] = {i for i, c in enumerate(schema) if c.is_node}
        else:
            cols[name] = {i for i, base in enumerate(rel.base_types) if base == "number"}
    for fact in program.facts:
        cols[fact.atom.relation].clear()  # constants written in rules.dl are never node ids
    heads = {rule.head.relation for rule in program.rules}
    for name, rel in program.relations.items():
        if not rel.is_input and name not in heads and name not in INPUT_RELATIONS:
            cols[name] = set()
    changed = True
    while changed:
        changed = False
        for rule in program.rules:
            keep = cols[rule.head.relation]
            for i in list(keep):
                arg = rule.head.args[i]
                if not (isinstance(arg, Var) and _from_node_column(arg.name, rule.body, cols)):
                    keep.discard(i)
                    changed = True
    return {name: frozenset(c) for name, c in cols.items()}


def _from_node_column(name: str, body: Iterable[object], cols: dict[str, set[int]]) -> bool:
    for lit in body:
        if isinstance(lit, Atom) and not lit.negated:
            for i, arg in enumerate(lit.args):
                if isinstance(arg, Var) and arg.name == name and i in cols[lit.relation]:
                    return True
    return False


def node_variables(program: Program, rule_body: Iterable[object]) -> set[str]:
    """Variables of a body that hold node ids (read from a node column of a positive atom)."""
    cols = node_columns(program)
    out = set()
    for lit in rule_body:
        if isinstance(lit, Atom) and not lit.negated:
            for i, arg in enumerate(lit.args):
                if isinstance(arg, Var) and i in cols.get(lit.relation, ()):
                    out.add(arg.name)
    return out


def file_line_columns(program: Program, relation: str) -> tuple[int, int] | None:
    rel = program.relations[relation]
    names = rel.column_names
    if "file" in names and "line" in names:
        f, ln = names.index("file"), names.index("line")
        if rel.base_types[f] == "symbol" and rel.base_types[ln] == "number":
            return f, ln
    return None


class Locator:
    """Locations of node ids and tuples, looked up in batches and cached.

    With `sources` (the text each file was assessed from), a node's location has its column and
    code text and a notebook's lines are its cells'; a file no longer that text shows no line."""

    def __init__(  # type: ignore[no-untyped-def]
        self,
        con,
        program: Program,
        source_line: Callable[[str, int], str] | None = None,
        sources: AssessedSources | None = None,
    ):
        self.con = con
        self.program = program
        if source_line is None:
            source_line = sources.line if sources is not None else (lambda _file, _line: "")
        self.source_line = source_line
        self.sources = sources
        self.columns = node_columns(program)
        self._nodes: dict[int, Location | None] = {}
        self._scopes: set[int] = set()
        self._bases: dict[str, int | None] = {}

    def prefetch(self, ids: Iterable[int]) -> None:
        wanted = sorted({int(i) for i in ids if isinstance(i, int) and i != NO_NODE} - set(self._nodes))
        if not wanted or "node" not in self.program.relations or "scope" not in self.program.relations:
            return
        for start in range(0, len(wanted), 2000):
            chunk = wanted[start : start + 2000]
            values = ", ".join(f"({literal(i)})" for i in chunk)
            rows = self.con.execute(
                f"""
                WITH ids(id) AS (VALUES {values})
                SELECT ids.id, n."kind", s."file", n."line", FALSE FROM ids
                  JOIN "node" n ON n."n" = ids.id JOIN "scope" s ON s."s" = n."scope"
                UNION ALL
                SELECT ids.id, s."kind", s."file", s."line", TRUE FROM ids
                  JOIN "scope" s ON s."s" = ids.id
                """
            ).fetchall()
            found: dict[int, Location] = {}
            for node_id, kind, file, line, is_scope in rows:
                if is_scope:
                    self._scopes.add(node_id)
                    if node_id in found:
                        continue
                found[node_id] = self.at(file, line, kind, node_id)
            for node_id in chunk:
                self._nodes[node_id] = found.get(node_id)

    def at(self, file: str, line: int, kind: str = "", node_id: int | None = None) -> Location:
        """The location of `file:line`, or of node `node_id` there."""
        sources = self.sources
        if sources is None:
            return Location(file, line, self.source_line(file, line), kind, node=node_id)
        source = self.source_line(file, line) if sources.current(file) else ""
        column, code = None, ""
        base = self._base(file) if node_id is not None and kind != "module" else None
        if node_id is not None and base is not None:
            found = sources.node(file, node_id - base)
            if found is not None:
                column, code = found.column, found.code
        return Location(file, line, source, kind, column, code, node_id, sources.cell(file, line))

    def _base(self, file: str) -> int | None:
        """The first node id of `file` (its module scope's), which its local ids are counted from."""
        if file not in self._bases:
            row = self.con.execute(
                'SELECT "s" FROM "scope" WHERE "file" = ? AND "kind" = \'module\'', [file]
            ).fetchone()
            self._bases[file] = None if row is None else int(row[0])
        return self._bases[file]

    def node(self, node_id: int) -> Location | None:
        if node_id == NO_NODE:
            return None
        if node_id not in self._nodes:
            self.prefetch([node_id])
        return self._nodes.get(node_id)

    def is_scope(self, node_id: int) -> bool:
        self.node(node_id)
        return node_id in self._scopes

    def tuple_location(self, relation: str, values: tuple) -> Location | None:
        """The location of a tuple: its first node column that is not a scope, else file/line."""
        node_ids = [values[i] for i in sorted(self.columns.get(relation, ())) if values[i] != NO_NODE]
        self.prefetch(node_ids)
        located = [(i, self.node(i)) for i in node_ids]
        located = [(i, loc) for i, loc in located if loc is not None]
        # A scope id (function, module) says less than the statement or expression beside it.
        for node_id, loc in located:
            if not self.is_scope(node_id):
                return loc
        if located:
            return located[0][1]
        cols = file_line_columns(self.program, relation)
        if cols is not None:
            file, line = values[cols[0]], values[cols[1]]
            if isinstance(file, str) and isinstance(line, int):
                return self.at(file, line)
        return None

    def node_locations(self, relation: str, values: tuple) -> tuple[NodeLocation, ...]:
        """The node of each node column of a tuple, where it is (NO_NODE ones left out)."""
        names = self.program.relations[relation].column_names
        out = []
        for i in sorted(self.columns.get(relation, ())):
            node_id = values[i]
            if isinstance(node_id, int) and node_id != NO_NODE:
                out.append(NodeLocation(names[i], node_id, self.node(node_id)))
        return tuple(out)


def const_values(atom: Atom) -> tuple | None:
    """The values of a ground atom (a fact written in rules.dl), or None if an argument is not."""
    out = []
    for arg in atom.args:
        if not isinstance(arg, Const):
            return None
        out.append(arg.value)
    return tuple(out)
