"""Hostile input in the assessed tree never crashes the run and never vanishes.

Each case is a small tree holding a bad file (or folder, or `[tool.cpq]` glob) among good
files, assessed through the command line: exit 0, no traceback, the bad file listed as
skipped with a one-line reason, the good files assessed, and all within a time limit.
A bad glob in the configuration is instead a one-line `cpq: ...` error with exit 2.
(`test_robustness.py` holds the larger hostile tree; these are the cases it did not catch.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpq.config import Config

GOOD = "import numpy as np\nx = np.ones(3)\n"
LONG_SUM = "import numpy as np\nx = (np.sum(1)\n" + "+ 1\n" * 100_000 + ")\n"  # a left-deep tree
ONE_LINE_SUM = "x = " + "+".join(["1"] * 100_000) + "\n"


def cpq(*args: object, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m cpq ARGS` from `cwd` (outside the assessed tree), PYTHONPATH inherited."""
    return subprocess.run(
        [sys.executable, "-m", "cpq", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
        timeout=timeout,
    )


def assess_json(root: Path, timeout: float = 120) -> dict:
    """The JSON report of assessing `root`, after checking the run ended well."""
    proc = cpq("assess", root, "--format", "json", "--no-cache", cwd=root.parent, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def skip_reasons(report: dict) -> dict[str, str]:
    reasons = {s["file"]: s["reason"] for s in report["files"]["skipped"]}
    for file, reason in reasons.items():
        assert reason.strip() and "\n" not in reason and "Traceback" not in reason, (file, reason)
    return reasons


def write(root: Path, rel: str, data: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return path


def notebook(*cells: object, **top: object) -> str:
    """A notebook's JSON; a cell given as a string is a code cell with that source."""
    body = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [{"cell_type": "code", "source": c} if isinstance(c, str) else c for c in cells],
    }
    return json.dumps({**body, **top})


# -- [tool.cpq] globs ------------------------------------------------------------------------------

REPEATED_STARS = "**/" * 20 + "x.py"  # the regex translation backtracked exponentially on it


def test_repeated_double_stars_match_a_deep_tree_in_linear_time(tmp_path: Path) -> None:
    root = tmp_path / "project"
    deep = "/".join(["d"] * 16)
    write(root, f"{deep}/x.py", GOOD)
    write(root, f"{deep}/y.py", GOOD)
    write(root, "x.py", GOOD)
    write(root, "pyproject.toml", f'[tool.cpq]\nexclude = ["{REPEATED_STARS}", "{"*a" * 30}b"]\n')
    started = time.perf_counter()
    report = assess_json(root, timeout=60)
    assert time.perf_counter() - started < 30
    assert skip_reasons(report) == {
        f"{deep}/x.py": "excluded by configuration",
        "x.py": "excluded by configuration",
    }
    assert report["files"]["assessed"] == 1
    # Every folder on the way down, and a long name against many stars: well under a second.
    config = Config(exclude=[REPEATED_STARS, "*a" * 30 + "b", "a/**/b/**/c/**/" * 5 + "z"])
    started = time.perf_counter()
    for depth in range(1, 200):
        assert not config.is_excluded("d/" * depth)
    assert not config.is_excluded("a" * 5000 + ".py")
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ('exclude = ["[z-a].py"]', "reversed range"),
        ('extend-exclude = ["src/[abc"]', "unterminated character class"),
        ('per-file-ignores = { "[b-a]/*.py" = ["R104"] }', "reversed range"),
    ],
)
def test_malformed_glob_class_is_a_one_line_error(tmp_path: Path, table: str, needle: str) -> None:
    root = tmp_path / "project"
    write(root, "a.py", GOOD)
    write(root, "pyproject.toml", f"[tool.cpq]\n{table}\n")
    proc = cpq("assess", root, "--no-cache", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("cpq: "), proc.stderr
    assert "pyproject.toml" in lines[0] and needle in lines[0], lines[0]
