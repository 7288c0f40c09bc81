"""Input facts appended to the tables of a Database: tuples, lists per column, column batches
(see arrow_export) or Arrow tables.

Few values go to DuckDB as list parameters (see list_params), more as column batches, which
DuckDB reads through Arrow's C data interface without pyarrow; a pyarrow Table is taken as it
is, from a caller that has one.  The statements of one load run in one transaction.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import duckdb

from .compile_sql import insert_new_tuples
from .list_params import LIST_BATCH_VALUES, unnest_select, values_fit
from .storage import Connection, Storage
from .typesys import SQL_TYPES

if TYPE_CHECKING:
    # pyarrow is never needed: only a caller's own tables are Arrow's.
    import pyarrow as pa

    # Imported where first needed (with ctypes, some 4 ms): a small run loads lists only.
    from .arrow_export import ColumnBatch

_ARROW_EXPORT = f"{__package__}.arrow_export"


def _is_arrow_table(value: object) -> TypeGuard[pa.Table]:
    # Without pyarrow imported, nothing can be one of its tables.
    pa = sys.modules.get("pyarrow")
    return pa is not None and isinstance(value, pa.Table)


def _is_column_batch(value: object) -> TypeGuard[ColumnBatch]:
    # Without arrow_export imported, nothing can be one of its batches.
    module = sys.modules.get(_ARROW_EXPORT)
    return module is not None and isinstance(value, module.ColumnBatch)


_LOAD_VIEW = "__cpq_load"
Columns = list[list[Any]]  # a relation's rows, one list of values per column


def _column_batch(relation: str, columns: Columns, base_types: Iterable[str]) -> ColumnBatch:
    """Columns of checked values as a column batch (for batches too large for lists)."""
    from .arrow_export import ColumnBatch, value_column

    try:
        made = [value_column(column, base) for column, base in zip(columns, base_types, strict=True)]
    except (OverflowError, UnicodeEncodeError) as exc:
        raise ValueError(f"cannot load rows into '{relation}': {exc}") from exc
    return ColumnBatch([f"c{i}" for i in range(len(made))], made)


def _check_types(relation: str, columns: Columns, base_types: Iterable[str]) -> None:
    """Refuse a value of the wrong Python type (a float or a bool for a number, None), which
    DuckDB would otherwise convert (1.5 to 1, True to 1)."""
    for column, base in zip(columns, base_types, strict=True):
        if not values_fit(column, base):
            raise ValueError(f"cannot load rows into '{relation}': a value is not a {base}")


def _loaded_value(index: int, sql_type: str, batch: ColumnBatch | pa.Table) -> str:
    """The SELECT expression of column `index` of a batch: cast to the relation's type, and
    moved by the batch's shift (see arrow_export.Shift) when it is one of the shifted."""
    column = f"c{index}"
    shift = batch.shift if _is_column_batch(batch) else None
    if shift is not None and index in shift.columns:
        moved = f"{column} + {batch.shift_name}"
        column = f"CASE WHEN {column} = {shift.kept} THEN {column} ELSE {moved} END"
    return f"CAST({column} AS {sql_type}) AS c{index}"


@dataclass(frozen=True, slots=True)
class _LoadStatement:
    """An INSERT of facts, with the list parameters or the Arrow view it reads."""

    sql: str
    params: Columns | None = None
    view: tuple[str, ColumnBatch | pa.Table] | None = None


