"""How long `cpq why` takes on a large tree once the assessment exists.

    python bench/why_bench.py [--lines 100000] [--source examples|numpy] [--dir DIR] [--repeat 5]
    python bench/why_bench.py --source tree --dir .bench/trees/numpy --cache-dir /tmp/cpq-why-cache

Builds (or reuses) a tree of about --lines lines — copies of tests/examples, one package per
copy (so module names differ and calls resolve within each copy), or the installed NumPy
sources cut to that size; `--source tree` takes the tree at --dir as it is (the one
run_bench.py downloads: the issue's "why on NumPy under 1 s" is measured there).  It assesses
it once (results saved in --cache-dir when given, else in the tree), then times, against
that one database:

* `why` in-process: proof of an R104 finding, of the verdict, and a `why not`;
* `why` through the CLI (`cpq -v why R104 ...`, `why verdict`, `why gate 1..6`, the summary
  each prints by default, in a subprocess), end to end: wall time (median of --repeat), the
  assessment reuse and the answer as stderr reports them, and the lines printed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cpq.config.context import Context
from cpq.explain import Prover, render_text
from cpq.explain.whynot import WhyNotAnalyzer
from cpq.pipeline.assessment import assess_cached

EXAMPLES = Path(__file__).resolve().parent.parent / "tests" / "examples"


def build_examples_tree(root: Path, lines: int) -> int:
    files = sorted(EXAMPLES.glob("*.py"))
    texts = {f.name: f.read_text(encoding="utf-8") for f in files}
    per_copy = sum(t.count("\n") for t in texts.values())
    copies = max(1, -(-lines // per_copy))
    for i in range(copies):
        pkg = root / f"pkg_{i:04d}"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text("")
        for name, text in texts.items():
            (pkg / name).write_text(text, encoding="utf-8")
    return copies * per_copy


def build_numpy_tree(root: Path, lines: int) -> int:
    import numpy

    total = 0
    src = Path(numpy.__file__).parent
    for path in sorted(src.rglob("*.py")):
        if total >= lines:
            break
        target = root / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        total += path.read_text(encoding="utf-8", errors="replace").count("\n")
    return total


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, list[float], object]:
    """(first run, later runs, result of the first run) in seconds."""
    started = time.perf_counter()
    result = fn()
    first = time.perf_counter() - started
    later = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        later.append(time.perf_counter() - started)
    return first, later, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--source", choices=["examples", "numpy", "tree"], default="examples")
    parser.add_argument("--cache-dir", type=Path, help="save the results here, not in the tree")
    parser.add_argument("--dir", type=Path, help="where to build the tree (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-cli", action="store_true", help="skip the subprocess runs")
    args = parser.parse_args()

    root = args.dir or Path(tempfile.mkdtemp(prefix="cpq-why-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if args.source == "tree":
        print(f"tree: {root} (as it is)")
    else:
        build = build_examples_tree if args.source == "examples" else build_numpy_tree
        total = build(root, args.lines)
        print(f"tree: {root} ({total:,} lines, {args.source}) built in {time.perf_counter() - started:.1f}s")

    started = time.perf_counter()
    result = assess_cached(root, Context(), cache_dir=args.cache_dir)
    assessed = time.perf_counter() - started
    db = result.db
    assert db is not None
    print(
        f"assessment: {len(result.files):,} files, {result.lines:,} lines, {result.fact_count:,} facts, "
        f"{len(result.findings):,} findings in {assessed:.1f}s"
    )

    findings = [f for f in result.findings if f.code == "R104"] or result.findings
    finding = findings[len(findings) // 2]
    target = db.con.execute(
        'SELECT "code", "file", "line", "func" FROM "finding" WHERE "code" = ? AND "file" = ? AND "line" = ?',
        [finding.code, finding.file, finding.line],
    ).fetchone()
    print(f"question: why {finding.code} {finding.file}:{finding.line}")

    def why_finding() -> str:
        prover = Prover(db, source_line=result.source_line)  # fresh: nothing memoised between runs
        return render_text(prover.prove("finding", target))

    def why_verdict() -> str:
        prover = Prover(db, source_line=result.source_line)
        return render_text([prover.prove("verdict", v) for v in db.rows("verdict")])

    def why_not() -> object:
        analyzer = WhyNotAnalyzer(db, source_line=result.source_line)
        return analyzer.finding("R110", finding.file, finding.line)

    for label, fn in (("why finding", why_finding), ("why verdict", why_verdict), ("why not", why_not)):
        first, later, out = timed(fn, args.repeat)
        size = f", {str(out).count(chr(10))} lines of output" if isinstance(out, str) else ""
        print(
            f"in-process {label}: first {first * 1000:.0f} ms, "
            f"median of {args.repeat} more {statistics.median(later) * 1000:.0f} ms{size}"
        )

    if args.no_cli:
        return
    cpq = [sys.executable, "-m", "cpq"]
    cache = ["--cache-dir", str(args.cache_dir)] if args.cache_dir else []
    questions = [
        ["why", finding.code, f"{finding.file}:{finding.line}"],
        ["why", "verdict"],
        *(["why", "gate", str(gate)] for gate in range(1, 7)),
    ]
    for question in questions:
        walls = []
        for _ in range(max(1, args.repeat)):
            started = time.perf_counter()
            proc = subprocess.run(
                [*cpq, "-v", *question, str(root), *cache],
                capture_output=True,
                text=True,
                env=os.environ.copy(),
                check=False,
            )
            walls.append(time.perf_counter() - started)
        ready = re.search(r"assessment ready in ([0-9.]+)s", proc.stderr)
        answered = re.search(r"answered in ([0-9.]+)s", proc.stderr)
        assessment = ready.group(1) if ready else "?"
        answer = answered.group(1) if answered else "?"
        print(
            f"CLI `cpq {' '.join(question)}`: exit {proc.returncode}, "
            f"wall median {statistics.median(walls):.2f}s max {max(walls):.2f}s of {len(walls)} "
            f"(assessment reused in {assessment}s, answer {answer}s), "
            f"{proc.stdout.count(chr(10))} lines"
        )


if __name__ == "__main__":
    main()
