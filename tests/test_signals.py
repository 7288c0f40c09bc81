"""Signals and processes: the real CLI in a subprocess, stopped mid-run.

Ctrl-C and SIGTERM end a run within a second, whatever it is doing, with status 130 or 143,
no traceback, and no process left behind; `kill -9` of cpq takes its extraction workers down
too (they would otherwise hold the caller's stdout open for ever), and the next run trusts
nothing the killed one left half-written.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLES

from cpq.facts.parallel import PARALLEL_MIN_BYTES

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

COPIES = 40  # of the examples: some 500 KB of source, a second or two of extraction
# Generous for a loaded two-core CI machine; the measured latency is printed (pytest -s).
EXIT_WITHIN_S = 2.0
PHASE_TIMEOUT_S = 120.0

# A rule that keeps the evaluation busy for far longer than any test waits: a three-way join
# of the nodes on their line numbers that finds nothing.
SLOW_RULE = """
.decl cpq_slow_join(a: number)
cpq_slow_join(A) :- node(A, _, _, L, _), node(B, _, _, L, _), node(C, _, _, L, _), A + B + C = -1.
"""


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("signals") / "tree"
    for i in range(COPIES):
        package = root / f"pkg{i}"
        package.mkdir(parents=True)
        for source in sorted(EXAMPLES.glob("*.py")):
            shutil.copy(source, package / f"{source.stem}_{i}.py")
    # Enough source for worker processes to extract it.
    assert sum(p.stat().st_size for p in root.rglob("*.py")) >= 1.2 * PARALLEL_MIN_BYTES
    return root


@pytest.fixture(scope="module")
def slow_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "slow.dl"
    from cpq.rules.program import rules_text

    path.write_text(rules_text() + SLOW_RULE)  # the shipped rules as one file
    return path


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, process group, state) of every process, from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        # The command name, in parentheses, may hold spaces: the fields follow its last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(entry)] = (int(fields[1]), int(fields[2]), fields[0])
    return found


def _alive_in_group(pgid: int) -> list[int]:
    """The processes of the group that still run (a zombie has finished)."""
    return [pid for pid, (_, group, state) in _processes().items() if group == pgid and state != "Z"]


def _workers(pid: int) -> list[int]:
    return [p for p, (parent, _, state) in _processes().items() if parent == pid and state != "Z"]


def _wait_for(condition: Callable[[], bool], what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"cpq ended (status {proc.returncode}) before {what}: {_stderr(proc)}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def _read_to_end(fd: int, deadline: float) -> bytes | None:
    """What is left to read from the pipe, or None when it is still open at the deadline (a
    process of the run holds its other end)."""
    data = b""
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return data
        data += chunk


def _stderr(proc: subprocess.Popen[bytes]) -> str:
    """The stderr of a process that ended."""
    assert proc.stderr is not None
    if proc.poll() is None:
        return ""
    data = _read_to_end(proc.stderr.fileno(), time.monotonic() + EXIT_WITHIN_S)
    if data is None:
        pytest.fail("stderr still open: a process of the run outlived it")
    return data.decode(errors="replace")


@pytest.fixture()
def start(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start `python -m cpq ARGS` in a session of its own; whatever is left of it is killed."""
    started: list[subprocess.Popen[bytes]] = []

    def run(*args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cpq", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            cwd=tmp_path,  # `-m` puts the working directory on sys.path: nothing there to import
        )
        started.append(proc)
        return proc

    yield run
    for proc in started:
        for pid in _alive_in_group(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.communicate()


def _in_extraction(proc: subprocess.Popen[bytes]) -> None:
    _wait_for(lambda: bool(_workers(proc.pid)), "the extraction workers start", proc)


def _after_extraction(proc: subprocess.Popen[bytes]) -> None:
    _in_extraction(proc)
    _wait_for(lambda: not _workers(proc.pid), "the extraction ends", proc)


def _stop(proc: subprocess.Popen[bytes], signum: int, group: bool, times: int = 1) -> float:
    """Send the signal (to the whole group, as Ctrl-C in a terminal does); seconds to exit."""
    sent = time.monotonic()
    for _ in range(times):
        if group:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running 30 s after signal {signum}")
    return time.monotonic() - sent


def _assert_clean_exit(proc: subprocess.Popen[bytes], signum: int, latency: float, phase: str) -> None:
    print(f"\n{signal.Signals(signum).name} {phase}: exited in {latency:.3f} s")
    deadline = time.monotonic() + EXIT_WITHIN_S
    while _alive_in_group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = _alive_in_group(proc.pid)
    assert not left, f"processes left behind: {left}"
    stderr = _stderr(proc)
    assert proc.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert len(stderr.strip().splitlines()) <= 1, stderr
    assert latency < EXIT_WITHIN_S


SIGNALS = [
    pytest.param(signal.SIGTERM, False, id="SIGTERM"),
    pytest.param(signal.SIGTERM, True, id="SIGTERM-group"),  # as systemd stops a service
    pytest.param(signal.SIGINT, True, id="ctrl-c"),  # to the group, workers included
]


@pytest.mark.parametrize(("signum", "group"), SIGNALS)
def test_signal_during_extraction(
    start: Callable[..., subprocess.Popen[bytes]], big_tree: Path, tmp_path: Path, signum: int, group: bool
) -> None:
    proc = start("assess", str(big_tree), "--cache-dir", str(tmp_path / "store"), "--jobs", "2")
    _in_extraction(proc)
    latency = _stop(proc, signum, group)
    _assert_clean_exit(proc, signum, latency, "during extraction")


@pytest.mark.parametrize(("signum", "group"), SIGNALS)
def test_signal_during_evaluation(
    start: Callable[..., subprocess.Popen[bytes]],
    big_tree: Path,
    slow_rules: Path,
    tmp_path: Path,
    signum: int,
    group: bool,
) -> None:
    proc = start(
        "assess",
        str(big_tree),
        "--rules",
        str(slow_rules),
        "--cache-dir",
        str(tmp_path / "store"),
        "--jobs",
        "2",
    )
    _after_extraction(proc)
    time.sleep(0.5)  # into the evaluation: the slow rule takes far longer
    latency = _stop(proc, signum, group)
    _assert_clean_exit(proc, signum, latency, "during evaluation")


def test_second_signal_while_stopping(
    start: Callable[..., subprocess.Popen[bytes]], big_tree: Path, slow_rules: Path
) -> None:
    proc = start("assess", str(big_tree), "--rules", str(slow_rules), "--no-cache", "--jobs", "2")
    _after_extraction(proc)
    time.sleep(0.5)
    latency = _stop(proc, signal.SIGTERM, group=False, times=2)
    _assert_clean_exit(proc, signal.SIGTERM, latency, "twice during evaluation")


@pytest.fixture(scope="module")
def reference_report(big_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "cpq", "assess", str(big_tree), "--no-cache", "-f", "json"],
        capture_output=True,
        check=True,
        cwd=tmp_path_factory.mktemp("cwd"),
    )
    return _comparable(done.stdout)


