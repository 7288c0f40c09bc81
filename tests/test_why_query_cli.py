"""`cpq why` and `cpq query` on the command line: the cache options they share with `assess`,
notebook locations, suppressed and disabled findings, and the query options (--limit, --sort,
--relations PATTERN, --timeout, one-line errors and warnings)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import write_notebook
from typer.testing import CliRunner

from cpq.cli.app import app

runner = CliRunner()

SYNC = textwrap.dedent(
    """\
    import numpy as np


    def descend(A, b, lr, iters):
        x = np.zeros(A.shape[1])
        for _ in range(iters):
            r = A @ x - b
            if np.linalg.norm(r).item() < 1e-8:
                break
            x -= lr * (A.T @ r)
        return x
    """
)
SYNC_LINE = 8  # the `.item()` in the loop: R104


def _tree(tmp_path: Path, source: str = SYNC, pyproject: str = "") -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "solver.py").write_text(source)
    if pyproject:
        (root / "pyproject.toml").write_text(pyproject)
    return root


def _invoke(args: list[str]):  # type: ignore[no-untyped-def]
    return runner.invoke(app, args)


# -- --cache-dir and --no-cache ------------------------------------------------------------------


def test_why_and_query_reuse_the_results_assess_saved_in_cache_dir(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    cache = tmp_path / "cache"
    assess = _invoke(["assess", str(root), "--cache-dir", str(cache)])
    assert assess.exit_code == 0, assess.output
    plain = _invoke(["why", "R104", f"solver.py:{SYNC_LINE}", str(root), "--no-cache"])
    assert plain.exit_code == 0, plain.output

    why = _invoke(["-v", "why", "R104", f"solver.py:{SYNC_LINE}", str(root), "--cache-dir", str(cache)])
    assert why.exit_code == 0, why.output
    assert "(saved results reused)" in why.stderr
    assert why.stdout == plain.stdout

    query = _invoke(["-v", "query", 'finding(C, F, L, _), C = "R104"', str(root), "--cache-dir", str(cache)])
    assert query.exit_code == 0, query.output
    assert "(saved results reused)" in query.stderr
    assert f"solver.py  {SYNC_LINE}" in query.stdout
    assert not (root / ".cpq").exists()


def test_no_cache_writes_nothing_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    user_cache = tmp_path / "user-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "user-state"))
    why = _invoke(["-v", "why", "R104", f"solver.py:{SYNC_LINE}", str(root), "--no-cache"])
    assert why.exit_code == 0, why.output
    assert "(evaluated)" in why.stderr
    query = _invoke(["query", "finding(C, F, L, _)", str(root), "--no-cache"])
    assert query.exit_code == 0, query.output
    assert sorted(p.name for p in root.iterdir()) == ["solver.py"]
    assert not user_cache.exists()


# -- why: notebook locations, suppressed and disabled findings ---------------------------------


def _notebook(root: Path) -> None:
    code = ["import numpy as np\n", "A = np.ones((64, 64))\n"]
    loop = ["total = []\n", "for i in range(100):\n", "    v = A @ A\n", "    total.append(v.sum().item())\n"]
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# A notebook\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [], "source": code},
        {"cell_type": "code", "metadata": {}, "execution_count": 2, "outputs": [], "source": loop},
    ]
    write_notebook(root / "analysis.ipynb", cells)


def test_why_accepts_a_notebook_location_as_reported(tmp_path: Path) -> None:
    root = tmp_path / "nb"
    root.mkdir()
    _notebook(root)
    report = json.loads(_invoke(["assess", str(root), "-f", "json", "--no-cache"]).stdout)
    (where,) = [f["location"] for f in report["findings"] if f["code"] == "R104"]
    assert where == "analysis.ipynb:cell 3:line 4"
    why = _invoke(["why", "R104", where, str(root), "--no-cache"])
    assert why.exit_code == 0, why.output
    assert why.stdout.startswith("R104 at analysis.ipynb:cell 3:line 4: host materialization")
    assert "v.sum().item()  — converts an array to a host value" in why.stdout
    why_not = _invoke(["why", "not", "R101", where, str(root), "--no-cache"])
    assert why_not.exit_code == 0, why_not.output
    # Where the reports put it, the nodes by their code and column, no internal ids.
    assert why_not.stdout.startswith("no R101 finding at analysis.ipynb:cell 3:line 4\n")
    assert "`v.sum().item()` (call, column 18)" in why_not.stdout
    assert re.search(r"\bn\d+", why_not.stdout) is None, why_not.stdout

    missing = _invoke(["why", "R104", "analysis.ipynb:cell 3:line 9", str(root), "--no-cache"])
    assert missing.exit_code == 2
    assert missing.stderr == "cpq: cell 3 of analysis.ipynb has 4 lines; there is no line 9\n"
    no_cell = _invoke(["why", "R104", "analysis.ipynb:cell 1:line 1", str(root), "--no-cache"])
    assert no_cell.stderr == "cpq: analysis.ipynb has no code cell 1; its code cells are 2, 3\n"


def test_why_says_a_finding_is_suppressed(tmp_path: Path) -> None:
    source = SYNC.replace("< 1e-8:", "< 1e-8:  # cpq: ignore[R104] -- reviewed: converges in 3")
    root = _tree(tmp_path, source)
    why = _invoke(["why", "R104", f"solver.py:{SYNC_LINE}", str(root), "--no-cache"])
    assert why.exit_code == 0, why.output
    first, *rest = why.stdout.splitlines()
    assert first == (
        f"R104 at solver.py:{SYNC_LINE} is suppressed by `# cpq: ignore[R104]` (reviewed: converges in 3): "
        "it is left out of the report (--show-suppressed lists it) and of the verdict."
    )
    assert rest and rest[0].startswith("R104 at solver.py:8 in descend: host materialization")
    data = json.loads(_invoke(["why", "R104", f"solver.py:{SYNC_LINE}", str(root), "-f", "json"]).stdout)
    assert data["note"] == first


def test_why_says_a_code_is_turned_off_by_the_configuration(tmp_path: Path) -> None:
    root = _tree(tmp_path, pyproject='[tool.cpq]\nignore = ["R104"]\n')
    why = _invoke(["why", "R104", f"solver.py:{SYNC_LINE}", str(root), "--no-cache"])
    assert why.exit_code == 2
    assert why.stderr == (
        "cpq: R104 is turned off for solver.py by the select/ignore of [tool.cpq] (pyproject.toml): "
        "no finding of it is derived there\n"
    )


# -- query options -------------------------------------------------------------------------------


def test_query_limit_and_sort(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    every = _invoke(["query", "finding(C, F, L, _)", str(root), "--no-cache", "-f", "csv"])
    rows = every.stdout.splitlines()[1:]
    assert len(rows) >= 3 and rows == sorted(rows)  # a stable order: all columns

    cut = _invoke(["query", "finding(C, F, L, _)", str(root), "--no-cache", "--limit", "2"])
    assert cut.exit_code == 0, cut.output
    lines = cut.stdout.splitlines()
    assert len(lines) == 2 + 2 + 1  # header, rule, two rows, the note
    assert lines[-1] == f"… {len(rows) - 2} more rows (--limit 2)"
    assert f"cpq: {len(rows)} rows" in cut.stderr

    by_line = _invoke(
        ["query", "finding(C, F, L, _)", str(root), "--no-cache", "--sort", "-L,C", "-f", "csv"]
    )
    lines_desc = [int(row.split(",")[2]) for row in by_line.stdout.splitlines()[1:]]
    assert lines_desc == sorted(lines_desc, reverse=True)
    by_position = _invoke(
        ["query", "finding(C, F, L, _)", str(root), "--no-cache", "--sort", "3", "-f", "csv"]
    )
    assert [int(row.split(",")[2]) for row in by_position.stdout.splitlines()[1:]] == sorted(lines_desc)

    bad = _invoke(["query", "finding(C, F, L, _)", str(root), "--no-cache", "--sort", "X"])
    assert bad.exit_code == 2
    assert bad.stderr == "cpq: --sort: no column 'X'; the columns are C, F, L\n"


def test_query_relations_pattern_filters_the_listing() -> None:
    some = _invoke(["query", "--relations", "suppress", "-f", "csv"])
    assert some.exit_code == 0, some.output
    assert [line.split(",")[0] for line in some.stdout.splitlines()[1:]] == ["suppressed"]
    glob = _invoke(["query", "--relations", "finding*", "-f", "csv"])
    names = [line.split(",")[0] for line in glob.stdout.splitlines()[1:]]
    assert "finding" in names and all(name.startswith("finding") for name in names)
    none = _invoke(["query", "--relations", "no_such_thing"])
    assert none.exit_code == 2 and none.stderr == "cpq: no relation matches 'no_such_thing'\n"


def test_query_integer_beyond_int64_is_one_line(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    out = _invoke(["query", "finding(C, F, L, _), L = 99999999999999999999", str(root), "--no-cache"])
    assert out.exit_code == 2
    assert out.stderr == "cpq: the integer 99999999999999999999 is beyond the range of a number (64 bits)\n"


def test_a_duckdb_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import duckdb
    import typer

    from cpq.cli.explain_cmds import _run_query

    con = duckdb.connect()
    with pytest.raises(typer.Exit) as exit:
        _run_query(con, "SELECT CAST(99999999999999999999 AS BIGINT)", None, None)
    assert exit.value.exit_code == 2
    err = capsys.readouterr().err
    assert err.startswith("cpq: the query failed in DuckDB: Conversion Error") and err.count("\n") == 1


# Billions of rows: a four-way cross product of some 200 locations.
CROSS = "loc(A, _, _, _), loc(B, _, _, _), loc(C, _, _, _), loc(D, _, _, _), A != B"


def test_query_timeout_stops_a_long_query(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    started = time.monotonic()
    out = _invoke(["query", CROSS, str(root), "--no-cache", "--timeout", "0.5"])
    assert out.exit_code == 124
    assert out.stderr == "cpq: the query ran past --timeout 0.5s and was stopped\n"
    assert time.monotonic() - started < 60


def test_query_warns_about_code_like_variables_and_likely_typos(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    code = _invoke(["-q", "query", "finding(C, F, L, _), C = R104", str(root), "--no-cache"])
    assert code.exit_code == 0
    assert code.stderr == (
        'cpq: warning: query:1:26: R104 is a variable here (it matches anything); write "R104" for the code\n'
    )
    typo = _invoke(
        ["-q", "query", "finding(Code, F, L, _), code_info(Cod, K, _, _), Code = K", str(root), "--no-cache"]
    )
    assert typo.stderr == (
        "cpq: warning: query:1:35: variable 'Cod' is used only once (did you mean 'Code'?); "
        "write _ for a column you do not need\n"
    )
    plain = _invoke(["-q", "query", 'finding(C, F, L, Fn), C = "R104"', str(root), "--no-cache"])
    assert plain.stderr == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals as on Linux")
def test_ctrl_c_during_a_query_is_one_line_and_130(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    cache = tmp_path / "cache"
    # Assessed in a process of its own as well: the seal key this test process holds may be an
    # earlier test's (the key is read once per process), and the query's process reads its own.
    assess = [sys.executable, "-m", "cpq", "assess", str(root), "--cache-dir", str(cache)]
    assert subprocess.run(assess, capture_output=True, env=dict(os.environ), timeout=120).returncode == 0
    command = [sys.executable, "-m", "cpq", "query", CROSS, str(root), "--cache-dir", str(cache)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    time.sleep(4)  # the assessment is reused in well under that: the query is running
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert err.decode() == "cpq: interrupted\n"
