"""Hostile input in the assessed tree never crashes the run and never vanishes.

Each case is a small tree holding a bad file (or folder, or `[tool.cpq]` glob) among good
files, assessed through the command line: exit 0, no traceback, the bad file listed as
skipped with a one-line reason, the good files assessed, and all within a time limit.
A bad `[tool.cpq]` (a malformed glob, TOML that Python cannot hold) is instead a one-line
`cpq: ...` error with exit 2.
(`test_robustness.py` holds the larger hostile tree; these are the cases it did not catch.)
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpq.config.project import Config
from cpq.facts.notebook import notebook_to_source
from cpq.pipeline.assessment import assess

GOOD = "import numpy as np\nx = np.ones(3)\n"
LONG_SUM = "import numpy as np\nx = (np.sum(1)\n" + "+ 1\n" * 100_000 + ")\n"  # a left-deep tree
ONE_LINE_SUM = "x = " + "+".join(["1"] * 100_000) + "\n"
DEEP_UNARY = "import numpy as np\nx = (" + "-\n" * 100_000 + "np.sum(1))\n"


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


# -- notebooks -------------------------------------------------------------------------------------

# file -> (content, pattern the skip reason must hold)
HOSTILE_NOTEBOOKS: dict[str, tuple[str, str]] = {
    # json.loads recurses once per bracket: RecursionError.
    "deep_json.ipynb": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    # Python converts integers of at most 4,300 digits from text: ValueError.
    "huge_nbformat.ipynb": ('{"nbformat": ' + "9" * 5000 + ', "cells": []}', "integer string conversion"),
    # A JSON escape of half a surrogate pair decodes to a string that cannot be encoded.
    "lone_surrogate.ipynb": (
        '{"nbformat": 4, "cells": [{"cell_type": "code", "source": "x = \\"\\ud800\\""}]}',
        "cell 1: .*surrogate",
    ),
    # 100,000 terms on one line: Python's parser recurses, and the line is beyond the limit.
    "one_line_sum.ipynb": (notebook(ONE_LINE_SUM), "a line of 200,003 characters"),
    "worksheet_cells_not_a_list.ipynb": ('{"nbformat": 3, "worksheets": [{"cells": 5}]}', "not a list"),
    "language_not_text.ipynb": (
        notebook("x = 1", metadata={"kernelspec": {"language": "\ud800\nR" * 50}}),
        r"not a Python notebook \(kernel language: '",
    ),
}


@pytest.fixture(scope="module")
def notebook_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, float]:
    root = tmp_path_factory.mktemp("notebooks") / "tree"
    write(root, "good.py", GOOD)
    write(root, "good.ipynb", notebook(GOOD))
    for name, (content, _) in HOSTILE_NOTEBOOKS.items():
        write(root, name, content)
    write(root, "one_line_sum.py", ONE_LINE_SUM)
    # A deep expression over many lines: the extractor caps its depth, as in a .py file.
    write(root, "long_sum.py", LONG_SUM)
    write(root, "long_sum.ipynb", notebook(LONG_SUM))
    # Python's parser overflows its stack on it (MemoryError); the extractor copes.
    write(root, "deep_unary.py", DEEP_UNARY)
    write(root, "deep_unary.ipynb", notebook(DEEP_UNARY))
    # 20,000 shell escapes in one cell took quadratic time (minutes).
    write(root, "many_magics.ipynb", notebook("!echo\n" * 20_000, GOOD))
    started = time.perf_counter()
    report = assess_json(root)
    return report, time.perf_counter() - started


@pytest.mark.parametrize("name", sorted(HOSTILE_NOTEBOOKS))
def test_hostile_notebook_is_skipped_with_its_reason(notebook_run, name: str) -> None:
    report, _ = notebook_run
    reasons = skip_reasons(report)
    assert name in reasons, sorted(reasons)
    assert re.search(HOSTILE_NOTEBOOKS[name][1], reasons[name]), reasons[name]


def test_hostile_notebooks_leave_the_rest_assessed_in_time(notebook_run) -> None:
    report, seconds = notebook_run
    reasons = skip_reasons(report)
    assert set(reasons) == {*HOSTILE_NOTEBOOKS, "one_line_sum.py"}, reasons
    # good, long_sum and deep_unary as .py and .ipynb, and many_magics.ipynb
    assert report["files"]["assessed"] == 7
    assert set(report["files"]["notebooks"]) == {
        "good.ipynb",
        "long_sum.ipynb",
        "deep_unary.ipynb",
        "many_magics.ipynb",
    }
    assert seconds < 60, f"{seconds:.1f}s"


def test_notebook_cells_get_the_line_length_limit_of_py_files(notebook_run) -> None:
    reasons = skip_reasons(notebook_run[0])
    assert reasons["one_line_sum.ipynb"] == reasons["one_line_sum.py"]


def test_notebook_lines_break_where_python_breaks_them() -> None:
    # str.splitlines also breaks at \x0c, \x1c, \u2028...: a string literal was cut in two
    # (the cell then blanked as broken) and every later line of the cell moved.
    nb = notebook_to_source(notebook("s = '\u2028'\x0c\nt = 1\r\nu = 2"))
    assert nb.skipped_cells == []
    assert nb.text == "s = '\u2028'\x0c\nt = 1\nu = 2\n"
    assert nb.location(3) == (1, 3)


def test_magics_inside_strings_and_brackets_stay_python() -> None:
    cell = 's = """\n%s\n"""\nx = (1\n%2)\ny = \'\\\n!a\'\n!ls\nz = f(")" + \'(\')  # (\n%time f(x)'
    nb = notebook_to_source(notebook(cell))
    assert nb.skipped_cells == []
    assert nb.text.splitlines() == [
        's = """',
        "%s",
        '"""',
        "x = (1",
        "%2)",
        "y = '\\",
        "!a'",
        "pass",
        "z = f(\")\" + '(')  # (",
        "f(x)",
    ]


