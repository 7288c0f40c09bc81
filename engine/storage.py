"""The tables of a program's relations in one DuckDB database: made, filled with the program's
facts, sized, opened again and closed.

Each relation is a table with its declared columns plus two bookkeeping columns:

* ``_iter``: 0 for loaded/program facts; otherwise the round in which the tuple was first
  derived.  Stratum k numbers its rounds k * ROUND_SPAN + 1, + 2, ... (one round for a
  non-recursive stratum, one per semi-naive round of a recursive one), so the numbers grow along
  the dependencies whatever order independent strata run in.  A round only reads tuples of
  earlier rounds, so every derived tuple has a derivation whose body tuples all have a strictly
  smaller ``_iter``.
* ``_rule``: index (in Program.rules) of the rule that first derived the tuple; NULL for facts.
"""

from __future__ import annotations

import math
import weakref
from pathlib import Path
from typing import Any, Self

import duckdb

from .change_tables import change_columns, change_table
from .compile_sql import SqlCompiler, insert_facts, insert_new_tuples, quote, sql_literal
from .connect import NO_LIMITS, Limits, connect
from .program import Program
from .syntax import Const, Fact, Relation
from .typesys import SQL_TYPES

Connection = duckdb.DuckDBPyConnection
Row = tuple[Any, ...]  # a tuple of a relation as DuckDB gives it back


def _unit_insert(rel: Relation) -> str:
    """The INSERT that makes a 0-ary relation true (once)."""
    return insert_new_tuples(rel, "SELECT 1", "0", "NULL", anti_join=True)


def _constant_rows(rel: Relation, facts: list[Fact]) -> list[tuple[str, ...]] | None:
    """The distinct rows of ground facts whose every argument is a constant of its column's
    type, as SQL literals; None when one is not (an expression, a conversion to try)."""
    rows: dict[tuple[str, ...], None] = {}
    for fact in facts:
        row = []
        for arg, base in zip(fact.atom.args, rel.base_types, strict=True):
            if not isinstance(arg, Const) or arg.type != base:
                return None
            if base == "float":
                value = float(arg.value)
                if not math.isfinite(value):
                    return None
                arg = Const(value + 0.0, base)  # -0.0 is 0.0, as DISTINCT would have it
            row.append(sql_literal(arg))
        rows[tuple(row)] = None
    return list(rows)


# Every database not closed yet, so that a process about to exit can close them (see
# close_all_databases).
_OPEN: weakref.WeakSet[Storage] = weakref.WeakSet()


def close_all_databases() -> None:
    """Close the databases still open (a file is then complete, a spill folder removed)."""
    for db in list(_OPEN):
        try:
            db.close()
        except duckdb.Error:
            _OPEN.discard(db)


