"""The store under concurrent runs and crashes, black-box through `python -m cpq`.

* Two `cpq assess` runs of one tree at once (both with the store, in every state the store can
  be in: empty, after one edited file, after many, with two contexts at once) both exit 0 with
  the report of a `--no-cache` run, and so does the run after them.
* A run killed with SIGKILL at a random moment of its work (cold, after one edit, after a
  comment edit, after many edits, with nothing changed) leaves a store that the next runs use
  correctly or rebuild: their reports equal `--no-cache`'s.

CPQ_CRASH_SEED fixes the random moments and edits (the seed is printed in every failure);
CPQ_CRASH_KILLS sets the number of killed runs (default 8).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import cpq

PACKAGE_PARENT = str(Path(cpq.__file__).parent.parent)
KILLS = int(os.environ.get("CPQ_CRASH_KILLS", "8"))
# Files of the tree: a run takes about a second, time enough to be killed mid-way.
FILES = 20

KERNEL = """
def stencil_{i}(u):
    out = np.zeros_like(u)
    for j in range(1, u.shape[0] - 1):
        out[j] = (u[j - 1] + u[j] + u[j + 1]) / 3.0
    return out


def total_{i}(a):
    s = 0.0
    for j in range(len(a)):
        s += a[j].item()
    return s


def run_{i}(n):
    a = np.ones(n)
    for step in range(10):
        a = stencil_{i}(a)
        a = np.concatenate([a, np.zeros(1)])
    while np.max(np.abs(a)) > 1e-3:
        a = a * 0.5
    return total_{i}(a)
