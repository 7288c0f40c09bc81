"""The .cpq/ fact store: same findings cold, warm and without it; edits, removals, damage."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES

from cpq.assessment import assess
from cpq.context import Context
from cpq.store import FACTS_FILE, open_store


def _key(result) -> list[tuple]:
    return [(f.code, f.file, f.line, f.function, f.hot, f.counts) for f in result.findings]


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    for name in ["particle_loop.py", "sync_in_loop.py", "wave_equation.py", "refactor_only.py"]:
        shutil.copy(EXAMPLES / name, root / name)
    return root


def test_same_findings_cold_warm_and_without_cache(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    cold = assess(tree, ctx, use_cache=True)
    assert cold.cache_hits == 0 and not cold.reused_results
    assert (tree / ".cpq" / FACTS_FILE).exists()
    warm = assess(tree, ctx, use_cache=True)
    assert warm.reused_results
    uncached = assess(tree, ctx, use_cache=False)
    assert _key(cold) == _key(warm) == _key(uncached)
    assert cold.verdict == warm.verdict == uncached.verdict
    assert warm.files == cold.files and warm.lines == cold.lines


def test_an_edited_file_is_reparsed_and_the_rest_comes_from_the_cache(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    assess(tree, ctx, use_cache=True)
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "\n\ndef extra(a: np.ndarray):\n    return a.item()\n")
    edited = assess(tree, ctx, use_cache=True)
    assert not edited.reused_results
    assert edited.cache_hits == 3
    assert _key(edited) == _key(assess(tree, ctx, use_cache=False))


def test_other_context_does_not_reuse_results(tree: Path) -> None:
    assess(tree, Context.from_options(elements="20M"), use_cache=True)
    other = assess(tree, Context.from_options(elements="20M", gpus=4), use_cache=True)
    assert not other.reused_results
    assert other.cache_hits == 4  # the facts are still reused


def test_removed_files_leave_the_store(tree: Path) -> None:
    assess(tree, use_cache=True)
    (tree / "refactor_only.py").unlink()
    result = assess(tree, use_cache=True)
    assert "refactor_only.py" not in result.files
    store = open_store(tree / ".cpq")
    assert store is not None
    paths = {r[0] for r in store.con.execute("SELECT path FROM file_facts").fetchall()}
    store.close()
    assert "refactor_only.py" not in paths


def test_corrupted_store_is_rebuilt(tree: Path) -> None:
    first = assess(tree, use_cache=True)
    first.db.close()  # as a later process would find it: DuckDB shares an open file's instance
    (tree / ".cpq" / FACTS_FILE).write_bytes(b"this is not a duckdb file" * 100)
    for results in (tree / ".cpq").glob("results-*.duckdb"):
        results.write_bytes(b"garbage")
    again = assess(tree, use_cache=True)
    assert _key(again) == _key(first)
    assert assess(tree, use_cache=True).reused_results


def test_unwritable_cache_dir_falls_back_to_no_cache(tree: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    result = assess(tree, use_cache=True, cache_dir=blocker / "cache")
    assert result.findings and not result.reused_results


def test_cache_dir_option(tree: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    assess(tree, use_cache=True, cache_dir=elsewhere)
    assert (elsewhere / FACTS_FILE).exists()
    assert not (tree / ".cpq").exists()


def test_two_concurrent_runs_do_not_corrupt_the_store(tree: Path) -> None:
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "cpq", "assess", str(tree), "--format", "json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-500:] for o in outs]
    reports = [json.loads(o[0]) for o in outs]
    assert reports[0]["findings"] == reports[1]["findings"]
    again = json.loads(subprocess.run(cmd, capture_output=True, check=True).stdout)
    assert again["findings"] == reports[0]["findings"]
