"""cpq in CI, in a commit hook and on a terminal, run as their users run it: the progress line
(drawn on a terminal, silent in pipes, in CI and with -q)."""

from __future__ import annotations

import io
import os
import pty
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, TESTS
from typer.testing import CliRunner

from cpq.config.context import Context
from cpq.pipeline.assessment import assess
from cpq.pipeline.progress import Progress, in_ci, wanted

REPO = TESTS.parent
runner = CliRunner()


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
    time.sleep(0.45)  # the main thread busy elsewhere
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
        with Progress(stream=stream, delay=0.0, environ={}) as progress:
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
    assert "Verdict" in report and "cpq:" not in report  # the report alone on stdout


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
    assert status == 0 and "Verdict" in report
    assert drawn == ""
