"""The command line at its edges, as a user meets them: every option checked, odd PATHs refused,
several PATHs, outputs checked before the analysis, nothing to assess, global options after the
command, no colour, .gitignore, Python 2 files, broken notebook cells, suppressed findings and
Python 3.13 syntax the parser does not know.

Each test runs the command (in-process through typer's runner, or as a process where the exit
status, the streams or a file descriptor matter) and checks what it prints and its exit status.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import EXAMPLES, SYNC_LOOP, write_notebook
from typer.testing import CliRunner, Result

import cpq
from cpq.cli.app import NOTHING_TO_ASSESS, app
from cpq.cli.options import MAX_JOBS, usable_cpus
from cpq.config.context import KNOWN_PATTERNS
from cpq.pipeline.run import discover

PACKAGE = Path(cpq.__file__).resolve().parent
# The README is not installed with the package; the tests run from a checkout.
REPOSITORY = Path(__file__).resolve().parent.parent
HOT_LOOP = """\
import numpy as np


def push(n, dt):
    pos = np.zeros(n)
    vel = np.ones(n)
    for p in range(n):
        pos[p] = pos[p] + vel[p] * dt
    return pos
"""


def invoke(*args: object, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def run_cpq(
    *args: object,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    """`python -m cpq ARGS` as a process, NO_COLOR unset unless `env` sets it."""
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full_env.update({"PYTHONIOENCODING": "utf-8", "COLUMNS": "200", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "cpq", *map(str, args)],
        cwd=cwd,
        env=full_env,
        stdout=stdout,
        stderr=stderr,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def one_line_error(result: Result | subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """The exit status `code`, no traceback, one line `cpq: ...` on stderr holding `needles`."""
    status = result.exit_code if isinstance(result, Result) else result.returncode
    if isinstance(result, Result) and result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert status == code, f"exit {status}, wanted {code}: {result.stderr}"
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"not one line:\n{result.stderr}"
    assert lines[0].startswith("cpq: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def report(result: Result, code: int = 0) -> dict:
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def write(root: Path, rel: str, text: str = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture()
def small(tmp_path: Path) -> Path:
    root = tmp_path / "small"
    write(root, "loop.py", HOT_LOOP)
    return root


# -- every option checked ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "chosen"),
    [("Sequential", "sequential"), ("DENSE_LINALG", "dense-linalg"), ("monte carlo", "monte-carlo")],
)
def test_pattern_is_taken_in_any_case(small: Path, given: str, chosen: str) -> None:
    out = report(invoke("assess", small, "--pattern", given, "--format", "json", "--no-cache"))
    assert out["pattern"] == chosen
    gate4 = next(g for g in out["gates"] if g["gate"] == 4)
    assert gate4["reason"]  # judged as the pattern given, with its words


def test_pattern_near_miss_is_answered_with_the_pattern_meant(small: Path) -> None:
    line = one_line_error(invoke("assess", small, "--pattern", "sequental", "--no-cache"), 2, "--pattern")
    assert "did you mean 'sequential'?" in line


def test_unknown_pattern_is_refused_with_the_known_ones(small: Path) -> None:
    line = one_line_error(invoke("assess", small, "--pattern", "nonsense", "--no-cache"), 2, "'nonsense'")
    assert "did you mean" not in line
    assert all(p in line for p in KNOWN_PATTERNS)
    one_line_error(invoke("why", "verdict", small, "--pattern", "nonsense"), 2, "--pattern")


def test_pattern_in_pyproject_is_checked_too(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write(root, "pyproject.toml", '[tool.cpq]\npattern = "stencl"\n')
    write(root, "a.py", HOT_LOOP)
    one_line_error(
        invoke("assess", root, "--no-cache"), 2, "pyproject.toml", "pattern", "did you mean 'stencil'?"
    )


def test_known_patterns_are_the_patterns_the_rules_rank() -> None:
    rules = (PACKAGE / "rules" / "pattern.dl").read_text()
    ranked = set(re.findall(r'^pattern_rank\("([\w-]+)", \d+\)\.', rules, re.M))
    judged = set(re.findall(r'compute_pattern\("([\w-]+)"\)', (PACKAGE / "rules" / "gates.dl").read_text()))
    assert ranked and set(KNOWN_PATTERNS) == ranked | (judged - {"unknown"})


@pytest.mark.parametrize("jobs", ["0", "-1", "100000", str(MAX_JOBS + 1)])
def test_jobs_out_of_bounds_are_refused(small: Path, jobs: str) -> None:
    bound = min(MAX_JOBS, 4 * usable_cpus())
    one_line_error(
        invoke("assess", small, "--jobs", jobs, "--no-cache"), 2, "--jobs", f"between 1 and {bound}"
    )


def test_jobs_within_bounds_are_taken(small: Path) -> None:
    assert invoke("assess", small, "-j", "1", "--no-cache").exit_code == 0
    assert (
        invoke("assess", small, "--jobs", str(min(MAX_JOBS, 4 * usable_cpus())), "--no-cache").exit_code == 0
    )


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        (["--gpus", "-2"], "--gpus"),
        (["--nodes", "0"], "--nodes"),
        (["--elements", "0"], "--elements"),
        (["--gpu", "Z80"], "--gpu"),
        (["--fail-on", "sometimes"], "--fail-on"),
        (["--format", "docx"], "docx"),
        (["--max-file-size", "-5"], "--max-file-size"),
    ],
)
def test_other_option_values_are_one_line_errors(small: Path, option: list[str], needle: str) -> None:
    one_line_error(invoke("assess", small, "--no-cache", *option), 2, needle)


# -- odd PATHs ----------------------------------------------------------------------------------


def _odd_path(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / f"odd_{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        (tmp_path / "loop_b").symlink_to(path)
        path.symlink_to(tmp_path / "loop_b")
    elif kind == "dangling":
        path.symlink_to(tmp_path / "gone")
    elif kind == "socket":
        path = Path("/tmp") / f"cpq-test-{os.getpid()}.sock"  # a socket's path must be short
        path.unlink(missing_ok=True)
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "device":
        path = Path(os.devnull)
    return path


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes, sockets and devices are POSIX")
@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("fifo", "named pipe"),
        ("device", "a device"),
        ("socket", "a socket"),
        ("loop", "symlink loop"),
        ("dangling", "broken symlink"),
        ("missing", "no such file or directory"),
    ],
)
def test_odd_path_kinds_are_refused_in_one_line(tmp_path: Path, kind: str, needle: str) -> None:
    path = _odd_path(kind, tmp_path)
    try:
        started = time.monotonic()
        one_line_error(invoke("assess", path), 2, str(path), needle)
        one_line_error(invoke("facts", path), 2, needle)
        one_line_error(invoke("query", "source_file(F, _, _)", path), 2, needle)
        assert time.monotonic() - started < 30  # refused, not read (a pipe would be waited on)
    finally:
        if kind == "socket":
            path.unlink(missing_ok=True)


def test_a_fifo_as_path_is_refused_by_the_real_process(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    one_line_error(run_cpq("assess", "pipe.py", cwd=tmp_path, timeout=60), 2, "named pipe")


def test_standard_input_is_refused_clearly(small: Path) -> None:
    one_line_error(invoke("assess", "-"), 2, "standard input")


def test_several_paths_make_one_report_named_from_their_common_folder(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "proj"
    write(root, "src/solver.py", HOT_LOOP)
    write(root, "src/util.py")
    write(root, "scripts/run.py", HOT_LOOP)
    write(root, "other/ignored_by_choice.py")
    monkeypatch.chdir(root)
    out = report(invoke("assess", "src/", "scripts/run.py", "--format", "json", "--no-cache"))
    assert out["path"] == "."
    assert out["files"]["assessed"] == 3
    assert {f["file"] for f in out["findings"]} == {"src/solver.py", "scripts/run.py"}
    # Overlapping PATHs count each file once; PATHs under one folder are named from it.
    again = report(invoke("assess", "src", "src/solver.py", "src/", "--format", "json", "--no-cache"))
    assert again["path"] == "src" and again["files"]["assessed"] == 2
    assert {f["file"] for f in again["findings"]} == {"solver.py"}
    # From elsewhere: the common folder, absolute.
    monkeypatch.chdir(root / "other")
    far = report(invoke("assess", "../src/solver.py", "../scripts", "--format", "json", "--no-cache"))
    assert Path(far["path"]) == root.resolve() or Path(far["path"]) == root
    assert {f["file"] for f in far["findings"]} == {"src/solver.py", "scripts/run.py"}


def test_one_odd_path_among_several_is_refused(small: Path, tmp_path: Path) -> None:
    one_line_error(invoke("assess", small, tmp_path / "nope.py"), 2, "nope.py", "no such file")


# -- outputs checked before the analysis -------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "target", "needle"),
    [
        ("--output", "no/such/dir/r.md", "no such folder"),
        ("-o", "a_folder", "is a folder"),
        ("--write-baseline", "no/such/b.json", "no such folder"),
        ("--write-baseline", "a_file/b.json", "a file stands where a folder is needed"),
    ],
)
def test_unwritable_outputs_are_refused_before_any_analysis(
    small: Path, tmp_path: Path, option, target, needle
) -> None:
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_file").write_text("")
    path = tmp_path / target
    one_line_error(invoke("assess", small, option, path), 2, needle)
    assert not (small / ".cpq").exists()  # the store is made by an analysis: none ran


def test_read_only_baseline_is_refused_before_any_analysis(small: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text("{}")
    baseline.chmod(0o444)
    if os.access(baseline, os.W_OK):
        pytest.skip("this user writes read-only files (root)")
    one_line_error(invoke("assess", small, "--write-baseline", baseline), 2, "read-only")
    assert not (small / ".cpq").exists()


def test_facts_out_onto_an_existing_file_is_refused(small: Path, tmp_path: Path) -> None:
    existing = tmp_path / "facts.txt"
    existing.write_text("keep me\n")
    one_line_error(invoke("facts", small, "--out", existing), 2, "--out", "is a file, not a folder")
    assert existing.read_text() == "keep me\n"
    made = tmp_path / "new" / "facts"
    assert invoke("facts", small, "--out", made).exit_code == 0
    assert (made / "call.facts").is_file()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_disk_is_one_line_not_a_traceback(small: Path, tmp_path: Path) -> None:
    one_line_error(
        run_cpq("assess", small, "--no-cache", "-o", "/dev/full", cwd=tmp_path),
        2,
        "/dev/full",
        "No space left",
    )
    with open("/dev/full", "w") as full:
        proc = run_cpq(
            "assess",
            small,
            "--no-cache",
            "--format",
            "json",
            cwd=tmp_path,
            stdout=full,
            stderr=subprocess.PIPE,
        )
    one_line_error(proc, 2, "standard output", "No space left")


def test_a_reader_that_goes_away_is_no_error(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpq", "assess", str(EXAMPLES), "--no-cache"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(timeout=240) == 0
    assert "Traceback" not in err and "standard output" not in err


# -- nothing to assess -----------------------------------------------------------------------------


def _nothing(root: Path, *extra: str) -> str:
    md = invoke("assess", root, "--no-cache", *extra)
    line = one_line_error(md, NOTHING_TO_ASSESS, "nothing to assess")
    assert md.stdout == ""  # no Markdown report with a verdict nothing earned
    as_json = invoke("assess", root, "--no-cache", "--format", "json", *extra)
    assert as_json.exit_code == NOTHING_TO_ASSESS
    data = json.loads(as_json.stdout)
    jsonschema.validate(
        data, json.loads(resources.files("cpq.assets").joinpath("report.schema.json").read_text())
    )
    assert data["verdict"] is None
    assert data["verdict_reason"].startswith("Nothing to assess")
    assert data["files"]["assessed"] == 0
    return line


def test_an_empty_folder_is_nothing_to_assess(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert "no Python files (.py, .ipynb)" in _nothing(tmp_path / "empty")


def test_a_readme_only_is_nothing_to_assess(tmp_path: Path) -> None:
    write(tmp_path / "docs", "README.md", "# Hello\n")
    _nothing(tmp_path / "docs")


def test_everything_excluded_is_nothing_to_assess(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write(root, "pyproject.toml", '[tool.cpq]\nexclude = ["gen/"]\nextend-exclude = ["*.py"]\n')
    write(root, "a.py", HOT_LOOP)
    write(root, "gen/b.py", HOT_LOOP)
    assert "excluded by [tool.cpq] exclude" in _nothing(root)


def test_everything_ignored_is_nothing_to_assess_and_says_how_to_assess_it(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write(root, ".gitignore", "*.py\n")
    write(root, "a.py", HOT_LOOP)
    assert "--no-respect-gitignore" in _nothing(root)
    assert invoke("assess", root, "--no-cache", "--no-respect-gitignore").exit_code == 0


def test_only_unreadable_files_is_nothing_to_assess(tmp_path: Path) -> None:
    write(tmp_path / "old", "legacy.py", 'print "hello"\n')
    line = _nothing(tmp_path / "old")
    assert "legacy.py: Python 2" in line


def test_nothing_to_assess_wins_over_fail_on(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert (
        invoke("assess", tmp_path / "empty", "--no-cache", "--fail-on", "ready").exit_code
        == NOTHING_TO_ASSESS
    )


def test_the_exit_status_of_nothing_to_assess_is_documented() -> None:
    help_text = invoke("assess", "--help", "--no-color").stdout
    assert f"{NOTHING_TO_ASSESS} nothing to assess" in " ".join(help_text.split())
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    assert f"| {NOTHING_TO_ASSESS} | nothing to assess" in readme


# -- global options after the command, colour --------------------------------------------------------


def test_global_options_are_taken_after_the_command(small: Path) -> None:
    quiet = invoke("assess", small, "--no-cache", "-q", "-f", "md")
    assert quiet.exit_code == 0 and "## Verdict" in quiet.stdout
    verbose = invoke("assess", small, "--no-cache", "-v")
    assert verbose.exit_code == 0 and re.search(r"cpq: 1 files, .* evaluate", verbose.stderr)
    assert invoke("assess", small, "--no-cache", "--no-color", "--quiet", "--verbose").exit_code == 0
    assert invoke("manifest", "show", "numpy.sum", "-q").exit_code == 0
    assert invoke("query", "source_file(F, _, _)", small, "--no-cache", "-v").exit_code == 0


def test_a_value_that_reads_like_a_flag_stays_a_value(small: Path) -> None:
    one_line_error(invoke("assess", small, "--pattern", "-q", "--no-cache"), 2, "'-q'")


def _ansi(text: str) -> bool:
    return "\x1b[" in text


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--help"], {"NO_COLOR": "1"}),
        (["--no-color", "--help"], {}),
        (["assess", "--help", "--no-color"], {}),
        (["assess", "--help"], {"NO_COLOR": "1"}),
        (["why", "--help"], {"NO_COLOR": "yes"}),
    ],
)
def test_no_color_and_NO_COLOR_leave_no_ansi_escapes(tmp_path: Path, args: list[str], env: dict) -> None:
    forced = {"FORCE_COLOR": "1", "TERM": "xterm-256color"}
    coloured = run_cpq(*[a for a in args if a != "--no-color"], cwd=tmp_path, env=forced)
    plain = run_cpq(*args, cwd=tmp_path, env={**forced, **env})
    assert plain.returncode == 0 and "Usage" in plain.stdout
    if not _ansi(coloured.stdout) and not env:
        pytest.skip("help has no colour here (no rich)")
    assert not _ansi(plain.stdout) and not _ansi(plain.stderr)


def test_no_color_report_has_no_ansi_escapes(small: Path, tmp_path: Path) -> None:
    proc = run_cpq(
        "assess",
        small,
        "--no-cache",
        "--no-color",
        "-f",
        "md",
        cwd=tmp_path,
        env={"FORCE_COLOR": "1", "TERM": "xterm-256color"},
    )
    assert proc.returncode == 0 and "## Verdict" in proc.stdout
    assert not _ansi(proc.stdout) and not _ansi(proc.stderr)


# -- .gitignore -------------------------------------------------------------------------------------


def _found(root: Path, **kw) -> set[str]:
    return {s.relpath for s in discover(root, **kw).texts}


def test_gitignore_patterns_as_git_reads_them(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / ".git" / "info" / "exclude").write_text("scratch.py\n")
    lines = [
        "# generated code",
        "*_pb2.py",
        "!keep_pb2.py",
        "build/",
        "/top_only.py",
        "docs/*",
        "!docs/api/",
        r"\#hash.py",
        "trailing.py   ",  # trailing spaces are dropped
        "**/deep/gen_*.py",
    ]
    write(repo, ".gitignore", "\n".join(lines) + "\n")
    for rel in [
        "a.py",
        "x_pb2.py",
        "keep_pb2.py",
        "sub/y_pb2.py",
        "build/out.py",
        "sub/build/out.py",
        "build.py",
        "top_only.py",
        "sub/top_only.py",
        "docs/conf.py",
        "docs/api/ref.py",
        "#hash.py",
        "trailing.py",
        "scratch.py",
        "sub/scratch.py",
        "a/b/deep/gen_1.py",
        "a/deep/keep.py",
    ]:
        write(repo, rel)
    write(repo, "sub/.gitignore", "!y_pb2.py\nlocal.py\n")
    write(repo, "sub/local.py")
    write(repo, "local.py")
    found = _found(repo)
    assert found == {
        "a.py",
        "keep_pb2.py",
        "sub/y_pb2.py",
        "build.py",
        "sub/top_only.py",
        "docs/api/ref.py",
        "a/deep/keep.py",
        "local.py",
    }
    everything = _found(repo, respect_gitignore=False)
    assert len(everything) == 19 and found < everything


def test_gitignore_whitelist_idiom_and_folders_that_cannot_be_re_included(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo, ".gitignore", "*\n!*/\n!*.py\nvendor/\n!vendor/mine.py\n")
    write(repo, "src/a.py")
    write(repo, "src/notes.ipynb", "{}")
    write(repo, "vendor/mine.py")
    assert _found(repo) == {"src/a.py"}  # git never re-includes inside an ignored folder


def test_gitignore_of_the_repository_above_path_applies(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / ".git" / "info" / "exclude").write_text("/src/local_*.py\n")
    write(repo, ".gitignore", "/src/gen/\n")
    write(repo, "src/.gitignore", "*.tmp.py\n")
    for rel in ["src/a.py", "src/gen/g.py", "src/x.tmp.py", "src/local_1.py"]:
        write(repo, rel)
    assert _found(repo / "src") == {"a.py"}
    # A file named on the command line is read whatever ignores it.
    assert _found(repo / "src" / "gen" / "g.py") == {"g.py"}


def test_gitignore_outside_a_repository_and_a_pipe_named_gitignore(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root, ".gitignore", "gen.py\n")
    write(root, "gen.py")
    write(root, "a.py")
    write(root, "sub/b.py")
    os.mkfifo(root / "sub" / ".gitignore")
    assert _found(root) == {"a.py", "sub/b.py"}  # the pipe is not waited on


def test_gitignore_through_the_command_line(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo, ".gitignore", "generated/\n")
    write(repo, "solver.py", HOT_LOOP)
    write(repo, "generated/big.py", HOT_LOOP)
    kept = report(invoke("assess", repo, "--format", "json", "--no-cache"))
    assert {f["file"] for f in kept["findings"]} == {"solver.py"}
    assert kept["files"]["skipped"] == []  # ignored files are no candidates: not listed as skipped
    every = report(invoke("assess", repo, "--format", "json", "--no-cache", "--no-respect-gitignore"))
    assert {f["file"] for f in every["findings"]} == {"solver.py", "generated/big.py"}
    # The store keeps the two apart: the second run with it gives the first's answer.
    assert report(invoke("assess", repo, "--format", "json"))["files"]["assessed"] == 1
    assert (
        report(invoke("assess", repo, "--format", "json", "--no-respect-gitignore"))["files"]["assessed"] == 2
    )


# -- files: Python 2, notebooks, suppressions, Python 3.13 ------------------------------------------------


def test_python2_file_is_skipped_as_python_2(tmp_path: Path) -> None:
    write(tmp_path / "t", "old.py", 'import sys\nprint "hello", sys.argv\n')
    write(tmp_path / "t", "new.py", HOT_LOOP)
    out = report(invoke("assess", tmp_path / "t", "--format", "json", "--no-cache"))
    reasons = {s["file"]: s["reason"] for s in out["files"]["skipped"]}
    assert reasons["old.py"].startswith("Python 2") and "line 2" in reasons["old.py"]
    assert "SyntaxError" not in reasons["old.py"]


def test_notebook_with_a_broken_cell_is_listed_as_partial(tmp_path: Path) -> None:
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    write_notebook(
        tmp_path / "nb.ipynb",
        [
            {**cell, "source": "import numpy as np\npos = np.zeros(100)\n"},
            {**cell, "source": "def broken(:\n    pass\n"},
            {**cell, "source": "for p in range(len(pos)):\n    pos[p] = pos[p] * 2\n"},
        ],
    )
    out = report(invoke("assess", tmp_path / "nb.ipynb", "--format", "json", "--no-cache"))
    assert out["files"]["assessed"] == 1
    assert out["files"]["partial"] == [
        {"file": "nb.ipynb", "reason": "cell 2 left out, it does not parse (line 1: invalid syntax)"}
    ]
    md = invoke("assess", tmp_path / "nb.ipynb", "--no-cache", "-f", "md")
    assert "nb.ipynb: cell 2 left out" in md.stdout


def test_suppressed_findings_never_count(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text(SYNC_LOOP.format(comment=""))
    (tmp_path / "quiet.py").write_text(SYNC_LOOP.format(comment="  # cpq: ignore[R104]"))
    plain = report(
        invoke("assess", tmp_path / "plain.py", "--elements", "50M", "--format", "json", "--no-cache")
    )
    assert any(f["code"] == "R104" and f["counts_for_verdict"] for f in plain["findings"])
    quiet = report(
        invoke("assess", tmp_path / "quiet.py", "--elements", "50M", "--format", "json", "--no-cache")
    )
    suppressed = [f for f in quiet["findings"] if f["suppressed"]]
    assert suppressed and not any(f["counts_for_verdict"] for f in suppressed)


PEP_696 = HOT_LOOP.replace(
    "\n\n\ndef push",
    "\n\n\ndef identity[T = float](x: T) -> T:\n    return x\n\n\n"
    "type Pair[T = int] = tuple[T, T]\n\n\ndef push",
)


def test_python_3_13_type_parameter_defaults_keep_the_rest_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "generic.py").write_text(PEP_696)
    (tmp_path / "plain.py").write_text(
        PEP_696.split("\n\n\ndef identity")[0] + "\n\n\n" + PEP_696.split("T, T]\n\n\n")[1]
    )
    out = report(invoke("assess", tmp_path / "generic.py", "--format", "json", "--no-cache"))
    plain = report(invoke("assess", tmp_path / "plain.py", "--format", "json", "--no-cache"))
    assert out["files"]["assessed"] == 1 and out["files"]["skipped"] == []
    [partial] = out["files"]["partial"]
    assert "Python 3.13 syntax the parser does not know" in partial["reason"]
    assert "2 statement(s) left out" in partial["reason"]
    # The finding in push() survives, as in the same file without the generic definitions.
    assert plain["findings"] and {f["code"] for f in out["findings"]} == {
        f["code"] for f in plain["findings"]
    }
    assert any(f["function"] == "push" for f in out["findings"])


def test_a_real_syntax_error_is_not_called_newer_syntax(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(PEP_696 + "\n\ndef oops(:\n    pass\n")
    out = report(invoke("assess", tmp_path / "broken.py", "--format", "json", "--no-cache"))
    [partial] = out["files"]["partial"]
    assert partial["reason"].startswith("SyntaxError")
