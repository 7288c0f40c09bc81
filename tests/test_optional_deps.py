"""pyarrow and NumPy are never needed, and lz4 (the fact store's codec, a dependency) can be
missing: `cpq assess` without them reports what it reports with them, on the path a large tree
takes (extraction workers, facts loaded as column batches, store entries written as one), and
uses a fact store that a run with lz4 wrote."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES

# Runs `cpq` with the thresholds of a large tree lowered to nothing, so that a few example
# files take the large tree's path; with `--without`, pyarrow, NumPy and lz4 are as if not
# installed: importing them fails (None in sys.modules), and find_spec finds nothing.
_CPQ = """
import sys

if sys.argv[1] == "--without":
    sys.modules["pyarrow"] = sys.modules["numpy"] = sys.modules["lz4"] = None
del sys.argv[1]

import cpq.facts.packing
import cpq.facts.parallel
import cpq.pipeline.cache.facts_store

cpq.facts.packing.LIST_BATCH_VALUES = 0  # every batch of facts as a column batch
cpq.facts.parallel.PARALLEL_MIN_BYTES = 0  # extraction workers
cpq.pipeline.cache.facts_store.LIST_BATCH_BYTES = 0  # store entries as a column batch
from cpq.cli import run

sys.argv[0] = "cpq"
run()
"""


def _assess(tree: Path, optional: bool, *options: str) -> tuple[dict, str]:
    report = tree.parent / "report.json"
    flag = "--with" if optional else "--without"
    cmd = [sys.executable, "-c", _CPQ, flag, "-v", "assess", str(tree), "--format", "json", "-o", str(report)]
    done = subprocess.run([*cmd, *options], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(report.read_text())
    data.pop("stats", None)  # timings
    return data, done.stderr


@pytest.fixture()
def examples(tmp_path: Path) -> Path:
    root = tmp_path / "examples"
    root.mkdir()
    for path in sorted(EXAMPLES.glob("*.py")):
        shutil.copy(path, root / path.name)
    return root


@pytest.mark.parametrize("module", ["pyarrow", "numpy", "lz4.block"])
def test_the_blocker_blocks(module: str) -> None:
    probe = f"{_CPQ.split('import cpq')[0]}\nimport {module}\n"
    done = subprocess.run([sys.executable, "-c", probe, "--without"], capture_output=True, text=True)
    assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr


def test_without_pyarrow_numpy_and_lz4_the_findings_are_the_same(examples: Path) -> None:
    with_all, _ = _assess(examples, True, "--no-cache")
    without, _ = _assess(examples, False, "--no-cache")
    assert without == with_all
    assert with_all["findings"] and with_all["verdict"]


def test_without_lz4_the_store_works_and_reads_what_a_run_with_it_wrote(examples: Path) -> None:
    """A store written with lz4 is used without it: entries it cannot unpack are extracted
    again and replaced; the findings are those of a run without the store."""
    _, cold_log = _assess(examples, importlib.util.find_spec("lz4") is not None)
    edited_file = examples / "wave_equation.py"
    edited_file.write_text(edited_file.read_text() + "\nedited = 1\n")
    reference, _ = _assess(examples, False, "--no-cache")
    for results in (examples / ".cpq").glob("results-*"):  # facts from the store, not saved results
        results.unlink()
    from_store, log = _assess(examples, False)
    assert from_store == reference
    assert "(0 files from the cache)" in cold_log
    assert f"({len(list(examples.glob('*.py'))) - 1} files from the cache)" in log
