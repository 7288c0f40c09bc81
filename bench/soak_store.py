"""Soak the store's promise: a run with the store answers what a run without it answers.

    python bench/soak_store.py [--sequences 300] [--steps 10] [--seed N] [--ids exact|canonical]
                               [--shrink]

Runs the state machine of tests/test_store_property.py (random trees, random edits, each step's
`cpq assess` with the store against `--no-cache`, `cpq why`/`cpq query` against a fresh copy)
for many sequences, then prints what it did: sequences and steps run, runs compared,
sequences with a mismatch, the way the store served each cached `cpq assess` (from `cpq -v`)
with the mismatches of each way, and the time taken. Exit status 1 on any mismatch.

By default every mismatch is recorded and the soak goes on with the next sequence's steps; a
sequence counts once, at its first mismatch (later ones mostly repeat it: wrong saved results
are reused or their facts copied), and the later ones are counted apart. The first mismatch is
printed in full (steps, a shell script that replays them, the difference), with one line for
each other kind. `--shrink` stops at the first mismatch instead and lets
Hypothesis shrink it to a minimal sequence. `--ids canonical` compares node ids in `why` and
`query` answers as (file, offset) rather than as numbers (see the test's docstring).

cpq must be importable (installed, or PYTHONPATH naming the folder that holds the package).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=300, help="random sequences of edits (default 300)")
    parser.add_argument("--steps", type=int, default=10, help="steps per sequence at most (default 10)")
    parser.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default: random, printed)")
    parser.add_argument(
        "--ids",
        choices=["exact", "canonical"],
        default="exact",
        help="compare node ids in why/query answers exactly (default) or as file+offset",
    )
    parser.add_argument(
        "--shrink", action="store_true", help="stop at the first mismatch and shrink it to a minimal sequence"
    )
    return parser.parse_args()


def main() -> int:
    args = _arguments()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    os.environ["CPQ_PROPERTY_IDS"] = args.ids
    if not args.shrink:
        os.environ["CPQ_PROPERTY_RECORD"] = "1"
    sys.path.insert(0, str(REPO / "tests"))
    try:
        import test_store_property as prop
    except ImportError as exc:
        print(f"soak_store: cannot import cpq or the test ({exc}); set PYTHONPATH", file=sys.stderr)
        return 2
    from hypothesis import Phase
    from hypothesis import seed as with_seed

    phases = [Phase.generate, Phase.shrink] if args.shrink else [Phase.generate]
    print(
        f"soak: {args.sequences} sequences of at most {args.steps} steps, seed {seed}, ids {args.ids}",
        flush=True,
    )
    started = time.perf_counter()
    failure = ""
    try:
        prop.run_state_machine_as_test(
            with_seed(seed)(prop.StoreMachine),
            settings=prop.machine_settings(args.sequences, args.steps, database=None, phases=phases),
        )
    except AssertionError as exc:
        failure = str(exc)
    except KeyboardInterrupt:
        print("interrupted: the figures so far", file=sys.stderr)
    elapsed = time.perf_counter() - started
    stats = prop.STATS
    print()
    print(f"sequences run:        {stats['sequences']}")
    print(f"steps run:            {stats['steps']}")
    print(
        f"runs compared:        {stats['compared']} "
        f"(why {stats['compared: why']}, query {stats['compared: query']}, "
        f"assess {stats['compared'] - stats['compared: why'] - stats['compared: query']})"
    )
    print(
        f"mismatches:           {stats['mismatches']} sequences with one "
        f"(why {stats['mismatch: why']}, query {stats['mismatch: query']}, the rest assess); "
        f"{stats['later mismatches in a sequence']} more after them"
    )
    print("cached `cpq assess` runs, by the way the store served them (first mismatches):")
    for key, count in sorted(stats.items()):
        if key.startswith("path: "):
            path = key.removeprefix("path: ")
            print(f"  {count:6}  {path} ({stats['mismatch: ' + path]})")
    print(f"total time:           {elapsed:.1f} s ({elapsed / max(stats['steps'], 1):.2f} s a step)")
    print(f"seed:                 {seed}")
    if failure:
        print("\nthe first mismatch, shrunk:\n" + failure)
        return 1
    if prop.MISMATCHES:
        print("\nthe first mismatch:\n" + prop.MISMATCHES[0]["message"])
        kinds = Counter(m["kind"] for m in prop.MISMATCHES)
        print("\nsequences with a mismatch, by the run that found it:")
        for kind, count in kinds.most_common():
            print(f"  {count:6}  {kind}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