class Loading(Storage):
    """Appending input facts (the loading part of engine.Database)."""

    def load(self, relation: str, rows: Iterable[tuple[object, ...]] | pa.Table) -> int:
        """Append input tuples (as `_iter` 0); duplicates are dropped.  Returns how many were new.

        `rows` is a pyarrow Table (columns by position) or tuples; tuples go to DuckDB column
        by column, as lists when they are few (see list_params) and as a column batch otherwise.
        """
        rel = self._relation(relation)
        table: ColumnBatch | pa.Table
        if _is_arrow_table(rows):
            if rows.num_columns != rel.arity:
                raise ValueError(f"'{relation}' has {rel.arity} column(s), the table has {rows.num_columns}")
            if rows.num_rows == 0:
                return 0
            table = rows
        else:
            rows = rows if isinstance(rows, list | tuple) else list(rows)
            if not rows:
                return 0
            widths = set(map(len, rows))
            if widths != {rel.arity}:
                raise ValueError(
                    f"'{relation}' has {rel.arity} column(s); got rows of length {sorted(widths)}"
                )
            if rel.arity == 0:
                return self._insert_unit(relation)
            columns = [list(column) for column in zip(*rows, strict=True)]
            _check_types(relation, columns, rel.base_types)
            if len(rows) * rel.arity <= LIST_BATCH_VALUES:
                statement = self._columns_insert(relation, columns, disjoint=False, types_checked=True)
                return self._load_statements([statement])
            table = _column_batch(relation, columns, rel.base_types)
        if rel.arity == 0:
            return self._insert_unit(relation)
        return self._load_statements([self._insert_from(relation, table, _LOAD_VIEW, disjoint=False)])

    def load_disjoint(
        self,
        tables: Mapping[str, ColumnBatch | Columns | pa.Table],
        *,
        staged: bool = False,
        con: Connection | None = None,
    ) -> int:
        """Append input tuples to several relations at once (as `_iter` 0), all or none.  A
        batch is a column batch, a pyarrow Table or a list per column (for few values: see
        list_params).  Each
        must be a set with no row in its relation already (the facts of files not loaded
        before): it is then neither made a set nor compared with the table, a comparison whose
        cost grows with the table.  Returns how many tuples were added.

        `staged`: into the relations' staging tables of an update (see `staging_table`)
        instead of the relations themselves.  `con`: a cursor of the database's to load on
        (another thread may load other relations on another one meanwhile)."""
        statements: list[_LoadStatement] = []
        added = 0
        for relation, batch in tables.items():
            if isinstance(batch, list):
                rows = max(map(len, batch), default=0)
                if rows:
                    statements.append(self._columns_insert(relation, batch, disjoint=True, staged=staged))
            else:  # a column batch or an Arrow table
                rows = batch.num_rows
                if rows:
                    view = f"{_LOAD_VIEW}_{len(statements)}"
                    statements.append(self._insert_from(relation, batch, view, disjoint=True, staged=staged))
            added += rows
        self._load_statements(statements, con)
        return added

    def _insert_from(
        self, relation: str, table: ColumnBatch | pa.Table, view: str, *, disjoint: bool, staged: bool = False
    ) -> _LoadStatement:
        """The INSERT that appends the rows of `table` (checked against the relation) as facts,
        read through the view `view`: a set of them, new ones only, unless the caller vouches
        for both."""
        rel = self._relation(relation)
        if rel.arity == 0 or table.num_columns != rel.arity:
            raise ValueError(f"'{relation}' has {rel.arity} column(s), the table has {table.num_columns}")
        # A column batch holds no NULL (its columns have no validity buffer).
        if _is_arrow_table(table) and any(column.null_count for column in table.columns):
            raise ValueError(f"cannot load NULL values into '{relation}'")
        casts = ", ".join(_loaded_value(i, SQL_TYPES[base], table) for i, base in enumerate(rel.base_types))
        select = f"SELECT {'' if disjoint else 'DISTINCT '}{casts} FROM {view}"
        anti_join = not disjoint and self.count(relation) > 0
        target = self.staging_table(relation) if staged else None
        sql = insert_new_tuples(rel, select, "0", "NULL", anti_join=anti_join, table=target)
        names = [f"c{i}" for i in range(rel.arity)]
        renamed = table.renamed(names) if _is_column_batch(table) else cast(Any, table).rename_columns(names)
        return _LoadStatement(sql, view=(view, renamed))

    def _columns_insert(
        self,
        relation: str,
        columns: Columns,
        *,
        disjoint: bool,
        types_checked: bool = False,
        staged: bool = False,
    ) -> _LoadStatement:
        """As `_insert_from`, for rows given as one list per column (list parameters)."""
        rel = self._relation(relation)
        if rel.arity == 0 or len(columns) != rel.arity:
            raise ValueError(f"'{relation}' has {rel.arity} column(s), the batch has {len(columns)}")
        if len({len(column) for column in columns}) != 1:
            raise ValueError(f"the columns given for '{relation}' differ in length")
        if not types_checked:
            _check_types(relation, columns, rel.base_types)
        values = unnest_select([(f"c{i}", SQL_TYPES[base]) for i, base in enumerate(rel.base_types)])
        select = values if disjoint else f"SELECT DISTINCT * FROM ({values})"
        anti_join = not disjoint and self.count(relation) > 0
        target = self.staging_table(relation) if staged else None
        return _LoadStatement(
            insert_new_tuples(rel, select, "0", "NULL", anti_join=anti_join, table=target),
            params=list(columns),
        )

    def _load_statements(self, statements: list[_LoadStatement], con: Connection | None = None) -> int:
        """Run loading INSERTs in one transaction (on `con`, by default the database's
        connection); returns how many rows they added.  Those without parameters go in one
        call (a call costs more than a small statement)."""
        if not statements:
            return 0
        con = self.con if con is None else con
        views = [st.view for st in statements if st.view is not None]
        plain = [st.sql for st in statements if st.params is None]
        added = 0
        try:
            for name, table in views:
                con.register(name, table)
            con.execute("BEGIN TRANSACTION")
            try:
                for st in statements:
                    if st.params is not None:
                        added += self._execute_count(st.sql, con, params=st.params)
                if len(plain) == 1:
                    added += self._execute_count(plain[0], con)
                elif plain:
                    con.execute(";\n".join(plain))
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        except (duckdb.ConversionException, duckdb.InvalidInputException, duckdb.OutOfRangeException) as exc:
            raise ValueError(f"cannot load rows: {exc}") from exc
        finally:
            for name, _ in views:
                con.unregister(name)
        return added