# -- .py files -------------------------------------------------------------------------------------


def test_codec_that_fails_without_a_position_is_skipped(tmp_path: Path) -> None:
    # The `undefined` codec raises a bare UnicodeError (not UnicodeDecodeError) on any input.
    root = tmp_path / "tree"
    write(root, "undefined.py", "# coding: undefined\nx = 1\n")
    write(root, "ok.py", GOOD)
    report = assess_json(root)
    assert report["files"]["assessed"] == 1
    assert re.search("not valid undefined text", skip_reasons(report)["undefined.py"])


def test_lines_that_look_like_imports_are_scanned_in_linear_time(tmp_path: Path) -> None:
    # Lines holding "import" are matched against an import regex that backtracked
    # quadratically on runs of dots or blanks: some 7 seconds per line of 19,000.
    root = tmp_path / "tree"
    dots = "from " + "." * 19_000 + "!import\n"
    blanks = "from" + " " * 19_000 + "!import\n"
    write(root, "imports.py", "import numpy as np\n" + (dots + blanks) * 4)
    write(root, "ok.py", GOOD)
    started = time.perf_counter()
    report = assess_json(root, timeout=100)
    assert time.perf_counter() - started < 30
    assert report["files"]["assessed"] + len(skip_reasons(report)) == 2


# -- folders that cannot be entered or listed ------------------------------------------------------


def _permission_tree(root: Path) -> None:
    write(root, "ok.py", GOOD)
    write(root, "half/a.py", GOOD)  # "half" gets mode r--: listed, not entered
    write(root, "half/sub/b.py", GOOD)
    write(root, "shut/c.py", GOOD)  # "shut" gets mode ---: not even listed


def _check_permission_outcome(files: list[str], reasons: dict[str, str]) -> None:
    assert files == ["ok.py"], files
    assert set(reasons) == {"half/a.py", "half/sub/", "shut/"}, reasons
    assert re.search("unreadable.*permission denied", reasons["half/a.py"], re.I), reasons
    for folder in ("half/sub/", "shut/"):
        assert reasons[folder].startswith("unreadable folder"), reasons


def _deny_as_the_kernel_would(monkeypatch: pytest.MonkeyPatch, half: Path, shut: Path) -> None:
    """What the modes do for a user other than root: nothing inside `half` can be looked up
    (its names can be listed), and `shut` cannot be listed."""
    real_stat, real_lstat, real_scandir = os.stat, os.lstat, os.scandir

    def inside(path: object, folder: Path) -> bool:
        return isinstance(path, str | os.PathLike) and Path(os.fspath(path)).is_relative_to(folder)

    def denied(path: object) -> PermissionError:
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))  # type: ignore[arg-type]

    def stat(path, *args, **kwargs):
        if inside(path, half) and Path(os.fspath(path)) != half:
            raise denied(path)
        return real_stat(path, *args, **kwargs)

    def lstat(path, *args, **kwargs):
        if inside(path, half) and Path(os.fspath(path)) != half:
            raise denied(path)
        return real_lstat(path, *args, **kwargs)

    def scandir(path="."):
        if inside(path, shut) or (inside(path, half) and Path(os.fspath(path)) != half):
            raise denied(path)
        return real_scandir(path)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "scandir", scandir)


def test_folders_that_cannot_be_entered_or_listed_are_skipped(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "tree"
    _permission_tree(root)
    half, shut = root / "half", root / "shut"
    if os.geteuid() == 0:
        # Root reads through any mode (as in CI containers): the denials are simulated, in process.
        _deny_as_the_kernel_would(monkeypatch, half, shut)
        result = assess(root)
        monkeypatch.undo()
        _check_permission_outcome(sorted(result.files), {s.relpath: s.reason for s in result.skipped})
        return
    half.chmod(0o644)
    shut.chmod(0)
    try:
        report = assess_json(root)
    finally:
        half.chmod(0o755)
        shut.chmod(0o755)
    reasons = skip_reasons(report)
    assert report["files"]["assessed"] == 1
    _check_permission_outcome(["ok.py"], reasons)


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
        # tomllib recurses per nested array or inline table, and converts integers with int().
        ("exclude = " + "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("x = " + "{a=" * 50_000 + "1" + "}" * 50_000, "nested too deeply"),
        ("gpus = " + "9" * 5000, "integer string conversion"),
    ],
    ids=["reversed", "unterminated", "per-file", "deep-array", "deep-table", "long-integer"],
)
def test_malformed_tool_cpq_is_a_one_line_error(tmp_path: Path, table: str, needle: str) -> None:
    root = tmp_path / "project"
    write(root, "a.py", GOOD)
    write(root, "pyproject.toml", f"[tool.cpq]\n{table}\n")
    proc = cpq("assess", root, "--no-cache", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("cpq: "), proc.stderr
    assert "pyproject.toml" in lines[0] and needle in lines[0], lines[0]
