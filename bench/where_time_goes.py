"""Where a cold `cpq assess` spends its time, phase by phase, and which strata and statements
its evaluation spends it in.

    python bench/where_time_goes.py TREE [--evaluations N] [--statements]

1. A cold assessment of TREE, in this process, with a fresh store in a temporary folder (the
   tree's own `.cpq/` is left alone): for each phase cpq reports (the progress line's), when it
   started, how long it took, and the CPU time this process and its finished worker processes
   used meanwhile.  The saving of the results runs in a thread beside the reading of the
   results; its wait is the last line.  The machine is saturated when CPU / wall is near its
   core count: only less CPU then makes the run shorter.
2. With `--evaluations N`: the same facts evaluated N more times, one stratum at a time
   (so a stratum's time is its own), and the strata that took longest (the least of the N).
3. With `--statements`: the same facts evaluated once more, one statement at a time, and the
   relations whose statements took longest: how many statements each ran (one per round of its
   stratum), and how many of them, and how much of their time, added fewer than SMALL tuples
   each.  Such a statement costs what DuckDB's planning and its scans of the relations joined
   cost, however little it adds: the late rounds of a recursive stratum's long chains, the
   rules that derive a handful of tuples.

The figures move by 10 % or more between runs on a shared machine: compare runs made one after
the other, several times.
"""

from __future__ import annotations

import argparse
import re
import resource
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpq.engine import Database
from cpq.pipeline.assessment import assess
from cpq.pipeline.progress import Progress

SMALL = 100  # tuples: a statement adding fewer is counted apart
_INSERT = re.compile(r'INSERT INTO "((?:[^"]|"")+)"')  # the relation a statement adds to


def cpu_seconds() -> tuple[float, float]:
    """CPU time of this process and of its children that have ended (the extraction workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class Timeline(Progress):
    """A silent progress that notes when each phase starts, with the CPU used so far."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float, float, float]] = []
        super().__init__(quiet=True)

    def phase(self, label: str, total: int | None = None) -> None:
        self.mark(label)
        super().phase(label, total)

    def mark(self, label: str) -> None:
        own, children = cpu_seconds()
        self.marks.append((label, time.perf_counter(), own, children))


def print_timeline(marks: list[tuple[str, float, float, float]]) -> None:
    """One line per phase, from each mark to the next: the first mark is the start, the last
    one the end."""
    print(f"{'phase':32} {'starts':>8} {'wall':>7} {'CPU':>7} {'workers':>8}")
    _, started, own_start, children_start = marks[0]
    phases = marks[1:]
    for (label, at, own, children), (_, end, own_end, children_end) in zip(phases, phases[1:], strict=False):
        print(
            f"{label:32} {at - started:7.2f}s {end - at:6.2f}s {own_end - own:6.2f}s "
            f"{children_end - children:7.2f}s"
        )
    _, end, own, children = marks[-1]
    print(
        f"{'in all':32} {'':8} {end - started:6.2f}s {own - own_start:6.2f}s "
        f"{children - children_start:7.2f}s"
    )


def cold_run(tree: Path) -> None:
    timeline = Timeline()
    timeline.mark("start")
    with tempfile.TemporaryDirectory(prefix="cpq-where-") as store:
        result = assess(
            tree,
            use_cache=True,
            cache_dir=Path(store),
            progress=timeline,
            keep_database=False,
            save_later=True,
        )
        timeline.mark("waiting for the save")
        result.wait_saved()
        timeline.mark("done")
    print(f"cold assessment of {tree}: {len(result.files)} files, {result.lines:,} lines")
    print_timeline(timeline.marks)


def evaluated(tree: Path) -> Database:
    """The tree's facts and rules, evaluated in memory without the caches (so the database can
    be evaluated again), one stratum at a time (so each one's time is its own)."""
    db = assess(tree, report=False).db
    assert db is not None
    db.concurrency = 1
    return db


def strata(db: Database, evaluations: int, shown: int = 25) -> None:
    least: dict[int, float] = {}
    totals = []
    last = None
    for _ in range(evaluations):
        last = db.evaluate()
        totals.append(last.seconds)
        for stratum in last.strata:
            least[stratum.index] = min(least.get(stratum.index, float("inf")), stratum.seconds)
    assert last is not None
    print(
        f"\n{evaluations} evaluation{'s' if evaluations != 1 else ''}, one stratum at a time: "
        + ", ".join(f"{t:.2f}s" for t in totals)
        + f"; {len(last.strata)} strata, {sum(last.counts.values()):,} tuples"
    )
    print(f"{'least':>7} {'rounds':>6} {'new tuples':>11}  stratum")
    by_index = {stratum.index: stratum for stratum in last.strata}
    for index in sorted(least, key=lambda i: -least[i])[:shown]:
        stratum = by_index[index]
        print(
            f"{least[index]:6.3f}s {stratum.iterations:6d} {sum(stratum.new_tuples.values()):11,}  "
            f"#{index} {', '.join(stratum.relations)}"
        )


@dataclass
class Spent:
    """What one relation's statements took in an evaluation."""

    statements: int = 0
    seconds: float = 0.0
    small: int = 0  # statements that added fewer than SMALL tuples
    small_seconds: float = 0.0


def statements(db: Database, shown: int = 25) -> None:
    spent: dict[str, Spent] = defaultdict(Spent)
    run = db._execute_count

    def timed(sql: str, con: Any = None, params: Any = None) -> int:
        started = time.perf_counter()
        added = run(sql, con, params)
        seconds = time.perf_counter() - started
        found = _INSERT.match(sql.lstrip())
        if found is not None:
            this = spent[found.group(1).replace('""', '"')]
            this.statements += 1
            this.seconds += seconds
            if added < SMALL:
                this.small += 1
                this.small_seconds += seconds
        return added

    db._execute_count = timed  # type: ignore[method-assign]
    try:
        db.evaluate()
    finally:
        del db._execute_count
    total = Spent(
        sum(s.statements for s in spent.values()),
        sum(s.seconds for s in spent.values()),
        sum(s.small for s in spent.values()),
        sum(s.small_seconds for s in spent.values()),
    )
    print(
        f"\n1 evaluation, one statement at a time: {total.statements} statements, {total.seconds:.2f}s; "
        f"{total.small} of them added fewer than {SMALL} tuples each ({total.small_seconds:.2f}s)"
    )
    print(f"{'seconds':>8} {'statements':>10} {'small':>5} {'small s':>7}  relation")
    for name, this in sorted(spent.items(), key=lambda item: -item[1].seconds)[:shown]:
        print(
            f"{this.seconds:7.3f}s {this.statements:10d} {this.small:5d} {this.small_seconds:6.3f}s  {name}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--evaluations", type=int, default=0, metavar="N")
    parser.add_argument("--statements", action="store_true", help="time each relation's statements")
    args = parser.parse_args()
    if not args.tree.is_dir():
        sys.exit(f"{args.tree}: not a folder")
    cold_run(args.tree)
    if args.evaluations > 0 or args.statements:
        db = evaluated(args.tree)
        try:
            if args.evaluations > 0:
                strata(db, args.evaluations)
            if args.statements:
                statements(db)
        finally:
            db.close()


if __name__ == "__main__":
    main()