class Storage:
    """Tables for every relation of `program`, in memory (path=None) or in a DuckDB file.

    The parts of engine.Database that evaluate, update and read the tables extend this class;
    each sets up the state it keeps in `_init_state`."""

    program: Program
    con: Connection
    staged: set[str]  # relations with a staging table (see staging_table)
    _compiler: SqlCompiler
    _evaluated: bool  # derived tuples to clear before evaluating again
    # The tables of a database made `beside` another (temporary, on its connection); None for
    # a database of its own, which has a table for every relation.
    _own_tables: list[str] | None

    def __init__(
        self,
        program: Program,
        path: str | Path | None = None,
        block_size: int | None = None,
        limits: Limits = NO_LIMITS,
    ) -> None:
        """`block_size`: of a new database file, in bytes, where DuckDB lets it be chosen;
        `limits`: what the connection may use (engine.connect)."""
        self._attach(program, connect(path, block_size=block_size, limits=limits), evaluated=False)
        # One transaction: in a database file, each statement would otherwise be a commit.
        self.con.execute("BEGIN TRANSACTION")
        try:
            self._create_tables()
            self._insert_program_facts()
            self.con.execute("COMMIT")
        except BaseException:
            self.con.close()
            raise

    def _attach(self, program: Program, con: duckdb.DuckDBPyConnection, *, evaluated: bool) -> None:
        """Take `con` as this database's connection (closed with the others at exit)."""
        self.program = program
        self.con = con
        _OPEN.add(self)
        self._compiler = SqlCompiler(program.relations)
        self._evaluated = evaluated
        self._own_tables = None
        self._init_state()

    @classmethod
    def beside(cls, base: Storage, program: Program) -> Self:
        """Tables for the relations `program` declares beside those of `base`'s program, on
        `base`'s connection: `program` extends it (engine.extend), reading its relations as
        they are.  They are temporary tables (DuckDB keeps them with the connection, in memory:
        a database opened read-only takes them, and its file is left as it is), so only this
        connection sees them; `close` drops them and leaves the connection open."""
        self = cls.__new__(cls)
        self.program = program
        self.con = base.con
        self._compiler = SqlCompiler(program.relations)
        self._evaluated = False
        self._own_tables = [name for name in program.relations if name not in base.program.relations]
        self._init_state()
        self._create_tables(self._own_tables, temporary=True)
        self._insert_program_facts()
        return self

    @classmethod
    def open(
        cls, program: Program, path: str | Path, read_only: bool = True, limits: Limits = NO_LIMITS
    ) -> Self:
        """Reopen a database file of `program`, evaluated (no tables are created)."""
        self = cls.__new__(cls)
        self._attach(program, connect(path, read_only=read_only, limits=limits), evaluated=True)
        return self

    @classmethod
    def from_template(cls, program: Program, path: str | Path, limits: Limits = NO_LIMITS) -> Self:
        """Open the database file `path`, a copy of a template: a database file of this
        program that holds its tables and its facts and was never evaluated.  Copying a file is
        several times faster than creating some 200 tables (a few ms against 50).  ValueError
        when it holds fewer tables than the program's."""
        db = cls.open(program, path, read_only=False, limits=limits)
        try:
            have = {
                name
                for (name,) in db.con.execute(
                    "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'"
                ).fetchall()
            }
            if not have.issuperset(program.relations):
                raise ValueError(f"{path}: not a database of this program")
        except BaseException:
            db.close()
            raise
        db._evaluated = False  # no derived tuple to clear
        return db

    def _init_state(self) -> None:
        """Set up what is kept besides the connection (the parts extending this class add
        theirs, then call this)."""
        self.staged = set()

    # -- context manager -------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._own_tables is not None:  # the connection is the base's, which stays open
            drops = [f"DROP TABLE IF EXISTS temp.{quote(name)}" for name in self._own_tables]
            if drops:
                self.con.execute(";\n".join(drops))
            return
        self.con.close()
        _OPEN.discard(self)

    def write_to_file(self) -> bool:
        """Write the tables, as they now are, into the database's file (DuckDB's checkpoint);
        False, doing nothing, for a database in memory or one made `beside` another.

        Done once the facts are loaded, it spares the evaluation more than it costs: the
        facts were appended batch by batch, each leaving a partly filled row group of every
        relation; written, they are whole row groups, compressed, which the rules' joins
        scan faster, and the results are then saved without writing the facts again (a
        cold run on SciPy + Astropy: 0.65 s to write them, then 0.5 to 0.8 s less to
        evaluate and 0.4 s less to save)."""
        if self._own_tables is not None:
            return False
        (path,) = self.con.execute(
            "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
        ).fetchone() or (None,)
        if path is None:
            return False
        self.con.execute("CHECKPOINT")
        return True

    # -- schema ----------------------------------------------------------------------------

    def table(self, relation: str) -> str:
        """The (quoted) SQL name of a relation's table."""
        self._relation(relation)
        return quote(relation)

    def _relation(self, name: str) -> Relation:
        try:
            return self.program.relations[name]
        except KeyError:
            raise KeyError(f"unknown relation '{name}'") from None

    def _create_tables(self, names: list[str] | None = None, temporary: bool = False) -> None:
        """The tables of the relations `names` (by default all)."""
        statements = []
        kind = "TEMP TABLE" if temporary else "TABLE"
        for name in self.program.relations if names is None else names:
            rel = self.program.relations[name]
            cols = [
                f"{quote(name)} {SQL_TYPES[base]}"
                for (name, _), base in zip(rel.columns, rel.base_types, strict=True)
            ]
            cols += ['"_iter" BIGINT NOT NULL', '"_rule" INTEGER']
            statements.append(f"CREATE {kind} IF NOT EXISTS {quote(rel.name)} ({', '.join(cols)})")
        # One call for all of them: a statement per call costs more than the statement itself.
        self.con.execute(";\n".join(statements))

    def _insert_program_facts(self) -> None:
        by_relation: dict[str, list[Fact]] = {}
        for fact in self.program.facts:
            by_relation.setdefault(fact.atom.relation, []).append(fact)
        statements = []
        for name, facts in by_relation.items():
            rel = self.program.relations[name]
            if rel.arity == 0:
                statements.append(_unit_insert(rel))
                continue
            constants = _constant_rows(rel, facts)
            if constants is not None:
                # Plain values (all but a few programs' facts): set apart here, then one VALUES
                # list, which DuckDB plans in half the time of a SELECT DISTINCT of casts.
                statements.append(insert_facts(rel, constants))
                continue
            for start in range(0, len(facts), 1000):
                select = self._compiler.select_facts(name, facts[start : start + 1000])
                # The tables are new: only a later chunk can repeat a fact of an earlier one.
                statements.append(insert_new_tuples(rel, select, "0", "NULL", anti_join=start > 0))
        if statements:
            self.con.execute(";\n".join(statements))  # one call: see _create_tables

    def _insert_unit(self, name: str) -> int:
        return self._execute_count(_unit_insert(self.program.relations[name]))

    def staging_table(self, relation: str) -> str:
        """The table (made on first use) that holds the new facts of `relation` during an
        update, with the relation's columns, `_iter` and `_rule`."""
        table = change_table("new", relation)
        if relation not in self.staged:
            cols = change_columns(self._relation(relation))
            self.con.execute(f'CREATE TABLE {table} ({", ".join(cols)}, "_iter" BIGINT, "_rule" INTEGER)')
            self.staged.add(relation)
        return table

    # -- sizes -----------------------------------------------------------------------------

    def count(self, relation: str) -> int:
        self._relation(relation)
        return self._execute_count(f"SELECT count(*) FROM {quote(relation)}")

    def _count_all(self) -> dict[str, int]:
        return self.counts(list(self.program.relations))

    def counts(self, names: list[str]) -> dict[str, int]:
        """The tuples of each relation in `names`, in one query."""
        for name in names:
            self._relation(name)
        sql = " UNION ALL ".join(
            f"SELECT {i} AS k, count(*) AS n FROM {quote(name)}" for i, name in enumerate(names)
        )
        counts = dict(self.con.execute(sql).fetchall()) if names else {}
        return {name: int(counts[i]) for i, name in enumerate(names)}

    def _row_counts(self) -> dict[str, int]:
        """Every table's size as DuckDB keeps it, one catalog query instead of ~200 counts (15 ms
        of a one-file run).  Exact only while no row has been deleted, as before the first
        evaluation: DuckDB counts deleted rows until a checkpoint vacuums them."""
        if self._own_tables is not None:
            # Beside a base: the tables this program's rules read or fill, counted (temporary
            # tables are not in the catalog query below; the base's hundreds are not needed).
            read = {atom.relation for plan in self.program.plans for atom in plan.atoms}
            return self.counts(sorted(read | set(self._own_tables)))
        sizes = dict(
            self.con.execute(
                "SELECT table_name, estimated_size FROM duckdb_tables() "
                "WHERE database_name = current_database() AND schema_name = 'main'"
            ).fetchall()
        )
        try:
            return {name: int(sizes[name]) for name in self.program.relations}
        except (KeyError, TypeError):  # a table made some other way: count them all
            return self._count_all()

    def _execute_count(
        self, sql: str, con: Connection | None = None, params: list[list[Any]] | None = None
    ) -> int:
        con = self.con if con is None else con
        rows = con.execute(sql, params).fetchall()  # fetch everything: DuckDB wants results finished
        return int(rows[0][0]) if rows else 0
