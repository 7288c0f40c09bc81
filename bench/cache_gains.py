"""What each way of reusing earlier work saves: every cache strategy of cpq against the way a
run would go without it, on a real tree, in fresh processes.

    python bench/cache_gains.py [--tree DIR] [--repeat N] [--small FILE]

The tree defaults to the NumPy sources that `bench/run_bench.py` builds (`.bench/trees/numpy`);
it is copied to a scratch folder first, and the user cache and the cache key live in scratch
folders too (nothing of the user's is touched).  Each line times one way a run can go, median of
N runs, and the gain of a strategy is the time of the way it replaces minus its own:

| strategy | its run | the run it replaces |
| --- | --- | --- |
| saved results | nothing changed | the same, saved results deleted (facts from the fact store) |
| update | one file edited (a comment; an assignment) | the same edit, saved results deleted |
| fact store | saved results deleted | the store deleted too (every file parsed) |
| parsed-program cache | one small file, `--no-cache` | the same, the user cache emptied first |
| tables template | a small tree's new results file: the template copied and checked | its ~200 tables made |

The parsed-program cache's second column includes writing the entry again (as a first run
does); the template's is timed in this process (a new database file, 10 times each way).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TREE = REPO / ".bench" / "trees" / "numpy"
SMALL_FILE = REPO / "tests" / "examples" / "sync_in_loop.py"


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("cpq: ") and " files, " in ln]
    return seconds, line[-1].split("(", 1)[-1].split(")", 1)[0] if line else ""


def median_of(
    repeat: int, prepare: Callable[[], None], cmd: list[str], env: dict[str, str]
) -> tuple[float, str]:
    times = []
    how = ""
    for _ in range(repeat):
        prepare()
        seconds, how = timed(cmd, env)
        times.append(seconds)
    return statistics.median(times), how


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE)
    parser.add_argument("--small", type=Path, default=SMALL_FILE)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not args.tree.is_dir():
        raise SystemExit(f"{args.tree}: no such tree (run `python bench/run_bench.py --trees numpy` once)")
    scratch = Path(tempfile.mkdtemp(prefix="cpq-gains-"))
    try:
        return run(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(args: argparse.Namespace, scratch: Path) -> int:
    tree = scratch / "tree"
    shutil.copytree(args.tree, tree, ignore=shutil.ignore_patterns(".cpq"))
    env = dict(os.environ, XDG_CACHE_HOME=str(scratch / "cache"), XDG_STATE_HOME=str(scratch / "state"))
    cpq = [sys.executable, "-m", "cpq", "-v", "assess"]
    store = tree / ".cpq"
    report = ["--format", "json", "-o", str(scratch / "report.json")]
    edited = max(tree.rglob("*.py"), key=lambda p: p.stat().st_size if "tests" in p.parts else 0)
    original = edited.read_bytes()
    counter = iter(range(1_000_000))

    def nothing() -> None:
        pass

    def no_results() -> None:
        for saved in store.glob("results-*"):
            saved.unlink()

    def no_store() -> None:
        shutil.rmtree(store, ignore_errors=True)

    def comment() -> None:
        edited.write_bytes(original + f"\n# edit {next(counter)}\n".encode())

    def assignment() -> None:
        edited.write_bytes(original + f"\n_bench_edit = {next(counter)}\n".encode())

    def then(*steps: Callable[[], None]) -> Callable[[], None]:
        def both() -> None:
            for step in steps:
                step()

        return both

    subprocess.run([*cpq, str(tree), *report], env=env, capture_output=True, check=True)  # store warm
    rows: list[tuple[str, float, str]] = []

    def measure(label: str, prepare: Callable[[], None], extra: list[str] | None = None) -> float:
        # Each edit starts from saved results of the unedited tree (a run after restoring it).
        seconds, how = median_of(args.repeat, prepare, [*cpq, str(tree), *report, *(extra or [])], env)
        rows.append((label, seconds, how))
        return seconds

    def restore() -> None:
        edited.write_bytes(original)
        subprocess.run([*cpq, str(tree), *report], env=env, capture_output=True, check=True)

    warm = measure("nothing changed", nothing)
    from_store = measure("nothing changed, saved results deleted", no_results)
    restore()
    cold = measure("no store at all", no_store)
    restore()
    comment_update = measure("comment appended", then(restore, comment))
    comment_fresh = measure("comment appended, saved results deleted", then(restore, comment, no_results))
    code_update = measure("assignment appended", then(restore, assignment))
    code_fresh = measure("assignment appended, saved results deleted", then(restore, assignment, no_results))
    edited.write_bytes(original)

    small = scratch / "small"
    small.mkdir()
    shutil.copy(args.small, small / args.small.name)
    cache = scratch / "cache" / "cpq"

    def small_run(label: str, prepare: Callable[[], None], extra: list[str]) -> float:
        seconds, how = median_of(args.repeat, prepare, [*cpq, str(small), *report, *extra], env)
        rows.append((label, seconds, how))
        return seconds

    def no_programs() -> None:
        for entry in cache.glob("program-*"):
            entry.unlink()

    subprocess.run([*cpq, str(small), *report], env=env, capture_output=True, check=True)
    program_cached = small_run("small file --no-cache", nothing, ["--no-cache"])
    program_parsed = small_run("small file --no-cache, user cache emptied", no_programs, ["--no-cache"])
    template_copied, template_made = template_times(scratch, env)
    rows.append(("a small tree's new results file, from the template", template_copied, ""))
    rows.append(("a small tree's new results file, tables made", template_made, ""))

    print(
        f"tree: {args.tree} ({sum(1 for _ in tree.rglob('*.py'))} files); edited: {edited.relative_to(tree)}"
    )
    print(f"median of {args.repeat} runs each, in fresh processes\n")
    width = max(len(label) for label, _, _ in rows)
    for label, seconds, how in rows:
        print(f"  {label:<{width}}  {seconds:6.2f} s   {how}")
    print("\nstrategy gains (the run it replaces minus its own):")
    gains = [
        ("saved results", from_store - warm),
        ("update, comment edit", comment_fresh - comment_update),
        ("update, code edit", code_fresh - code_update),
        ("fact store", cold - from_store),
        ("parsed-program cache", program_parsed - program_cached),
        ("tables template", template_made - template_copied),
    ]
    for name, gain in gains:
        print(f"  {name:<40} {gain:+6.2f} s")
    return 0


def template_times(scratch: Path, env: dict[str, str]) -> tuple[float, float]:
    """Seconds to make a small tree's new results file by copying the (checked) template, and
    by making its tables, in a process of cpq's (median of 10 each)."""
    script = f"""
import os, statistics, time
from pathlib import Path
from cpq.pipeline.cache import keys, user_cache
from cpq.pipeline.cache.facade import SMALL_BLOCK_SIZE, _make_template
from cpq.rules.program import load_program
from cpq.engine import Database
import duckdb
program = load_program()
key = keys.template_key(program.text, duckdb.__version__, SMALL_BLOCK_SIZE)
_make_template(program, key)
copied, made = [], []
for i in range(10):
    target = Path({str(scratch)!r}) / f"t{{i}}.duckdb"
    started = time.perf_counter()
    assert user_cache.copy_template(key, target)
    Database.from_template(program, target).close()
    copied.append(time.perf_counter() - started)
    target = Path({str(scratch)!r}) / f"m{{i}}.duckdb"
    started = time.perf_counter()
    Database(program, target, block_size=SMALL_BLOCK_SIZE).close()
    made.append(time.perf_counter() - started)
print(statistics.median(copied), statistics.median(made))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    copied, made = map(float, done.stdout.split())
    return copied, made


if __name__ == "__main__":
    sys.exit(main())
