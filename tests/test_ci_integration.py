"""cpq in CI, in a commit hook and on a terminal, run as their users run it: the progress line
(drawn on a terminal, silent in pipes, in CI and with -q), `--fail-on-findings` and the
pre-commit hook that uses it (passing a repository whose only trouble is a demo array size,
failing one with a hot BLOCKS finding), and the GitHub Action run step by step on this machine
(tests/action_local.py)."""

from __future__ import annotations

import io
import itertools
import json
import os
import pty
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES, TESTS
from test_ecosystem import _validator
from typer.testing import CliRunner

from cpq.cli.app import app
from cpq.config.context import Context
from cpq.pipeline.assessment import assess
from cpq.pipeline.progress import Progress, in_ci, wanted

REPO = TESTS.parent
runner = CliRunner()

# A smoother: no finding a code change could fix, but its demo array fixes the problem size at
# 300 elements, below Gate 2's partition floor: the verdict is NOT RECOMMENDED.
DEMO_SIZE_ONLY = """\
import numpy as np


def smooth(u):
    return 0.5 * (np.roll(u, 1) + np.roll(u, -1))


def main():
    u = np.zeros(300)
    for _ in range(100):
        u = smooth(u)
    return u
"""

# A host sync on the hot path (R104, BLOCKS), yet only LIGHT REFACTOR.
HOT_ITEM = """\
import numpy as np


def descend(A, b, lr, iters):
    x = np.zeros(A.shape[1])
    history = []
    for it in range(iters):
        r = A @ x - b
        x -= lr * (A.T @ r)
        history.append(np.dot(r, r).item()){comment}
    return x, history
"""


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _cpq_env(**extra: str) -> dict[str, str]:
    """The environment of a cpq subprocess: this checkout's cpq (PYTHONPATH as the tests
    run), no CI marker unless asked."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TERM")}
    env.update(extra)
    return env


# --------------------------------------------------------------------------- progress


@pytest.mark.parametrize(
    "value, expected",
    [("true", True), ("TRUE", True), ("1", True), ("", False), ("false", False), ("0", False)],
)
def test_ci_is_told_by_the_ci_variable(value: str, expected: bool) -> None:
    assert in_ci({"CI": value}) is expected
    assert wanted(FakeTTY(), quiet=False, environ={"CI": value}) is not expected


@pytest.mark.parametrize(
    "stream, quiet, environ",
    [
        (FakeTTY(), False, {"CI": "true"}),  # CI, even on a terminal
        (FakeTTY(), False, {"CI": "1"}),
        (FakeTTY(), True, {}),  # -q
        (io.StringIO(), False, {}),  # a pipe
        (FakeTTY(), False, {"TERM": "dumb"}),  # no carriage return to redraw with
    ],
)
def test_progress_draws_nothing_in_ci_pipes_or_quiet(stream: io.StringIO, quiet: bool, environ: dict) -> None:
    with Progress(quiet=quiet, stream=stream, delay=0.0, environ=environ) as progress:
        progress.phase("extracting", total=3)
        progress.advance(3)
        progress.phase("evaluating rules")
        progress.detail("3/9 strata")
    assert stream.getvalue() == ""


def test_every_phase_is_drawn_and_the_line_erased_at_the_end() -> None:
    stream, now = FakeTTY(), [0.0]
    progress = Progress(stream=stream, delay=0.0, environ={}, clock=lambda: now[0])
    progress.phase("discovering files")
    progress.phase("extracting", total=4)  # a phase is drawn as it starts, however short
    progress.phase("evaluating rules")
    now[0] = 2.0
    progress.detail("12/87 strata")
    text = stream.getvalue()
    assert "cpq: discovering files" in text and "cpq: extracting [" in text and "0/4" in text
    assert text.rstrip().endswith("cpq: evaluating rules - 12/87 strata, 2.0s")
    now[0] = 2.05
    progress.detail("13/87 strata")
    assert "13/87" not in stream.getvalue()  # redraws are throttled
    progress.close()
    assert stream.getvalue().endswith("\r") and not progress.drawn


def test_a_spinner_keeps_moving_while_the_main_thread_is_busy() -> None:
    """The evaluation holds the main thread in DuckDB: a thread redraws the spinner and its
    seconds meanwhile, and stops when the progress closes."""
    stream = FakeTTY()
    progress = Progress(stream=stream, delay=0.0, environ={}, ticking=True)
    progress.phase("evaluating rules")
    time.sleep(0.6)  # the main thread busy elsewhere
    redraws = stream.getvalue().count("cpq: evaluating rules")
    progress.close()
    assert redraws >= 3, stream.getvalue()
    assert not any(t.name == "cpq-progress" for t in threading.enumerate())
    settled = stream.getvalue()
    time.sleep(0.25)
    assert stream.getvalue() == settled  # nothing drawn once closed


def test_a_warning_is_printed_on_a_clean_line() -> None:
    stream = FakeTTY()
    progress = Progress(stream=stream, delay=0.0, environ={})
    progress.phase("extracting", total=2)
    progress.say("cpq: cache: something")
    before_warning = stream.getvalue().rsplit("cpq: cache", 1)[0]
    assert before_warning.endswith("\r")  # the status line was erased first
    assert stream.getvalue().endswith("cpq: cache: something\n")
    progress.close()


def test_the_evaluation_reports_each_stratum_done(tmp_path: Path) -> None:
    from cpq.engine import Database
    from cpq.rules.program import load_program

    program = load_program()
    seen: list[tuple[int, int, str]] = []
    with Database(program) as db:
        db.evaluate(
            on_stratum=lambda done, total: seen.append((done, total, threading.current_thread().name))
        )
    total = len(program.stratification)
    assert [done for done, _, _ in seen] == list(range(1, total + 1))
    assert {t for _, t, _ in seen} == {total}
    assert {name for _, _, name in seen} == {threading.current_thread().name}  # the caller's thread


def test_an_assessment_goes_through_every_phase(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("sync_in_loop.py", "wave_equation.py"):
        shutil.copy(EXAMPLES / name, tree / name)

    def phases(**options: object) -> tuple[list[str], str]:
        stream = FakeTTY()
        # A clock a second ahead at each reading: every redraw is due, so what is drawn does
        # not depend on how fast the host runs (a 2-file update can be done within one
        # REDRAW_EVERY, and its strata count would then never be drawn).
        clock = itertools.count(0.0, 1.0).__next__
        with Progress(stream=stream, delay=0.0, clock=clock, environ={}) as progress:
            assess(tree, Context(), progress=progress, **options)  # type: ignore[arg-type]
        return progress.phases, stream.getvalue()

    plain, text = phases()
    assert plain == [
        "reading the rules",
        "discovering files",
        "extracting",
        "loading facts",
        "evaluating rules",
        "reading results",
    ]
    assert "cpq: extracting [" in text and "/2" in text and "strata" in text
    stored, _ = phases(use_cache=True, cache_dir=tmp_path / "store")
    assert stored[-3:] == ["evaluating rules", "reading results", "saving results"]
    (tree / "sync_in_loop.py").write_text((EXAMPLES / "sync_in_loop.py").read_text() + "\n# edited\n")
    updated, text = phases(use_cache=True, cache_dir=tmp_path / "store")
    assert "updating saved results" in updated and "strata" in text


_ON_A_PTY = """\
import sys
import cpq.pipeline.progress as progress
progress.DEFAULT_DELAY = 0.0  # draw from the start: the test's runs are short
from cpq.cli.app import run
sys.argv = ["cpq", *sys.argv[1:]]
run()
"""


def _cpq_on_a_terminal(args: list[str], *, pipe: bool = False, **env: str) -> tuple[int, str, str]:
    """Run cpq with stderr on a pseudo-terminal (or a pipe): (status, stderr, stdout)."""
    command = [sys.executable, "-c", _ON_A_PTY, *args]
    if pipe:
        done = subprocess.run(command, capture_output=True, text=True, env=_cpq_env(**env), timeout=300)
        return done.returncode, done.stderr, done.stdout
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, env=_cpq_env(**env))
    os.close(follower)
    drawn = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert proc.stdout is not None
    stdout = proc.stdout.read().decode()
    return proc.wait(timeout=300), drawn.decode(), stdout


@pytest.fixture(scope="module")
def small_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("progress") / "tree"
    tree.mkdir()
    for name in ("sync_in_loop.py", "wave_equation.py", "refactor_only.py"):
        shutil.copy(EXAMPLES / name, tree / name)
    return tree


def test_the_command_shows_every_phase_on_a_terminal(small_tree: Path) -> None:
    status, drawn, report = _cpq_on_a_terminal(["assess", str(small_tree), "--no-cache"])
    assert status == 0, drawn
    phases = ["discovering files", "extracting [", "loading facts", "evaluating rules", "strata"]
    for phase in [*phases, "rendering the report"]:
        assert phase in drawn, drawn
    assert drawn.endswith("\r") and drawn.rsplit("\r", 2)[-2].strip() == ""  # erased at the end
    assert "LIGHT REFACTOR" in report and "cpq:" not in report  # the report alone on stdout


@pytest.mark.parametrize(
    "args, env, pipe",
    [
        (["assess"], {"CI": "true"}, False),
        (["assess"], {"CI": "1"}, False),
        (["-q", "assess"], {}, False),
        (["assess"], {}, True),
    ],
    ids=["CI=true on a terminal", "CI=1 on a terminal", "-q on a terminal", "a pipe"],
)
def test_the_command_draws_nothing_in_ci_quiet_or_a_pipe(
    small_tree: Path, args: list[str], env: dict[str, str], pipe: bool
) -> None:
    status, drawn, report = _cpq_on_a_terminal([*args, str(small_tree), "--no-cache"], pipe=pipe, **env)
    assert status == 0 and "LIGHT REFACTOR" in report
    assert drawn == ""


# --------------------------------------------------------------------------- --fail-on-findings


def _project(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    root = tmp_path / name
    root.mkdir()
    for relpath, text in files.items():
        (root / relpath).write_text(text)
    return root


def _assess(*args: str) -> tuple[int, str, str]:
    done = runner.invoke(app, ["assess", *args, "--no-cache", "--format", "json"])
    return done.exit_code, done.stdout, done.stderr


def test_a_demo_array_size_fails_the_verdict_gate_but_not_the_findings_gate(tmp_path: Path) -> None:
    root = _project(tmp_path, "demo", {"demo.py": DEMO_SIZE_ONLY})
    status, out, _ = _assess(str(root), "--fail-on", "significant")
    report = json.loads(out)
    assert report["verdict"] == "NOT RECOMMENDED" and status == 1  # Gate 2: what --fail-on's caveat says
    assert not [f for f in report["findings"] if f["kind"] in ("BLOCKS", "REFACTOR")]
    for kind in ("BLOCKS", "REFACTOR", "blocks"):
        status, out, err = _assess(str(root), "--fail-on-findings", kind)
        assert status == 0, err
        gate2 = [g for g in json.loads(out)["gates"] if g["name"] == "Problem size"]
        assert gate2 and gate2[0]["status"] == "fail"  # reported, not failing


def test_a_hot_blocks_finding_fails_the_findings_gate_with_a_reason(tmp_path: Path) -> None:
    root = _project(tmp_path, "hot", {"train.py": HOT_ITEM.format(comment="")})
    status, out, _ = _assess(str(root), "--fail-on", "significant")
    assert json.loads(out)["verdict"] == "LIGHT REFACTOR" and status == 0  # the verdict gate lets it by
    status, _, err = _assess(str(root), "--fail-on-findings", "BLOCKS")
    assert status == 1
    assert err.strip() == "cpq: --fail-on-findings BLOCKS: 1 BLOCKS finding counts: train.py:10 R104"


def test_suppressed_disabled_and_baselined_findings_never_count(tmp_path: Path) -> None:
    quiet = _project(tmp_path, "quiet", {"train.py": HOT_ITEM.format(comment="  # cpq: ignore[R104]")})
    assert _assess(str(quiet), "--fail-on-findings", "BLOCKS")[0] == 0
    disabled = _project(
        tmp_path,
        "disabled",
        {"train.py": HOT_ITEM.format(comment=""), "pyproject.toml": '[tool.cpq]\nignore = ["R104"]\n'},
    )
    assert _assess(str(disabled), "--fail-on-findings", "BLOCKS")[0] == 0
    known = _project(tmp_path, "known", {"train.py": HOT_ITEM.format(comment="")})
    baseline = tmp_path / "baseline.json"
    assert _assess(str(known), "--write-baseline", str(baseline))[0] == 0
    assert _assess(str(known), "--baseline", str(baseline), "--fail-on-findings", "BLOCKS")[0] == 0
    (known / "more.py").write_text(HOT_ITEM.format(comment="").replace("descend", "ascend"))
    status, _, err = _assess(str(known), "--baseline", str(baseline), "--fail-on-findings", "BLOCKS")
    assert status == 1 and "more.py:10 R104" in err and "train.py" not in err  # only the new one


def test_refactor_takes_blocks_too_and_bad_kinds_are_usage_errors() -> None:
    refactor_only = str(EXAMPLES / "refactor_only.py")
    assert _assess(refactor_only, "--fail-on-findings", "BLOCKS")[0] == 0
    status, _, err = _assess(refactor_only, "--fail-on-findings", "REFACTOR")
    assert status == 1 and "REFACTOR or BLOCKS" in err
    assert _assess(str(EXAMPLES / "sync_in_loop.py"), "--fail-on-findings", "REFACTOR")[0] == 1  # BLOCKS
    status, _, err = _assess(refactor_only, "--fail-on-findings", "SCALES")
    assert status == 2 and "--fail-on-findings" in err


# --------------------------------------------------------------------------- the pre-commit hook


def _hook() -> dict:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    return next(h for h in hooks if h["id"] == "cpq")


def _git_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for relpath, text in files.items():
        (root / relpath).write_text(text)
    hook = _hook()
    # `repo: local` with this checkout's entry and args: pre-commit runs it as the hook would
    # run from this repository (the command is this checkout's cpq, not an installed one).
    local = {**hook, "language": "system", "entry": shlex.join(_hook_command(hook["entry"]))}
    local.pop("minimum_pre_commit_version", None)
    config = {"repos": [{"repo": "local", "hooks": [local]}]}
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(root)], check=True)
    subprocess.run([*git, "-C", str(root), "add", "-A"], check=True)
    return root


def _hook_command(entry: str) -> list[str]:
    """The hook's entry as a command line: `cpq` is this checkout's (`python -m cpq`)."""
    words = shlex.split(entry)
    assert words[0] == "cpq", entry
    return [sys.executable, "-m", "cpq", *words[1:]]


def _run_hook(repo: Path) -> tuple[int, str]:
    """`pre-commit run --all-files` when pre-commit is installed; otherwise what it would run:
    the entry and args, no filenames (pass_filenames: false), in the repository's root, when a
    staged file is of the hook's types."""
    env = _cpq_env(PRE_COMMIT_HOME=str(repo.parent / "pre-commit-home"))
    if shutil.which("pre-commit"):
        done = subprocess.run(
            ["pre-commit", "run", "--all-files"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return done.returncode, done.stdout + done.stderr
    hook = _hook()
    staged = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True)
    suffixes = {"python": ".py", "jupyter": ".ipynb"}
    wanted_suffixes = {suffixes[t] for t in hook["types_or"]}
    if not any(Path(name).suffix in wanted_suffixes for name in staged.stdout.split()):
        return 0, "(no files to check)"
    assert hook["pass_filenames"] is False
    command = _hook_command(hook["entry"]) + list(hook["args"])
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def test_the_hook_gates_on_findings() -> None:
    hook = _hook()
    assert hook["args"] == ["--fail-on-findings", "BLOCKS"]
    assert shlex.split(hook["entry"]) == ["cpq", "--quiet", "assess", "."]


def test_the_hook_passes_code_with_no_findings_whatever_its_demo_sizes(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "repo", {"demo.py": DEMO_SIZE_ONLY})
    status, output = _run_hook(repo)
    assert status == 0, output


def test_the_hook_fails_on_a_hot_path_blocks_finding(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "repo", {"demo.py": DEMO_SIZE_ONLY, "train.py": HOT_ITEM.format(comment="")})
    status, output = _run_hook(repo)
    assert status == 1, output
    assert "train.py:10 R104" in output


# --------------------------------------------------------------------------- the GitHub Action


def _action() -> dict:
    return yaml.safe_load((REPO / "action.yml").read_text())


def test_the_action_is_a_composite_that_installs_assesses_uploads_and_gates() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    assert {"path", "args", "fail-on-findings"} <= set(action["inputs"])
    assert action["inputs"]["fail-on-findings"]["default"] == "BLOCKS"
    steps = action["runs"]["steps"]
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert uses == ["actions/setup-python", "github/codeql-action/upload-sarif"]
    runs = {s["id"]: s for s in steps if "run" in s}
    assert '"$GITHUB_ACTION_PATH"' in runs["install"]["run"]  # cpq from the action's own checkout
    assert all("if" not in s for s in runs.values())  # what tests/action_local.py runs is all there is
    for step in runs.values():  # inputs reach the scripts through env only
        assert "${{" not in step["run"], step["id"]
    order = [s.get("id") or s["uses"].split("@")[0] for s in steps]
    assert order.index("github/codeql-action/upload-sarif") < order.index("gate")  # upload, then fail


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    """A checkout with the examples in src/, and `cpq` and `python` on PATH as this checkout's."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES, ws / "src", ignore=shutil.ignore_patterns(".cpq", "*.json"))
    return ws


def _bin(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, command in (
        ("cpq", f"{shlex.quote(sys.executable)} -m cpq"),
        ("python", shlex.quote(sys.executable)),
    ):
        path = folder / name
        path.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        path.chmod(0o755)
    return folder


def _run_action(tmp_path: Path, workspace: Path, *inputs: str) -> tuple[int, str]:
    env = _cpq_env()
    env["PATH"] = f"{_bin(tmp_path)}{os.pathsep}{env['PATH']}"
    args = [
        sys.executable,
        str(TESTS / "action_local.py"),
        "--workspace",
        str(workspace),
        "--skip",
        "install",
    ]
    for item in inputs:
        args += ["--input", item]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


def _has_github_format() -> bool:
    done = runner.invoke(app, ["assess", "--help"], env={"COLUMNS": "300"})
    return "github" in done.stdout.split()


def test_the_action_writes_valid_sarif_and_fails_on_blocks(tmp_path: Path, workspace: Path) -> None:
    status, output = _run_action(tmp_path, workspace, "path=src", "args=--elements 50M --gpu 'H100'")
    assert status == 1, output  # the examples have hot BLOCKS findings
    assert "action_local: skip Upload SARIF" in output and "action_local: run Gate" in output
    assert "output status=1" in output and "output sarif-file=cpq.sarif" in output
    assert "cpq: --fail-on-findings BLOCKS:" in output
    sarif = workspace / "cpq.sarif"
    log = json.loads(sarif.read_text())
    errors = sorted(_validator().iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    run = log["runs"][0]
    assert {r["ruleId"] for r in run["results"]} >= {"R104", "R108"}
    gates = {g["gate"]: g for g in run["properties"]["gates"]}
    assert gates[1]["status"] == "pass" and "50,000,000" in gates[2]["reason"]  # `args` reached cpq
    if _has_github_format():
        assert any(line.startswith("::") for line in output.splitlines() if "title=cpq::" not in line)
    else:
        assert "this cpq has no --format github" in output
    # Without the findings gate the job passes, SARIF and all.
    sarif.unlink()
    status, output = _run_action(tmp_path, workspace, "path=src", "fail-on-findings=", "annotate=false")
    assert status == 0, output
    assert "output status=0" in output and sarif.is_file()


def test_the_action_stops_at_a_usage_error(tmp_path: Path, workspace: Path) -> None:
    status, output = _run_action(tmp_path, workspace, "path=src", "args=--elements nonsense")
    assert status == 2, output
    assert "action_local: run Gate" not in output and not (workspace / "cpq.sarif").exists()
