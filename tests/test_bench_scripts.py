"""The profiling script of bench/ still runs against the pipeline it measures (it calls cpq's
assessment and evaluation directly, so a change there must not leave it broken)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import EXAMPLES

REPO = Path(__file__).resolve().parents[1]


def test_where_time_goes_prints_every_phase_the_longest_strata_and_statements(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("wave_equation.py", "cfl_scalars.py", "closure_helper.py"):
        (tree / name).write_text((EXAMPLES / name).read_text())
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "where_time_goes.py"),
            str(tree),
            *("--evaluations", "1", "--statements"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "cold assessment of" in out and "3 files" in out
    for phase in (
        "discovering files",
        "evaluating rules",
        "reading results",
        "waiting for the save",
        "in all",
    ):
        assert phase in out, phase
    assert "1 evaluation, one stratum at a time" in out
    assert "scalar_expr, scalar_binding" in out  # a stratum line, with its relations
    assert "1 evaluation, one statement at a time:" in out
    relation_line = r"^ *[0-9.]+s +[0-9]+ +[0-9]+ +[0-9.]+s  [a-z_]+$"  # time, statements, small ones
    assert re.search(relation_line, out, re.MULTILINE)
    assert not (tree / ".cpq").exists()  # the tree's own store is left alone