"""


def _module(i: int) -> str:
    head = "import numpy as np\n"
    if i:
        # A chain of imports, so hot paths cross files.
        head += f"from mod{i - 1:02d} import run_{i - 1}\n"
    body = "".join(KERNEL.replace("{i}", f"{i}{k}") for k in range(3))
    if i:
        body += f"\n\ndef driver_{i}():\n    for n in range(5):\n        run_{i - 1}(n)\n"
    return head + body


def _tree(root: Path, files: int = FILES) -> Path:
    root.mkdir()
    for i in range(files):
        (root / f"mod{i:02d}.py").write_text(_module(i))
    (root / "helpers.py").write_text("def walk(graph, start):\n    seen = {start}\n    return seen\n")
    return root


def _env(xdg: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(xdg)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    return env


def _command(tree: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cpq", "-v", "assess", str(tree), "--format", "json", *extra]


def _report(stdout: str) -> dict[str, Any]:
    report = json.loads(stdout)
    report.get("stats", {}).pop("seconds", None)  # the one thing that varies between runs
    return report


def _assess(tree: Path, xdg: Path, *extra: str) -> tuple[dict[str, Any], str, float]:
    started = time.perf_counter()
    done = subprocess.run(_command(tree, *extra), env=_env(xdg), capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-3000:]
    return _report(done.stdout), done.stderr, seconds


def _mismatch(cached: dict[str, Any], reference: dict[str, Any]) -> str:
    """The first keys where two reports differ, shortly."""
    out = []
    for key in sorted(set(cached) | set(reference)):
        if cached.get(key) != reference.get(key):
            out.append(
                f"{key}:\n  with the store: {json.dumps(cached.get(key))[:1500]}\n"
                f"  --no-cache:     {json.dumps(reference.get(key))[:1500]}"
            )
    return "\n".join(out)


def _edit_one(tree: Path, rng: random.Random) -> str:
    path = tree / f"mod{rng.randrange(FILES):02d}.py"
    path.write_text(path.read_text() + f"\n\ndef extra_{rng.randrange(10**6)}(a):\n    return a.item()\n")
    return f"code appended to {path.name}"


def _comment_one(tree: Path, rng: random.Random) -> str:
    path = tree / f"mod{rng.randrange(FILES):02d}.py"
    path.write_text(path.read_text() + "# reviewed\n")
    return f"comment appended to {path.name}"


def _edit_many(tree: Path, rng: random.Random) -> str:
    # More files than an update of the saved results takes (update.UPDATE_MAX_FILES, 16): the
    # run copies the unchanged files' facts out of them instead (reuse.py).
    names = rng.sample(range(FILES), FILES - 2)
    for i in names:
        path = tree / f"mod{i:02d}.py"
        path.write_text("# moved\n" + path.read_text())  # every line and id of the file moves
    return f"a line inserted at the top of {len(names)} files"


def _nothing(tree: Path, rng: random.Random) -> str:
    return "nothing changed"


EDITS = {"one": _edit_one, "comment": _comment_one, "many": _edit_many, "nothing": _nothing}


@pytest.fixture()
def seed() -> int:
    return int(os.environ.get("CPQ_CRASH_SEED") or random.randrange(10**9))


def test_two_runs_at_once_answer_right_in_every_state_of_the_store(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    tree = _tree(tmp_path / "tree")
    xdg = tmp_path / "xdg"
    env = _env(xdg)
    steps = [
        ("empty store", None, ()),
        ("one edited file", "one", ()),
        ("many edited files", "many", ()),
        ("a comment edit", "comment", ()),
        ("two contexts at once", None, ("--elements", "16M")),
        ("nothing changed", None, ()),
    ]
    for what, edit, other in steps:
        if edit is not None:
            what += ": " + EDITS[edit](tree, rng)
        extras: list[tuple[str, ...]] = [(), other]
        references = [_assess(tree, tmp_path / "xdg-reference", *e, "--no-cache")[0] for e in extras]
        procs = [
            subprocess.Popen(
                _command(tree, *e), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for e in extras
        ]
        outs = [p.communicate(timeout=300) for p in procs]
        for proc, (stdout, stderr), reference in zip(procs, outs, references, strict=True):
            assert proc.returncode == 0, f"seed {seed}, {what}: exit {proc.returncode}\n{stderr[-3000:]}"
            report = _report(stdout)
            assert report == reference, f"seed {seed}, {what}:\n{_mismatch(report, reference)}\n{stderr}"
        for extra, reference in zip(extras, references, strict=True):
            report, stderr, _ = _assess(tree, xdg, *extra)
            assert report == reference, (
                f"seed {seed}, the run after two at once ({what}):\n{_mismatch(report, reference)}\n{stderr}"
            )


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate(timeout=60)


def test_a_run_killed_at_a_random_moment_leaves_a_store_the_next_runs_use_or_rebuild(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    tree = _tree(tmp_path / "tree")
    xdg = tmp_path / "xdg"
    history: list[str] = []
    for round_ in range(KILLS):
        edit = rng.choice(sorted(EDITS)) if round_ else "nothing"  # the first killed run is cold
        what = EDITS[edit](tree, rng)
        reference, _, usual = _assess(tree, tmp_path / "xdg-reference", "--no-cache")
        delay = rng.uniform(0, usual)
        # Its own process group: the kill takes extraction workers down with it, as a crash would.
        proc = subprocess.Popen(
            _command(tree),
            env=_env(xdg),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        time.sleep(delay)
        finished = proc.poll() is not None
        _kill_group(proc)
        history.append(
            f"{what}; killed after {delay:.2f}s of {usual:.2f}s" + (" (it had finished)" if finished else "")
        )
        for attempt in ("the next run", "the run after it"):
            report, stderr, _ = _assess(tree, xdg)
            assert report == reference, (
                f"seed {seed}: {attempt} after a killed run differs from --no-cache\n"
                + "\n".join(f"  {i}. {h}" for i, h in enumerate(history, 1))
                + f"\n{_mismatch(report, reference)}\nstderr:\n{stderr[-2000:]}"
            )


def test_a_query_beside_an_assess_of_an_edited_tree_answers_right(tmp_path: Path, seed: int) -> None:
    """`cpq query` saves results too (it reuses the assessment): it and an assess of the same
    edited tree at once, then the runs after them."""
    rng = random.Random(seed)
    tree = _tree(tmp_path / "tree")
    xdg = tmp_path / "xdg"
    _assess(tree, xdg)
    for _ in range(3):
        what = _edit_one(tree, rng)
        reference, _, _ = _assess(tree, tmp_path / "xdg-reference", "--no-cache")
        expected = sorted((f["code"], f["file"], f["line"], f["function"]) for f in reference["findings"])
        query = [sys.executable, "-m", "cpq", "query", "finding(C, F, L, Fn)", str(tree), "--format", "json"]
        procs = [
            subprocess.Popen(c, env=_env(xdg), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for c in (_command(tree), query)
        ]
        (assessed, assess_err), (queried, query_err) = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], f"seed {seed}, {what}:\n{assess_err}\n{query_err}"
        report = _report(assessed)
        assert report == reference, f"seed {seed}, {what}:\n{_mismatch(report, reference)}"
        rows = sorted((r["C"], r["F"], r["L"], r["Fn"]) for r in json.loads(queried))
        assert rows == expected, f"seed {seed}, {what}: the query's findings\n{rows}\n--no-cache:\n{expected}"
        again, stderr, _ = _assess(tree, xdg)
        assert again == reference, (
            f"seed {seed}, the run after ({what}):\n{_mismatch(again, reference)}\n{stderr}"
        )
