"""Golden tests: every example of ../shared/examples (copied into tests/examples) gets the
verdict, findings, gates and API gaps its expected.json asks for."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import EXAMPLES, SHARED, context_options

from cpq.config.context import Context
from cpq.pipeline.assessment import assess

CASES = json.loads((EXAMPLES / "expected.json").read_text())["cases"]


def _matches(findings, code: str, func: str) -> bool:
    return any(
        f.code == code and (func == "*" or f.function == func or f.function.endswith("." + func))
        for f in findings
        if not f.suppressed
    )


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_example(case: dict) -> None:
    result = assess(EXAMPLES / case["file"], Context.from_options(**context_options(case["args"])))
    wanted = case["verdict"] if isinstance(case["verdict"], list) else [case["verdict"]]
    problems = []
    if result.verdict not in wanted:
        problems.append(f"verdict {result.verdict!r} != {wanted}")
    for code, func in case.get("required", []):
        if not _matches(result.findings, code, func):
            problems.append(f"missing {code}@{func}")
    for code, func in case.get("forbidden", []):
        if _matches(result.findings, code, func):
            problems.append(f"forbidden {code}@{func}")
    gates = {str(g.number): g.status for g in result.decision.gates}
    for number, status in case.get("gates", {}).items():
        if gates.get(number) != status:
            problems.append(f"gate {number} {gates.get(number)!r} != {status!r}")
    apis = {g.api for g in result.decision.api_gaps}
    for api in case.get("api_gaps", []):
        if api not in apis:
            problems.append(f"api gap {api} not listed")
    for api in case.get("api_gaps_absent", []):
        if api in apis:
            problems.append(f"api gap {api} listed")
    assert not problems, "; ".join(problems)


def test_grade_script_through_the_cli(tmp_path) -> None:
    """The project's grading script, run as a user would, scores every example."""
    cpq = shutil.which("cpq")
    command = cpq if cpq else f"{sys.executable} -m cpq"
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES.parent / "grade.py"),
            str(EXAMPLES / "expected.json"),
            str(EXAMPLES),
            "--cpq",
            command,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "forbidden hits 0" in proc.stdout


@pytest.mark.skipif(not (SHARED / "examples").is_dir(), reason="../shared is not beside the repo")
def test_examples_copy_is_in_sync_with_shared() -> None:
    shared = SHARED / "examples"
    for source in sorted(shared.iterdir()):
        if not source.is_file() or source.name.startswith("."):
            continue  # e.g. a .cpq/ fact store left by an assessment of the shared folder
        copy = EXAMPLES / source.name
        assert copy.exists(), f"{source.name} is missing from tests/examples: re-sync the copy"
        assert copy.read_bytes() == source.read_bytes(), f"{source.name} differs: re-sync"
