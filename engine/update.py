"""The entry points of an incremental update of evaluated results: the previous results
attached, the input relations' changes applied, then the strata brought up to date one by one
(engine.incremental), scheduled as evaluate() schedules them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from .change_tables import (
    CHANGES_DB,
    GENERATION_TABLE,
    OLD_DB,
    change_columns,
    change_table,
    input_change,
    same_values,
    value_columns,
)
from .compile_sql import quote
from .errors import DatalogError
from .evaluation import EvalStats, Evaluation, StratumDone
from .incremental import Changes, StratumUpdate, net_readers, read_columns

# _iter values one update may use: above every stratum's rounds (strata * ROUND_SPAN).
GENERATION_SPAN = 1 << 40


class UpdateTooLarge(Exception):
    """The inputs changed too much for an update to pay: evaluate from scratch instead."""

    def __init__(self, changed: int, limit: int) -> None:
        super().__init__(f"{changed} input tuples changed, more than {limit}")
        self.changed = changed


class Updating(Evaluation):
    """Incremental maintenance (the update part of engine.Database)."""

    last_update_seconds: float

    def _init_state(self) -> None:
        super()._init_state()
        self.last_update_seconds = 0.0

    def begin_update(self, previous: str | Path) -> None:
        """Start updating these results (a copy of the results file `previous`, which is
        attached read-only as the previous state) after some input facts changed: load the
        new facts with `load_disjoint(..., staged=True)`, then call `update`."""
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
        for name in (CHANGES_DB, OLD_DB):
            try:
                self.con.execute(f"DETACH {name}")
            except duckdb.Error:
                pass

    def update(
        self,
        changes: Mapping[str, tuple[str | None, str | None]],
        max_changed: int | None = None,
        on_stratum: StratumDone | None = None,
    ) -> EvalStats:
        """Bring every derived relation up to date after input facts changed, by incremental
        maintenance (see incremental.py), with the same result as evaluate() from scratch.

        `changes`: per input relation, a SELECT of the rows it loses (each one of its rows)
        and a SELECT of the rows it gains (each new to it unless it is also lost), by column
        position; None for none.  They may read the previous state (change_tables.OLD_DB) and
        the staging tables.  With `max_changed`, UpdateTooLarge is raised, before anything
        changes, when the inputs would lose and gain more tuples than that (net).
        `on_stratum(done, total)` as in evaluate()."""
        started = time.perf_counter()
        if not self._evaluated:
            raise DatalogError("update() needs evaluated results", source=self.program.source)
        self._sizes = self._row_counts()
        old_sizes = dict(self._sizes)  # the previous state's, which over-deletion reads
        found = Changes()
        for relation, (deleted, inserted) in self._change_inputs(changes, max_changed).items():
            rel = self._relation(relation)
            for kind in ("lost", "netlost"):
                found.set(kind, relation, deleted, input_change(rel, lost=True))
            for kind in ("gained", "netgained"):
                found.set(kind, relation, inserted, input_change(rel, lost=False))
        needs_net = net_readers(self.program)
        self.con.execute(f"CREATE TABLE IF NOT EXISTS {GENERATION_TABLE} (g BIGINT)")
        (last,) = self.con.execute(f"SELECT coalesce(max(g), 0) FROM {GENERATION_TABLE}").fetchone() or (0,)
        generation = int(last) + 1
        self.con.execute(
            f"DELETE FROM {GENERATION_TABLE}; INSERT INTO {GENERATION_TABLE} VALUES ({generation})"
        )
        base = generation * GENERATION_SPAN
        stats = self._run_strata(
            lambda index, con: StratumUpdate(self, index, found, base, con, needs_net, old_sizes).run(),
            started,
            on_stratum,
        )
        self.last_update_seconds = stats.seconds
        return stats

    def _change_inputs(
        self, changes: Mapping[str, tuple[str | None, str | None]], max_changed: int | None = None
    ) -> dict[str, tuple[int, int]]:
        """Apply the input relations' changes; returns the rows each lost and gained (net) that
        a rule can tell apart.  The statements go in few calls: most relations change by a few
        rows or none."""
        making: list[str] = []
        filling: list[str] = []
        for relation, (lost, gained) in changes.items():
            rel = self._relation(relation)
            cols = ", ".join(change_columns(rel))
            empty = f"SELECT {value_columns(rel)} FROM {quote(relation)} WHERE FALSE"
            lost, gained = lost or empty, gained or empty
            diff = change_table("diff", relation)
            making.append(f'CREATE TABLE {diff} ({cols}, "_lost" BOOLEAN)')
            # Both sides in one statement, each read once: the previous state's rows are a
            # scan of the whole relation (a file's node ids are not clustered in its table).
            filling.append(
                f"INSERT INTO {diff} WITH lost AS MATERIALIZED ({lost}), gained AS MATERIALIZED ({gained}) "
                "SELECT *, TRUE FROM (FROM lost EXCEPT FROM gained) "
                "UNION ALL SELECT *, FALSE FROM (FROM gained EXCEPT FROM lost)"
            )
        if not making:
            return {}
        self.con.execute(";\n".join(making))
        self._side_by_side(filling)
        counts = self._change_counts(list(changes))
        applying = []
        for relation, (deleted, inserted) in counts.items():
            rel = self._relation(relation)
            table = quote(relation)
            if deleted:
                match = same_values(rel, table, "d")
                applying.append(
                    f"DELETE FROM {table} USING {input_change(rel, lost=True)} AS d "
                    f'WHERE {table}."_iter" = 0 AND {match}'
                )
            if inserted:
                names_sql = ", ".join([quote(c) for c in rel.column_names] + ['"_iter"', '"_rule"'])
                applying.append(
                    f"INSERT INTO {table} ({names_sql}) SELECT {value_columns(rel)}, 0, NULL "
                    f"FROM {input_change(rel, lost=False)}"
                )
            self._sizes[relation] += inserted - deleted
        if applying:
            self.con.execute(";\n".join(applying))
        counts = self._unseen_changes_dropped(counts)
        changed = sum(d + i for d, i in counts.values())
        if max_changed is not None and changed > max_changed:
            raise UpdateTooLarge(changed, max_changed)
        return counts

    def _side_by_side(self, statements: list[str]) -> None:
        """Run the statements, each of which writes a table of its own, half of them on a
        second connection meanwhile (DuckDB runs each of these small ones on one core)."""
        if self.concurrency <= 1 or len(statements) < 2:
            self.con.execute(";\n".join(statements))
            return
        cursor = self.con.cursor()
        try:
            with ThreadPoolExecutor(max_workers=1) as pool:
                other_half = pool.submit(cursor.execute, ";\n".join(statements[1::2]))
                self.con.execute(";\n".join(statements[::2]))
                other_half.result()  # its failure, raised here
        finally:
            cursor.close()

    def _unseen_changes_dropped(self, counts: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        """Take out of the changes of each input relation the pairs of a lost and a gained tuple
        that agree on every column some rule reads: no derivation can tell one from the other
        (an edit that changes a file's line count changes no derived tuple).  The tables
        themselves already hold the full change.  Returns the counts left."""
        read = read_columns(self.program)
        statements = []
        for relation, (deleted, inserted) in counts.items():
            rel = self._relation(relation)
            columns = [rel.column_names[i] for i in sorted(read.get(relation, ()))]
            if not deleted or not inserted or len(columns) == rel.arity:
                continue
            diff = change_table("diff", relation)
            if not columns:  # no rule reads the relation
                statements.append(f"DELETE FROM {diff}")
                continue
            names = ", ".join(quote(c) for c in columns)
            same = change_table("same", relation)
            statements.append(
                f'CREATE TABLE {same} AS SELECT {names} FROM {diff} WHERE "_lost" '
                f'INTERSECT SELECT {names} FROM {diff} WHERE NOT "_lost"'
            )
            match = " AND ".join(f"{diff}.{quote(c)} = b.{quote(c)}" for c in columns)
            statements.append(f"DELETE FROM {diff} USING {same} AS b WHERE {match}")
        if not statements:
            return counts
        self.con.execute(";\n".join(statements))
        return self._change_counts(list(counts))

    def _change_counts(self, relations: list[str]) -> dict[str, tuple[int, int]]:
        """The rows of each relation's change tables: (lost, gained)."""
        counting = [
            f'SELECT {k} AS k, count(*) FILTER (WHERE "_lost") AS d, '
            f'count(*) FILTER (WHERE NOT "_lost") AS i FROM {change_table("diff", name)}'
            for k, name in enumerate(relations)
        ]
        rows = self.con.execute(" UNION ALL ".join(counting)).fetchall()
        return {relations[k]: (int(d), int(i)) for k, d, i in rows}
