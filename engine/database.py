"""DuckDB-backed storage and bottom-up evaluation of a Program.

Each relation is a table with its declared columns plus two bookkeeping columns:

* ``_iter``: 0 for loaded/program facts; otherwise the round in which the tuple was first
  derived.  Stratum k numbers its rounds k * ROUND_SPAN + 1, + 2, ... (one round for a
  non-recursive stratum, one per semi-naive round of a recursive one), so the numbers grow along
  the dependencies whatever order independent strata run in.  A round only reads tuples of
  earlier rounds, so every derived tuple has a derivation whose body tuples all have a strictly
  smaller ``_iter``.
* ``_rule``: index (in Program.rules) of the rule that first derived the tuple; NULL for facts.

Reading "earlier rounds only" is done by filtering on ``_iter`` (see compile_sql.versioned_table)
rather than by copying delta tables: tuples are appended round by round, so DuckDB's zone maps
skip most row groups for the delta filter, and no bookkeeping tables have to be kept in sync.
Each round runs one INSERT per relation (the union of its rules' SELECTs, anti-joined with the
table); rules joining an empty relation are skipped without asking DuckDB.  Strata whose inputs
are complete, and the INSERTs of one round, run side by side on their own connections.
"""

from __future__ import annotations

import heapq
import math
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import duckdb

from .compile_sql import (
    CUR,
    DELTA,
    FULL,
    OLD,
    PREV,
    SqlCompiler,
    insert_facts,
    insert_new_tuples,
    plain_table,
    quote,
    sql_literal,
    versioned_table,
)
from .connect import NO_LIMITS, Limits, connect
from .errors import DatalogError
from .list_params import LIST_BATCH_VALUES, unnest_select, values_fit
from .program import Program
from .query import compile_query
from .stratify import Stratum, rule_edges
from .syntax import Atom, Const, Fact, Relation, Rule
from .typesys import SQL_TYPES

if TYPE_CHECKING:
    import pyarrow as pa


@cache
def _arrow_types() -> dict[str, pa.DataType]:
    # pyarrow is imported on first use: reading saved results never needs it.
    import pyarrow as pa

    return {"symbol": pa.string(), "number": pa.int64(), "unsigned": pa.uint64(), "float": pa.float64()}


def _is_arrow_table(value: object) -> TypeGuard[pa.Table]:
    # Without pyarrow imported, nothing can be one of its tables.
    pa = sys.modules.get("pyarrow")
    return pa is not None and isinstance(value, pa.Table)


_LOAD_VIEW = "__cpq_load"
Columns = list[list]  # a relation's rows, one list of values per column


def _arrow_table(relation: str, columns: Columns, base_types: Iterable[str]) -> pa.Table:
    """Columns of checked values as an Arrow table (for batches too large for lists)."""
    import pyarrow as pa

    try:
        arrays = [
            pa.array(column, type=_arrow_types()[base])
            for column, base in zip(columns, base_types, strict=True)
        ]
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise ValueError(f"cannot load rows into '{relation}': {exc}") from exc
    return pa.Table.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))])


def _check_types(relation: str, columns: Columns, base_types: Iterable[str]) -> None:
    """Refuse a value of the wrong Python type (a float or a bool for a number, None), which
    DuckDB or Arrow would otherwise convert (1.5 to 1, True to 1)."""
    for column, base in zip(columns, base_types, strict=True):
        if not values_fit(column, base):
            raise ValueError(f"cannot load rows into '{relation}': a value is not a {base}")


@dataclass(frozen=True, slots=True)
class _LoadStatement:
    """An INSERT of facts, with the list parameters or the Arrow view it reads."""

    sql: str
    params: list[list] | None = None
    view: tuple[str, pa.Table] | None = None