def _comparable(report: bytes) -> dict:
    data = json.loads(report)
    data.pop("stats", None)
    return data


@pytest.mark.parametrize("phase", ["extraction", "evaluation"])
def test_kill_9_takes_the_workers_down(
    start: Callable[..., subprocess.Popen[bytes]],
    big_tree: Path,
    tmp_path: Path,
    reference_report: dict,
    phase: str,
) -> None:
    store = tmp_path / "store"
    proc = start("assess", str(big_tree), "--cache-dir", str(store), "--jobs", "2", "-f", "json")
    _in_extraction(proc)
    if phase == "evaluation":
        _after_extraction(proc)  # killed while loading or evaluating, its results file half made
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    # The caller's end of cpq's stdout (as `cpq assess ... | cat` reads it) reaches its end.
    assert proc.stdout is not None
    closed = _read_to_end(proc.stdout.fileno(), sent + EXIT_WITHIN_S)
    assert closed is not None, "stdout still open: a process of the run holds it"
    eof = time.monotonic() - sent
    while _alive_in_group(proc.pid) and time.monotonic() < sent + EXIT_WITHIN_S:
        time.sleep(0.02)
    gone = time.monotonic() - sent
    print(f"\nkill -9 during {phase}: stdout closed after {eof:.3f} s, all gone after {gone:.3f} s")
    assert not _alive_in_group(proc.pid), "extraction workers outlived cpq"

    # The next run, on what the killed one left in the store, gives the report a fresh run does.
    again = start("assess", str(big_tree), "--cache-dir", str(store), "--jobs", "2", "-f", "json")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err.decode(errors="replace")
    assert _comparable(out) == reference_report
    assert not list(store.glob("*.partial*"))


def test_closed_stdout_ends_quietly(start: Callable[..., subprocess.Popen[bytes]], big_tree: Path) -> None:
    """`cpq assess . | head -1`: the report's reader goes away after a line."""
    proc = start("assess", str(big_tree), "--no-cache", "-f", "json")
    assert proc.stdout is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    proc.wait(timeout=300)
    stderr = _stderr(proc)
    assert proc.returncode in (0, 1), stderr
    assert stderr == "", stderr
