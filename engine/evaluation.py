"""Bottom-up evaluation of a Program in its tables: strata scheduled side by side, semi-naive
rounds, each round's rules run as one statement per relation.

Reading "earlier rounds only" is done by filtering on ``_iter`` (see compile_sql.versioned_table
and engine.storage for the bookkeeping columns) rather than by copying delta tables: tuples are
appended round by round, so DuckDB's zone maps skip most row groups for the delta filter, and
no bookkeeping tables have to be kept in sync.  Each round runs one INSERT per relation (the
union of its rules' SELECTs, anti-joined with the table); rules joining an empty relation are
skipped without asking DuckDB.  Strata whose inputs are complete, and the INSERTs of one round,
run side by side on their own connections.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any

import duckdb

from .compile_sql import CUR, DELTA, FULL, OLD, PREV, insert_new_tuples, plain_table, quote, versioned_table
from .errors import DatalogError
from .storage import Connection, Storage
from .stratify import Stratum, rule_edges
from .syntax import Atom, Rule

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


# Told (strata done, strata in all) as each stratum is done, in the thread that evaluates.
StratumDone = Callable[[int, int], None]


@dataclass(slots=True)
class _RuleSql:
    """A rule's SELECTs, which may yield a tuple more than once: the statement that runs
    them makes the tuples distinct once for all its rules (see Evaluation._insert_round)."""

    rule: Rule
    positive: list[str]  # relations of the positive body atoms
    initial: str  # SELECT for the first round (all atoms read everything before the round)
    # (delta relation, SELECT) per atom of the stratum's own relations; recursive strata only.
    variants: list[tuple[str, str]]


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


class Evaluation(Storage):
    """Evaluating the program's rules (the evaluation part of engine.Database)."""

    concurrency: int  # strata evaluated at once (and statements of one round)
    _compiled: list[list[_RuleSql]] | None  # per stratum, its rules' SQL (see _compile)
    _sizes: dict[str, int]  # relation sizes, maintained during evaluate()
    _deps: list[set[int]] | None  # see _stratum_dependencies
    _round_pool: ThreadPoolExecutor | None  # during evaluate(), for a round's statements
    _cursors: _Cursors | None

    def _init_state(self) -> None:
        super()._init_state()
        self._compiled = None
        self._sizes = {}
        self._deps = None
        # Temporary tables (a database `beside` another) are seen by their connection alone,
        # not by the cursors other strata would run on.
        self.concurrency = DEFAULT_CONCURRENCY if self._own_tables is None else 1
        self._round_pool = None
        self._cursors = None

    # -- the rules' SQL, the strata and their scheduling -----------------------------------

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
            return versioned_table(atom.relation, FULL) if atom.relation in own else quote(atom.relation)

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

    def evaluate(self, on_stratum: StratumDone | None = None) -> EvalStats:
        """Compute every derived relation from the current inputs (re-evaluation is allowed).
        `on_stratum(done, total)` is called, in this thread, as each stratum is done (for a
        caller that shows progress).

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
            lambda index, con: self._run_stratum(index, compiled[index], con), started, on_stratum
        )

    def _run_strata(
        self,
        run_one: Callable[[int, Connection], StratumStats],
        started: float,
        on_stratum: StratumDone | None = None,
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
                if on_stratum is not None:
                    on_stratum(index + 1, len(strata))
        else:
            self._cursors = _Cursors(self.con)
            self._round_pool = ThreadPoolExecutor(max_workers=self.concurrency)
            try:
                self._run_concurrently(run_one, stats, waits, needed_by, on_stratum)
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
        on_stratum: StratumDone | None = None,
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
        done = 0
        try:
            while ready or running:
                while ready and len(running) < self.concurrency:
                    _, index = heapq.heappop(ready)
                    running[pool.submit(run, index)] = index
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    index = running.pop(future)
                    stats[index] = future.result()  # a failed stratum raises here
                    done += 1
                    if on_stratum is not None:
                        on_stratum(done, len(stats))
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

    # -- the rounds of a stratum -----------------------------------------------------------

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
                union = " UNION ALL ".join(f"SELECT *, {index} AS r FROM ({part})" for index, part in parts)
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
            except duckdb.InterruptException:
                raise  # stopped from outside (a time limit): not the rule's fault
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
                pool.submit(lambda st: insert(*st, cursors.get()), statement) for statement in statements[1:]
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

    def _clear_derived(self) -> None:
        heads = {rule.head.relation for rule in self.program.rules}
        for name in heads:
            self.con.execute(f'DELETE FROM {quote(name)} WHERE "_iter" > 0')

    def rule_sql(self, rule_index: int) -> str:
        """The SELECT evaluating a rule in its first round (for debugging and `--explain`)."""
        for rule_sqls in self._compile():
            for rule_sql in rule_sqls:
                if rule_sql.rule.index == rule_index:
                    return f"SELECT DISTINCT * FROM ({rule_sql.initial})"
        raise KeyError(f"no rule {rule_index}")