ROUND_SPAN = 1 << 20  # rounds a stratum may use; stratum k's are k * ROUND_SPAN + 1, + 2, ...
# Strata evaluated at once, each on its own connection: one more than the cores (up to 4),
# for while one statement is planned (in Python's thread, a millisecond or more) the others
# run.  Each statement then gets DuckDB threads of its own (EVALUATION_THREADS): on two cores,
# three single-threaded statements side by side evaluate SciPy + Astropy in 5.8 s where two
# statements of two threads each take 6.4 s.
_CORES = os.cpu_count() or 1
DEFAULT_CONCURRENCY = 1 if _CORES == 1 else min(4, _CORES + 1)
EVALUATION_THREADS = max(1, _CORES // DEFAULT_CONCURRENCY)


@dataclass(slots=True)
class StratumStats:
    index: int
    relations: list[str]
    recursive: bool
    iterations: int  # rounds run (a recursive stratum's last round is the one adding nothing)
    first_iter: int  # global round numbers spanned by this stratum
    last_iter: int
    seconds: float
    new_tuples: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class EvalStats:
    strata: list[StratumStats]
    seconds: float
    rounds: int  # the last global round number used
    counts: dict[str, int]  # final size of every relation

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class _RuleSql:
    """A rule's SELECTs, which may yield a tuple more than once: the statement that runs
    them makes the tuples distinct once for all its rules (see Database._run_round)."""

    rule: Rule
    positive: list[str]  # relations of the positive body atoms
    initial: str  # SELECT for the first round (all atoms read everything before the round)
    # (delta relation, SELECT) per atom of the stratum's own relations; recursive strata only.
    variants: list[tuple[str, str]]


Connection = duckdb.DuckDBPyConnection


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


# Every Database not closed yet, so that a process about to exit can close them (see
# close_all_databases).
_OPEN: weakref.WeakSet[Database] = weakref.WeakSet()


def close_all_databases() -> None:
    """Close the databases still open (a file is then complete, a spill folder removed)."""
    for db in list(_OPEN):
        try:
            db.close()
        except duckdb.Error:
            _OPEN.discard(db)


class _Cursors:
    """One DuckDB connection per evaluation thread (DuckDB plans a statement in the thread
    that runs it), all closed, or interrupted, together."""

    def __init__(self, con: Connection) -> None:
        self._con = con
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[Connection] = []

    def get(self) -> Connection:
        cursor = getattr(self._local, "con", None)
        if cursor is None:
            # A cursor takes its settings from the connection (engine.connect).
            cursor = self._local.con = self._con.cursor()
            with self._lock:
                self._all.append(cursor)
        return cursor

    def interrupt(self) -> None:
        with self._lock:
            for cursor in self._all:
                cursor.interrupt()

    def close(self) -> None:
        with self._lock:
            for cursor in self._all:
                cursor.close()
            self._all.clear()


class Database:
    """Tables for every relation of `program`, in memory (path=None) or in a DuckDB file."""

    def __init__(
        self,
        program: Program,
        path: str | Path | None = None,
        block_size: int | None = None,
        limits: Limits = NO_LIMITS,
    ) -> None:
        """`block_size`: of a new database file, in bytes, where DuckDB lets it be chosen;
        `limits`: what the connection may use (engine.connect)."""
        self.program = program
        self.con = connect(path, block_size=block_size, limits=limits)
        _OPEN.add(self)
        self._compiler = SqlCompiler(program.relations)
        self._compiled: list[list[_RuleSql]] | None = None
        self._sizes: dict[str, int] = {}  # relation sizes, maintained during evaluate()
        self._evaluated = False  # derived tuples to clear before evaluating again
        self._deps: list[set[int]] | None = None
        self.concurrency = DEFAULT_CONCURRENCY
        self._round_pool: ThreadPoolExecutor | None = None
        self._cursors: _Cursors | None = None
        self.last_update_seconds = 0.0
        self.staged: set[str] = set()  # relations with a staging table (see staging_table)
        # One transaction: in a database file, each statement would otherwise be a commit.
        self.con.execute("BEGIN TRANSACTION")
        try:
            self._create_tables()
            self._insert_program_facts()
            self.con.execute("COMMIT")
        except BaseException:
            self.con.close()
            raise

    @classmethod
    def open(
        cls, program: Program, path: str | Path, read_only: bool = True, limits: Limits = NO_LIMITS
    ) -> Database:
        """Reopen a database file of `program`, evaluated (no tables are created)."""
        self = cls.__new__(cls)
        self.program = program
        self.con = connect(path, read_only=read_only, limits=limits)
        _OPEN.add(self)
        self._compiler = SqlCompiler(program.relations)
        self._compiled = None
        self._sizes = {}
        self._evaluated = True
        self._deps = None
        self.concurrency = DEFAULT_CONCURRENCY
        self._round_pool = None
        self._cursors = None
        self.last_update_seconds = 0.0
        self.staged = set()
        return self

    @classmethod
    def from_template(cls, program: Program, path: str | Path, limits: Limits = NO_LIMITS) -> Database:
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

    # -- context manager -------------------------------------------------------------------

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()
        _OPEN.discard(self)

    # -- schema and loading ----------------------------------------------------------------

    def table(self, relation: str) -> str:
        """The (quoted) SQL name of a relation's table."""
        self._relation(relation)
        return quote(relation)

    def _relation(self, name: str) -> Relation:
        try:
            return self.program.relations[name]
        except KeyError:
            raise KeyError(f"unknown relation '{name}'") from None

    def _create_tables(self) -> None:
        statements = []
        for rel in self.program.relations.values():
            cols = [
                f"{quote(name)} {SQL_TYPES[base]}"
                for (name, _), base in zip(rel.columns, rel.base_types, strict=True)
            ]
            cols += ['"_iter" BIGINT NOT NULL', '"_rule" INTEGER']
            statements.append(f"CREATE TABLE IF NOT EXISTS {quote(rel.name)} ({', '.join(cols)})")
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

    def load(self, relation: str, rows: Iterable[tuple] | pa.Table) -> int:
        """Append input tuples (as `_iter` 0); duplicates are dropped.  Returns how many were new.

        `rows` is a pyarrow Table (columns by position) or tuples; tuples go to DuckDB column
        by column, as lists when they are few (see list_params) and as Arrow arrays otherwise.
        """
        rel = self._relation(relation)
        if _is_arrow_table(rows):
            if rows.num_columns != rel.arity:
                raise ValueError(
                    f"'{relation}' has {rel.arity} column(s), the table has {rows.num_columns}"
                )
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
            table = _arrow_table(relation, columns, rel.base_types)
        if rel.arity == 0:
            return self._insert_unit(relation)
        return self._load_statements([self._insert_from(relation, table, _LOAD_VIEW, disjoint=False)])

    def load_disjoint(self, tables: Mapping[str, pa.Table | Columns], *, staged: bool = False) -> int:
        """Append input tuples to several relations at once (as `_iter` 0), all or none.  A
        batch is a pyarrow Table or a list per column (for few values: see list_params).  Each
        must be a set with no row in its relation already (the facts of files not loaded
        before): it is then neither made a set nor compared with the table, a comparison whose
        cost grows with the table.  Returns how many tuples were added.

        `staged`: into the relations' staging tables of an update (see `staging_table`)
        instead of the relations themselves."""
        statements: list[_LoadStatement] = []
        added = 0
        for relation, batch in tables.items():
            if _is_arrow_table(batch):
                rows = batch.num_rows
                if rows:
                    view = f"{_LOAD_VIEW}_{len(statements)}"
                    statements.append(
                        self._insert_from(relation, batch, view, disjoint=True, staged=staged)
                    )
            else:
                rows = max(map(len, batch), default=0)
                if rows:
                    statements.append(
                        self._columns_insert(relation, batch, disjoint=True, staged=staged)
                    )
            added += rows
        self._load_statements(statements)
        return added

    def _insert_from(
        self, relation: str, table: pa.Table, view: str, *, disjoint: bool, staged: bool = False
    ) -> _LoadStatement:
        """The INSERT that appends the rows of `table` (checked against the relation) as facts,
        read through the view `view`: a set of them, new ones only, unless the caller vouches
        for both."""
        rel = self._relation(relation)
        if rel.arity == 0 or table.num_columns != rel.arity:
            raise ValueError(f"'{relation}' has {rel.arity} column(s), the table has {table.num_columns}")
        if any(column.null_count for column in table.columns):
            raise ValueError(f"cannot load NULL values into '{relation}'")
        casts = ", ".join(
            f"CAST(c{i} AS {SQL_TYPES[base]}) AS c{i}" for i, base in enumerate(rel.base_types)
        )
        select = f"SELECT {'' if disjoint else 'DISTINCT '}{casts} FROM {view}"
        anti_join = not disjoint and self.count(relation) > 0
        target = self.staging_table(relation) if staged else None
        sql = insert_new_tuples(rel, select, "0", "NULL", anti_join=anti_join, table=target)
        return _LoadStatement(sql, view=(view, table.rename_columns([f"c{i}" for i in range(rel.arity)])))

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

    def _load_statements(self, statements: list[_LoadStatement]) -> int:
        """Run loading INSERTs in one transaction; returns how many rows they added.  Those
        without parameters go in one call (a call costs more than a small statement)."""
        if not statements:
            return 0
        views = [st.view for st in statements if st.view is not None]
        plain = [st.sql for st in statements if st.params is None]
        added = 0
        try:
            for name, table in views:
                self.con.register(name, table)
            self.con.execute("BEGIN TRANSACTION")
            try:
                for st in statements:
                    if st.params is not None:
                        added += self._execute_count(st.sql, params=st.params)
                if len(plain) == 1:
                    added += self._execute_count(plain[0])
                elif plain:
                    self.con.execute(";\n".join(plain))
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
        except (duckdb.ConversionException, duckdb.InvalidInputException) as exc:
            raise ValueError(f"cannot load rows: {exc}") from exc
        finally:
            for name, _ in views:
                self.con.unregister(name)
        return added

    # -- evaluation ------------------------------------------------------------------------

    def _compile(self) -> list[list[_RuleSql]]:
        if self._compiled is None:
            self._compiled = [
                [self._compile_rule(self.program.rules[i], stratum) for i in stratum.rules]
                for stratum in self.program.stratification
            ]
        return self._compiled

    def _compile_rule(self, rule: Rule, stratum: Stratum) -> _RuleSql:
        plan = self.program.plans[rule.index]
        compiler = self._compiler
        positive = sorted({atom.relation for atom in plan.atoms})
        if not stratum.recursive:
            select = compiler.select_head(rule.head, plan, plain_table, distinct=False)
            return _RuleSql(rule, positive, select, [])
        own = set(stratum.relations)

        def initial_ref(_index: int, atom: Atom) -> str:
            return (
                versioned_table(atom.relation, FULL)
                if atom.relation in own
                else quote(atom.relation)
            )

        initial = compiler.select_head(rule.head, plan, initial_ref, distinct=False)
        recursive_atoms = [i for i, atom in enumerate(plan.atoms) if atom.relation in own]
        variants = []
        for k, delta_index in enumerate(recursive_atoms):
            # Semi-naive: atom k reads the previous round's delta, recursive atoms before it read
            # older tuples only and those after it everything, so no combination runs twice.
            versions = {i: (OLD if j < k else FULL) for j, i in enumerate(recursive_atoms)}
            versions[delta_index] = DELTA

            def ref(index: int, atom: Atom, versions: dict[int, str] = versions) -> str:
                if index in versions:
                    return versioned_table(atom.relation, versions[index])
                return quote(atom.relation)

            variants.append(
                (
                    plan.atoms[delta_index].relation,
                    compiler.select_head(rule.head, plan, ref, distinct=False),
                )
            )
        return _RuleSql(rule, positive, initial, variants)

    def evaluate(self) -> EvalStats:
        """Compute every derived relation from the current inputs (re-evaluation is allowed).

        Strata whose inputs are complete run side by side, each on its own DuckDB connection:
        DuckDB plans every statement in the calling thread (about a millisecond or two, the
        bulk of the cost on small inputs), so planning too is spread over the cores.  Stratum
        k numbers its rounds from `k * ROUND_SPAN + 1`: every tuple still has a derivation
        from tuples of smaller `_iter`, whatever order the strata ran in, and the numbers are
        the same from one evaluation to the next."""
        started = time.perf_counter()
        compiled = self._compile()
        if self._evaluated:
            self._clear_derived()
            self._sizes = self._count_all()
        else:
            self._sizes = self._row_counts()
        self._evaluated = True
        return self._run_strata(
            lambda index, con: self._run_stratum(index, compiled[index], con), started
        )

    def _run_strata(
        self, run_one: Callable[[int, Connection], StratumStats], started: float
    ) -> EvalStats:
        """Run `run_one` for every stratum, each once the strata it reads are done."""
        strata = self.program.stratification
        stats: list[StratumStats | None] = [None] * len(strata)
        waits = [set(deps) for deps in self._stratum_dependencies()]
        needed_by: list[list[int]] = [[] for _ in strata]
        for index, deps in enumerate(waits):
            for dep in deps:
                needed_by[dep].append(index)
        if self.concurrency <= 1:
            for index in range(len(strata)):
                stats[index] = run_one(index, self.con)
        else:
            self._cursors = _Cursors(self.con)
            self._round_pool = ThreadPoolExecutor(max_workers=self.concurrency)
            try:
                self._run_concurrently(run_one, stats, waits, needed_by)
            finally:
                self._round_pool.shutdown(wait=True, cancel_futures=True)
                self._round_pool = None
                self._cursors.close()
        done = [s for s in stats if s is not None]
        rounds = max((s.last_iter for s in done), default=0)
        return EvalStats(done, time.perf_counter() - started, rounds, dict(self._sizes))

    def _run_concurrently(
        self,
        run_one: Callable[[int, Connection], StratumStats],
        stats: list[StratumStats | None],
        waits: list[set[int]],
        needed_by: list[list[int]],
    ) -> None:
        cursors = self._cursors
        assert cursors is not None

        def run(index: int) -> StratumStats:
            return run_one(index, cursors.get())

        # Of the strata ready to run, those with the longest chain of strata waiting on them
        # go first: the chains, not the number of statements, set the evaluation's length.
        height = [1] * len(waits)
        for index in reversed(range(len(waits))):
            height[index] += max((height[later] for later in needed_by[index]), default=0)
        ready = [(-height[i], i) for i, w in enumerate(waits) if not w]
        heapq.heapify(ready)
        pool = ThreadPoolExecutor(max_workers=self.concurrency)
        running: dict[Future[StratumStats], int] = {}
        try:
            while ready or running:
                while ready and len(running) < self.concurrency:
                    _, index = heapq.heappop(ready)
                    running[pool.submit(run, index)] = index
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    index = running.pop(future)
                    stats[index] = future.result()  # a failed stratum raises here
                    for later in needed_by[index]:
                        waits[later].discard(index)
                        if not waits[later]:
                            heapq.heappush(ready, (-height[later], later))
        except BaseException:
            # A failure or Ctrl-C: stop the statements still running rather than wait for them.
            cursors.interrupt()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _stratum_dependencies(self) -> list[set[int]]:
        """For each stratum, the earlier strata whose relations its rules read."""
        if self._deps is None:
            strata = self.program.stratification
            owner = {name: i for i, stratum in enumerate(strata) for name in stratum.relations}
            deps: list[set[int]] = []
            for index, stratum in enumerate(strata):
                found = set()
                for rule_index in stratum.rules:
                    for edge in rule_edges(self.program.rules[rule_index]):
                        other = owner.get(edge.body)
                        if other is not None and other != index:
                            found.add(other)
                deps.append(found)
            self._deps = deps
        return self._deps

    # -- incremental update ----------------------------------------------------------------

    def begin_update(self, previous: str | Path) -> None:
        """Start updating these results (a copy of the results file `previous`, which is
        attached read-only as the previous state) after some input facts changed: load the
        new facts with `load_disjoint(..., staged=True)`, then call `update`."""
        from .incremental import CHANGES_DB, OLD_DB

        target = str(previous).replace("'", "''")
        self.con.execute(f"ATTACH '{target}' AS {OLD_DB} (READ_ONLY)")
        try:
            self.con.execute(f"ATTACH ':memory:' AS {CHANGES_DB}")
        except BaseException:
            self.con.execute(f"DETACH {OLD_DB}")
            raise
        self.staged = set()

    def end_update(self) -> None:
        """Detach what `begin_update` attached (after `update`, or to give up)."""
        from .incremental import CHANGES_DB, OLD_DB

        for name in (CHANGES_DB, OLD_DB):
            try:
                self.con.execute(f"DETACH {name}")
            except duckdb.Error:
                pass

    def staging_table(self, relation: str) -> str:
        """The table (made on first use) that holds the new facts of `relation` during an
        update, with the relation's columns, `_iter` and `_rule`."""
        from .incremental import change_columns, change_table

        table = change_table("new", relation)
        if relation not in self.staged:
            cols = change_columns(self._relation(relation))
            self.con.execute(f'CREATE TABLE {table} ({", ".join(cols)}, "_iter" BIGINT, "_rule" INTEGER)')
            self.staged.add(relation)
        return table

    def update(
        self, changes: Mapping[str, tuple[str | None, str | None]], max_changed: int | None = None
    ) -> EvalStats:
        """Bring every derived relation up to date after input facts changed, by incremental
        maintenance (see incremental.py), with the same result as evaluate() from scratch.

        `changes`: per input relation, a SELECT of the rows it loses (each one of its rows)
        and a SELECT of the rows it gains (each new to it unless it is also lost), by column
        position; None for none.  They may read the previous state (incremental.OLD_DB) and
        the staging tables.  With `max_changed`, UpdateTooLarge is raised, before anything
        changes, when the inputs would lose and gain more tuples than that (net)."""
        from .incremental import (
            GENERATION_SPAN,
            GENERATION_TABLE,
            Changes,
            StratumUpdate,
            change_table,
            net_readers,
        )

        started = time.perf_counter()
        if not self._evaluated:
            raise DatalogError("update() needs evaluated results", source=self.program.source)
        self._sizes = self._row_counts()
        found = Changes()
        for relation, (deleted, inserted) in self._change_inputs(changes, max_changed).items():
            for kind in ("lost", "netlost"):
                found.set(kind, relation, deleted, change_table("del", relation))
            for kind in ("gained", "netgained"):
                found.set(kind, relation, inserted, change_table("ins", relation))
        needs_net = net_readers(self.program)
        self.con.execute(f"CREATE TABLE IF NOT EXISTS {GENERATION_TABLE} (g BIGINT)")
        (last,) = self.con.execute(f"SELECT coalesce(max(g), 0) FROM {GENERATION_TABLE}").fetchone() or (0,)
        generation = int(last) + 1
        self.con.execute(
            f"DELETE FROM {GENERATION_TABLE}; INSERT INTO {GENERATION_TABLE} VALUES ({generation})"
        )
        base = generation * GENERATION_SPAN
        stats = self._run_strata(
            lambda index, con: StratumUpdate(self, index, found, base, con, needs_net).run(), started
        )
        self.last_update_seconds = stats.seconds
        return stats

    def _change_inputs(
        self, changes: Mapping[str, tuple[str | None, str | None]], max_changed: int | None = None
    ) -> dict[str, tuple[int, int]]:
        """Apply the input relations' changes; returns the rows each lost and gained (net) that
        a rule can tell apart.  The statements go in few calls: most relations change by a few
        rows or none."""
        from .incremental import change_columns, change_table, same_values, value_columns

        making: list[str] = []
        for relation, (lost, gained) in changes.items():
            rel = self._relation(relation)
            cols = ", ".join(change_columns(rel))
            empty = f"SELECT {value_columns(rel)} FROM {quote(relation)} WHERE FALSE"
            lost, gained = lost or empty, gained or empty
            loses, gains = change_table("del", relation), change_table("ins", relation)
            making += [
                f"CREATE TABLE {loses} ({cols})",
                f"CREATE TABLE {gains} ({cols})",
                f"INSERT INTO {loses} ({lost}) EXCEPT ({gained})",
                f"INSERT INTO {gains} ({gained}) EXCEPT ({lost})",
            ]
        if not making:
            return {}
        self.con.execute(";\n".join(making))
        counts = self._change_counts(list(changes))
        applying = []
        for relation, (deleted, inserted) in counts.items():
            rel = self._relation(relation)
            table = quote(relation)
            if deleted:
                match = same_values(rel, table, "d")
                applying.append(
                    f"DELETE FROM {table} USING {change_table('del', relation)} AS d "
                    f'WHERE {table}."_iter" = 0 AND {match}'
                )
            if inserted:
                names_sql = ", ".join([quote(c) for c in rel.column_names] + ['"_iter"', '"_rule"'])
                applying.append(
                    f"INSERT INTO {table} ({names_sql}) SELECT {value_columns(rel)}, 0, NULL "
                    f"FROM {change_table('ins', relation)}"
                )
            self._sizes[relation] += inserted - deleted
        if applying:
            self.con.execute(";\n".join(applying))
        counts = self._unseen_changes_dropped(counts)
        changed = sum(d + i for d, i in counts.values())
        if max_changed is not None and changed > max_changed:
            from .incremental import UpdateTooLarge

            raise UpdateTooLarge(changed, max_changed)
        return counts

    def _unseen_changes_dropped(self, counts: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        """Take out of the changes of each input relation the pairs of a lost and a gained tuple
        that agree on every column some rule reads: no derivation can tell one from the other
        (an edit that changes a file's line count changes no derived tuple).  The tables
        themselves already hold the full change.  Returns the counts left."""
        from .incremental import change_table, read_columns

        read = read_columns(self.program)
        statements = []
        for relation, (deleted, inserted) in counts.items():
            rel = self._relation(relation)
            columns = [rel.column_names[i] for i in sorted(read.get(relation, ()))]
            if not deleted or not inserted or len(columns) == rel.arity:
                continue
            loses, gains = change_table("del", relation), change_table("ins", relation)
            if not columns:  # no rule reads the relation
                statements += [f"DELETE FROM {loses}", f"DELETE FROM {gains}"]
                continue
            names = ", ".join(quote(c) for c in columns)
            same = change_table("same", relation)
            statements.append(
                f"CREATE TABLE {same} AS SELECT {names} FROM {loses} INTERSECT SELECT {names} FROM {gains}"
            )
            for table in (loses, gains):
                match = " AND ".join(f"{table}.{quote(c)} = b.{quote(c)}" for c in columns)
                statements.append(f"DELETE FROM {table} USING {same} AS b WHERE {match}")
        if not statements:
            return counts
        self.con.execute(";\n".join(statements))
        return self._change_counts(list(counts))

    def _change_counts(self, relations: list[str]) -> dict[str, tuple[int, int]]:
        """The rows of each relation's change tables: (lost, gained)."""
        from .incremental import change_table

        counting = [
            f"SELECT {k} AS k, (SELECT count(*) FROM {change_table('del', name)}) AS d, "
            f"(SELECT count(*) FROM {change_table('ins', name)}) AS i"
            for k, name in enumerate(relations)
        ]
        rows = self.con.execute(" UNION ALL ".join(counting)).fetchall()
        return {relations[k]: (int(d), int(i)) for k, d, i in rows}

    def _run_stratum(
        self, index: int, rule_sqls: list[_RuleSql], con: duckdb.DuckDBPyConnection
    ) -> StratumStats:
        stratum = self.program.stratification[index]
        stratum_start = time.perf_counter()
        round_no = first = index * ROUND_SPAN + 1
        totals = {name: 0 for name in stratum.relations}
        new = self._run_round(rule_sqls, round_no, con, initial=True)
        iterations = 1
        while stratum.recursive and any(new.values()):
            for name, count in new.items():
                totals[name] += count
            round_no += 1
            iterations += 1
            if iterations >= ROUND_SPAN:
                raise DatalogError(
                    f"stratum {index} ({', '.join(stratum.relations)}) did not reach a fixpoint "
                    f"in {ROUND_SPAN} rounds",
                    source=self.program.source,
                )
            new = self._run_round(rule_sqls, round_no, con, initial=False, previous=new)
        for name, count in new.items():
            totals[name] += count
        return StratumStats(
            index=index,
            relations=list(stratum.relations),
            recursive=stratum.recursive,
            iterations=iterations,
            first_iter=first,
            last_iter=round_no,
            seconds=time.perf_counter() - stratum_start,
            new_tuples=totals,
        )

    def _run_round(
        self,
        rule_sqls: list[_RuleSql],
        round_no: int,
        con: duckdb.DuckDBPyConnection,
        *,
        initial: bool,
        previous: dict[str, int] | None = None,
    ) -> dict[str, int]:
        sizes = self._sizes
        new: dict[str, int] = {}
        selects: dict[str, list[tuple[int, str]]] = {}
        for rule_sql in rule_sqls:
            head = rule_sql.rule.head.relation
            new.setdefault(head, 0)
            # A join with an empty relation yields nothing: skipping it saves DuckDB's fixed
            # per-statement cost, which dominates on the many small relations of real programs.
            if any(sizes[name] == 0 for name in rule_sql.positive):
                continue
            if initial:
                select = rule_sql.initial
            else:
                assert previous is not None
                live = [sql for rel, sql in rule_sql.variants if previous.get(rel, 0) > 0]
                if not live:
                    continue
                select = live[0] if len(live) == 1 else " UNION ALL ".join(f"({p})" for p in live)
            selects.setdefault(head, []).append((rule_sql.rule.index, select))
        return self._insert_round(selects, round_no, con, new)

    def _insert_round(
        self,
        selects: dict[str, list[tuple[int, str]]],
        round_no: int,
        con: duckdb.DuckDBPyConnection,
        new: dict[str, int] | None = None,
    ) -> dict[str, int]:
        """Insert, as round `round_no`, the new tuples of each relation's SELECTs (rule index,
        SELECT); returns how many each relation gained."""
        sizes = self._sizes
        new = {head: 0 for head in selects} if new is None else new
        # One INSERT per relation and round: all rules of a round read the same snapshot, so
        # they can run as one statement, which costs far less than one statement per rule.
        # The rules' SELECTs may repeat a tuple: the statement makes them distinct once (a
        # DISTINCT per rule would cost a hash aggregate each, a millisecond or two apiece).
        statements: list[tuple[str, list[tuple[int, str]], str]] = []
        for head, parts in selects.items():
            rel = self.program.relations[head]
            if len(parts) == 1:
                rule_expr, select = str(parts[0][0]), f"SELECT DISTINCT * FROM ({parts[0][1]})"
            else:
                cols = ", ".join([f"c{i}" for i in range(rel.arity)] or ["c_unit"])
                union = " UNION ALL ".join(
                    f"SELECT *, {index} AS r FROM ({part})" for index, part in parts
                )
                # The smallest rule index wins when several rules derive a tuple in one round.
                select = f"SELECT {cols}, min(r) AS r FROM ({union}) GROUP BY {cols}"
                rule_expr = "s.r"
            sql = insert_new_tuples(
                rel,
                select,
                str(round_no),
                rule_expr,
                anti_join=sizes[head] > 0,  # the SELECT itself is duplicate-free
            )
            sql = sql.replace(CUR, str(round_no)).replace(PREV, str(round_no - 1))
            statements.append((head, parts, sql))

        def insert(head: str, parts: list[tuple[int, str]], sql: str, con: Connection) -> int:
            try:
                return self._execute_count(sql, con)
            except duckdb.Error as exc:
                raise self._rule_failure(parts, round_no, exc, con) from exc

        pool, cursors = self._round_pool, self._cursors
        if pool is None or cursors is None or len(statements) < 2:
            added = [insert(*statement, con) for statement in statements]
        else:
            # The relations of a recursive stratum: each statement reads only earlier rounds
            # of the others, and writes its own table, so they can run side by side (the
            # long chains of rounds of a few strata are the evaluation's critical path).
            futures = [
                pool.submit(lambda st: insert(*st, cursors.get()), statement)
                for statement in statements[1:]
            ]
            try:
                first = insert(*statements[0], con)
            finally:
                wait(futures)
            added = [first] + [future.result() for future in futures]
        for (head, _, _), count in zip(statements, added, strict=True):
            new[head] += count
            sizes[head] += count
        return new

    def _rule_failure(
        self,
        parts: list[tuple[int, str]],
        round_no: int,
        exc: duckdb.Error,
        con: duckdb.DuckDBPyConnection,
    ) -> DatalogError:
        """Pin a run-time failure (a bad regex, say) on the rule that causes it."""
        culprit = self.program.rules[parts[0][0]]
        for index, select in parts:
            sql = select.replace(CUR, str(round_no)).replace(PREV, str(round_no - 1))
            try:
                con.execute(f"SELECT count(*) FROM ({sql})").fetchall()
            except duckdb.Error:
                culprit = self.program.rules[index]
                break
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return DatalogError(
            f"evaluation of rule failed: {message}",
            source=self.program.path(culprit.file),
            line=culprit.line,
            column=culprit.column,
        )

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

    def _clear_derived(self) -> None:
        heads = {rule.head.relation for rule in self.program.rules}
        for name in heads:
            self.con.execute(f'DELETE FROM {quote(name)} WHERE "_iter" > 0')

    def _execute_count(
        self, sql: str, con: duckdb.DuckDBPyConnection | None = None, params: list | None = None
    ) -> int:
        con = self.con if con is None else con
        rows = con.execute(sql, params).fetchall()  # fetch everything: DuckDB wants results finished
        return int(rows[0][0]) if rows else 0

    # -- reading ---------------------------------------------------------------------------

    def rows(self, relation: str) -> list[tuple]:
        """All tuples (without bookkeeping columns), sorted."""
        rel = self._relation(relation)
        if rel.arity == 0:
            return [()] if self.count(relation) else []
        cols = ", ".join(quote(name) for name in rel.column_names)
        order = ", ".join(str(i + 1) for i in range(rel.arity))
        return self.con.execute(f"SELECT {cols} FROM {quote(relation)} ORDER BY {order}").fetchall()

    def count(self, relation: str) -> int:
        self._relation(relation)
        return self._execute_count(f"SELECT count(*) FROM {quote(relation)}")

    def query(self, text: str, source: str = "<query>") -> tuple[list[str], list[tuple]]:
        """Run a rule body as a query; returns (variable names, distinct sorted rows)."""
        compiled = compile_query(text, self.program.relations, source, self.program.inline)
        rows = self.con.execute(compiled.sql).fetchall()
        if not compiled.columns:
            return [], [()] if rows else []
        return compiled.columns, rows

    def rule_sql(self, rule_index: int) -> str:
        """The SELECT evaluating a rule in its first round (for debugging and `--explain`)."""
        for rule_sqls in self._compile():
            for rule_sql in rule_sqls:
                if rule_sql.rule.index == rule_index:
                    return f"SELECT DISTINCT * FROM ({rule_sql.initial})"
        raise KeyError(f"no rule {rule_index}")
