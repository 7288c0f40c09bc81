"""Reading the tables of a Database: a relation's tuples, or the answers of a query."""

from __future__ import annotations

from .compile_sql import quote
from .query import compile_query
from .storage import Row, Storage


class Queries(Storage):
    """Reading relations (the reading part of engine.Database)."""

    def rows(self, relation: str) -> list[Row]:
        """All tuples (without bookkeeping columns), sorted."""
        rel = self._relation(relation)
        if rel.arity == 0:
            return [()] if self.count(relation) else []
        cols = ", ".join(quote(name) for name in rel.column_names)
        order = ", ".join(str(i + 1) for i in range(rel.arity))
        return self.con.execute(f"SELECT {cols} FROM {quote(relation)} ORDER BY {order}").fetchall()

    def query(self, text: str, source: str = "<query>") -> tuple[list[str], list[Row]]:
        """Run a rule body as a query; returns (variable names, distinct sorted rows)."""
        compiled = compile_query(text, self.program.relations, source, self.program.inline)
        rows = self.con.execute(compiled.sql).fetchall()
        if not compiled.columns:
            return [], [()] if rows else []
        return compiled.columns, rows
