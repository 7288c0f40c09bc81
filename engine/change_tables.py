"""The names an update gives to what it attaches and to the tables that hold its changes.

During an update (engine.update) the previous results are attached read-only as OLD_DB, and
an in-memory database as CHANGES_DB, whose tables are named after a kind and a relation R:
"new:R" (the facts staged for R, see Storage.staging_table), "diff:R" (the rows an input
relation loses and gains, told apart by a column "_lost": see input_change), "same:R" (the
lost and gained rows no rule tells apart), "gained:R" (the tuples a derived relation gained),
and "over:R", "netlost:R", "netgained:R" and "groups:N" (see engine.incremental).
GENERATION_TABLE, in the results database itself, holds the number of the last update.
"""

from __future__ import annotations

from .compile_sql import quote
from .syntax import Relation
from .typesys import SQL_TYPES

OLD_DB = "cpq_old"
CHANGES_DB = "cpq_changes"
GENERATION_TABLE = "cpq_generation"


def old_table(relation: str) -> str:
    return f"{OLD_DB}.{quote(relation)}"


def change_table(kind: str, relation: str) -> str:
    """A table of CHANGES_DB, of one of the kinds the module's docstring lists."""
    return f"{CHANGES_DB}.{quote(kind + ':' + relation)}"


def input_change(rel: Relation, *, lost: bool) -> str:
    """The rows an input relation loses (`lost`) or gains in an update, as a subquery."""
    which = '"_lost"' if lost else 'NOT "_lost"'
    return f"(SELECT {value_columns(rel)} FROM {change_table('diff', rel.name)} WHERE {which})"


def change_columns(rel: Relation) -> list[str]:
    """The column definitions of a change table of `rel` (a 0-ary relation gets a dummy)."""
    cols = [
        f"{quote(name)} {SQL_TYPES[base]}"
        for (name, _), base in zip(rel.columns, rel.base_types, strict=True)
    ]
    return cols or ['"_unit" INTEGER']


def same_values(rel: Relation, left: str, right: str, *, positional: bool = False) -> str:
    """SQL: the rows `left` and `right` hold the same tuple of `rel` (`right` by position,
    c0..cn-1, with `positional`)."""
    pairs = [
        f"{left}.{quote(name)} = {right}." + (f"c{i}" if positional else quote(name))
        for i, name in enumerate(rel.column_names)
    ]
    return " AND ".join(pairs) or "TRUE"


def value_columns(rel: Relation, alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{quote(name)}" for name in rel.column_names) or "1"
