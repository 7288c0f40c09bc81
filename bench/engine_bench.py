"""Benchmark of cpq.engine on a random graph.

    python bench/engine_bench.py [--edges 1000000] [--nodes 250000] [--sources 4] [--seed 1]

Reachability from a few sources (recursive, semi-naive), nodes never reached (negation), and
out-degree statistics (count / max / sum aggregates).  Targets are drawn from the first 90% of
the nodes only, so the last 10% have no incoming edge and stay unreached.
"""

from __future__ import annotations

import argparse
import random
import time

from cpq.engine import Database, parse_program

PROGRAM = """
.decl edge(x: number, y: number)
.input edge
.decl source(x: number)
.input source

// Nodes reachable from each source.
.decl reach(s: number, x: number)
reach(S, S) :- source(S).
reach(S, Y) :- reach(S, X), edge(X, Y).

.decl node(x: number)
node(X) :- edge(X, _) ; edge(_, X).
.decl reached(x: number)
reached(X) :- reach(_, X).
.decl unreached(x: number)
unreached(X) :- node(X), !reached(X).

.decl outdeg(x: number, n: number)
outdeg(X, N) :- node(X), N = count : { edge(X, _) }.
.decl degree_hist(n: number, c: number)
degree_hist(N, C) :- outdeg(_, N), C = count : { outdeg(_, N) }.
.decl maxdeg(n: number)
maxdeg(M) :- M = max N : { outdeg(_, N) }.
.decl total_out(s: number)
total_out(S) :- S = sum N : { outdeg(_, N) }.
.decl hub(x: number)
hub(X) :- outdeg(X, N), maxdeg(M), N * 2 >= M.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--nodes", type=int, default=250_000)
    parser.add_argument("--sources", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--arrow", action="store_true", help="load a pyarrow.Table (pyarrow is optional), not tuples"
    )
    args = parser.parse_args()

    rng = random.Random(args.seed)
    started = time.perf_counter()
    targets = int(args.nodes * 0.9)
    edges = [(rng.randrange(args.nodes), rng.randrange(targets)) for _ in range(args.edges)]
    sources = [(rng.randrange(targets),) for _ in range(args.sources)]
    print(f"generated {len(edges):,} edges in {time.perf_counter() - started:.2f}s")

    started = time.perf_counter()
    prog = parse_program(PROGRAM, source="bench.dl")
    db = Database(prog)
    print(f"parse + create tables: {time.perf_counter() - started:.3f}s")

    started = time.perf_counter()
    if args.arrow:
        import pyarrow as pa

        xs, ys = zip(*edges, strict=True)
        loaded = db.load("edge", pa.table({"x": list(xs), "y": list(ys)}))
    else:
        loaded = db.load("edge", edges)
    db.load("source", sources)
    print(f"load: {loaded:,} distinct edges in {time.perf_counter() - started:.2f}s")

    stats = db.evaluate()
    print(f"evaluate: {stats.seconds:.2f}s over {stats.rounds} rounds")
    for stratum in stats.strata:
        kind = "recursive" if stratum.recursive else "plain"
        print(
            f"  stratum {stratum.index} {stratum.relations} ({kind}): "
            f"{stratum.iterations} iteration(s), {stratum.seconds:.2f}s, {stratum.new_tuples}"
        )
    for name, count in stats.counts.items():
        print(f"  {name:12} {count:>10,}")
    print("maxdeg", db.rows("maxdeg"), "total_out", db.rows("total_out"))


if __name__ == "__main__":
    main()
