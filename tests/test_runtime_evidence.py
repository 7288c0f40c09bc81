"""Runtime evidence joined to the rules (rules/runtime.dl): a profile of a real run changes which
findings count exactly where it says code never ran, Gate 5 is judged on the measured time,
and the Doctor's report confirms findings or adds what static analysis cannot see."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner, Result

from cpq.cli.app import app

pytest.importorskip("numpy")

# A driver for the public example sync_in_loop.py: it runs `descend` (R104 at line 12) and
# `final_report`, never `power_iteration` (R105 at line 24).
DRIVER = """\
import numpy as np
from sync_in_loop import descend, final_report

A = np.random.default_rng(0).standard_normal((200, 50))
b = np.ones(200)
x, history = descend(A, b, 1e-3, 300)
print(final_report(x))
"""

# A program whose loop runs over what an opaque loader returns: no rule can tell it is an array.
OPAQUE_LOOP = """\
import numpy as np
from loader import load


def total(path):
    data = load(path)
    acc = np.zeros(3)
    for row in data:
        acc += row
    return acc
"""


def invoke(*args: object) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def report(*args: object) -> dict:
    result = invoke("assess", *args, "--format", "json", "--no-cache")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def finding(data: dict, code: str, line: int) -> dict:
    return next(f for f in data["findings"] if f["code"] == code and f["line"] == line)


def run_under_cprofile(tree: Path, script: str, text: str) -> Path:
    """Write `script` into `tree` and run it there under the real cProfile: the profile's path."""
    (tree / script).write_text(text)
    profile = tree.parent / f"{tree.name}-{script}.prof"
    subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), script],
        cwd=tree,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return profile


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example and its driver, run under the real cProfile: (tree, profile)."""
    tree = tmp_path_factory.mktemp("profiled")
    shutil.copy(EXAMPLES / "sync_in_loop.py", tree / "sync_in_loop.py")
    profile = run_under_cprofile(tree, "run.py", DRIVER)
    return tree, profile


def test_a_profile_uncounts_exactly_the_findings_in_code_that_never_ran(profiled: tuple[Path, Path]) -> None:
    tree, profile = profiled
    static = report(tree)
    measured = report(tree, "--profile", profile)
    before = {(f["code"], f["line"]): f["counts_for_verdict"] for f in static["findings"]}
    after = {(f["code"], f["line"]): f["counts_for_verdict"] for f in measured["findings"]}
    changed = {key for key in before if before[key] != after[key]}
    # Exactly the findings in power_iteration (lines 17-27), which never ran.
    assert ("R105", 24) in changed and all(17 <= line <= 27 for _, line in changed)
    assert {key for key, counts in before.items() if counts and 17 <= key[1] <= 27} == changed
    r105 = finding(measured, "R105", 24)
    assert r105["runtime"]["profile"] == "never-ran"
    r104 = finding(measured, "R104", 12)
    assert r104["counts_for_verdict"] and r104["runtime"]["profile"] in ("measured-hot", "ran")
    assert r104["runtime"]["share"] > 0
    # The finding in measured-hot code is listed first.
    blocks = [f for f in measured["findings"] if f["kind"] == "BLOCKS"]
    assert [f["code"] for f in blocks] == ["R104", "R105"]
    evidence = measured["runtime_evidence"]["profile"]
    assert evidence["kind"] == "cprofile" and evidence["unit"] == "us" and evidence["total"] > 0
    assert measured["runtime_evidence"]["doctor"] is None


def test_gate_5_gets_a_measured_status_with_the_share(profiled: tuple[Path, Path]) -> None:
    tree, profile = profiled
    static = report(tree)
    gate5 = next(g for g in static["gates"] if g["gate"] == 5)
    assert "needs a profile" in gate5["reason"] or gate5["status"] == "pass"
    measured = report(tree, "--profile", profile)
    gate5 = next(g for g in measured["gates"] if g["gate"] == 5)
    assert gate5["status"] in ("pass", "uncertain", "fail")
    assert (
        gate5["reason"].startswith("measured: ")
        and "% of the profiled run at host touchpoints" in gate5["reason"]
    )
    shares = measured["runtime_evidence"]["profile"]["shares"]
    assert 0 <= shares["host"] <= 1 and shares["assessed_code"] > 0


def test_the_report_says_what_was_measured_and_what_was_guessed(profiled: tuple[Path, Path]) -> None:
    tree, profile = profiled
    md = invoke("assess", tree, "--profile", profile, "--format", "md", "--no-cache").stdout
    assert f"Measured by the profile {profile}" in md
    assert "Everything else is read from the code, not measured." in md
    assert "(never ran in the profile: not counted)" in md
    plain = invoke("assess", tree, "--format", "md", "--no-cache").stdout
    assert "Nothing was measured: hot paths are inferred from the code" in plain
    concise = invoke("assess", tree, "--profile", profile, "--format", "concise", "--no-cache").stdout
    assert "R105 branching on an array inside a loop [never ran in the profile: not counted]" in concise


def test_why_shows_the_profile_facts_behind_a_judgement(profiled: tuple[Path, Path]) -> None:
    tree, profile = profiled
    out = invoke("why", "R105", "sync_in_loop.py:24", tree, "--profile", profile, "--no-cache").stdout
    assert "never ran in the profiled run: it does not count for the verdict" in out
    assert "a cProfile profile: it lists every function the run called" in out
    assert "the profiled run never entered the code at :17" in out
    gate = invoke("why", "gate", "5", tree, "--profile", profile, "--no-cache").stdout
    assert "measured:" in gate


def test_a_function_the_run_called_over_and_over_is_hot(tmp_path: Path) -> None:
    """A callback the call graph cannot see being called in a loop: the profile says it was."""
    (tmp_path / "model.py").write_text(
        "import numpy as np\n\n\ndef rhs(t, y):\n    k = float(np.sum(y))\n    return -k * y\n"
    )
    profile = run_under_cprofile(
        tmp_path,
        "drive.py",
        "import numpy as np\nfrom model import rhs\n\nhandlers = {'f': rhs}\n"
        "y = np.ones(4)\nfor t in range(300):\n    y = y + 1e-3 * handlers['f'](t, y)\n",
    )
    static = report(tmp_path)
    assert not any(f["code"] == "R104" and f["file"] == "model.py" for f in static["findings"])
    measured = report(tmp_path, "--profile", profile)
    r104 = finding(measured, "R104", 5)
    assert r104["hot"] and r104["counts_for_verdict"]


def test_a_profile_of_an_edited_file_does_not_say_what_never_ran(
    profiled: tuple[Path, Path], tmp_path: Path
) -> None:
    tree, profile = profiled
    edited = tmp_path / "tree"
    shutil.copytree(tree, edited)
    text = (edited / "sync_in_loop.py").read_text()
    (edited / "sync_in_loop.py").write_text("\n\n" + text)  # every function moves two lines down
    measured = report(edited, "--profile", profile)
    assert measured["runtime_evidence"]["profile"]["stale_files"] == ["sync_in_loop.py"]
    assert all(f.get("runtime", {}).get("profile") != "never-ran" for f in measured["findings"])


def _speedscope(tree: Path) -> dict:
    path = str(tree / "sync_in_loop.py")
    frames = [
        {"name": "<module> (run.py:6)", "file": str(tree / "run.py"), "line": 6},
        {"name": "descend (sync_in_loop.py:12)", "file": path, "line": 12},
        {"name": "descend (sync_in_loop.py:9)", "file": path, "line": 9},
        {
            "name": "dot (numpy/_core/multiarray.py:1)",
            "file": "/site-packages/numpy/_core/multiarray.py",
            "line": 1,
        },
    ]
    return {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": "py-spy@0.3.14",
        "name": "run.py",
        "activeProfileIndex": 0,
        "shared": {"frames": frames},
        "profiles": [
            {
                "type": "sampled",
                "name": "MainThread",
                "unit": "none",
                "startValue": 0,
                "endValue": 10,
                "samples": [[0, 1], [0, 1], [0, 1, 3], [0, 2], [0]],
                "weights": [1, 1, 1, 1, 6],
            }
        ],
    }


def test_a_sampled_profile_measures_lines_and_never_claims_code_never_ran(
    profiled: tuple[Path, Path], tmp_path: Path
) -> None:
    tree, _ = profiled
    profile = tmp_path / "run.speedscope.json"
    profile.write_text(json.dumps(_speedscope(tree)))
    measured = report(tree, "--profile", profile)
    r104 = finding(measured, "R104", 12)
    assert r104["runtime"]["profile"] == "measured-hot" and r104["runtime"]["share"] == pytest.approx(0.3)
    # power_iteration was not sampled: a sampler may miss code, so it still counts.
    assert finding(measured, "R105", 24)["counts_for_verdict"]
    assert measured["runtime_evidence"]["profile"]["kind"] == "speedscope"


def _doctor_entry(path: Path, line: int, description: str, source: str) -> dict:
    """One diagnostic as cupynumeric/_array/doctor.py (nvidia-cupynumeric 26.6.1) writes it."""
    return {
        "filename": str(path),
        "lineno": line,
        "traceback": "",
        "source": source,
        "description": description,
        "reference": "https://docs.nvidia.com/cupynumeric/latest/user/practices.html",
    }


GATHER = (
    "entire cuPyNumeric array is being gathered into one memory, and blocking on related outstanding "
    "asynchronous work"
)
ITER = "iterating over a cuPyNumeric array with __iter__ is slow; use vectorized operations instead"
ADVANCED = "use of advanced indexing can be slow in cuPyNumeric"


def test_the_doctor_confirms_a_static_r104_and_adds_what_static_analysis_misses(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(EXAMPLES / "sync_in_loop.py", tree / "sync_in_loop.py")
    (tree / "totals.py").write_text(OPAQUE_LOOP)
    static = report(tree)
    assert not any(f["file"] == "totals.py" and f["kind"] == "BLOCKS" for f in static["findings"])
    doctor = tmp_path / "doctor-report.json"
    doctor.write_text(
        json.dumps(
            [
                _doctor_entry(tree / "sync_in_loop.py", 12, GATHER, "loss = np.dot(r, r).item()"),
                _doctor_entry(tree / "totals.py", 8, ITER, "for row in data:"),
                _doctor_entry(tree / "totals.py", 9, ADVANCED, "acc += row"),
                _doctor_entry(Path("/opt/conda/lib/python3.11/site-packages/other.py"), 3, ADVANCED, "x[i]"),
            ]
        )
        + "\n"
    )
    measured = report(tree, "--doctor", doctor)
    r104 = finding(measured, "R104", 12)
    assert r104["runtime"]["doctor"] == "confirmed" and r104["runtime"]["doctor_checks"] == ["array-gather"]
    added = finding(measured, "R103", 8)
    assert (
        added["file"] == "totals.py" and added["runtime"]["doctor"] == "added" and added["counts_for_verdict"]
    )
    evidence = measured["runtime_evidence"]["doctor"]
    assert evidence["diagnostics"] == 4 and evidence["confirmed"] == 1 and evidence["added"] == 1
    assert evidence["without_code"] == [
        {"check": "advanced-indexing", "file": "totals.py", "line": 9, "description": ADVANCED}
    ]
    assert [e["check"] for e in evidence["not_assessed"]] == ["advanced-indexing"]
    gate6 = next(g for g in measured["gates"] if g["gate"] == 6)
    assert gate6["status"] == "pass" and "the cuPyNumeric Doctor ran" in gate6["reason"]
    # The extra BLOCKS site moves the count the verdict is made from.
    assert measured["verdict"] != static["verdict"] or measured["verdict"] == "SIGNIFICANT REFACTOR"
    why = invoke("why", "R103", "totals.py:8", tree, "--doctor", doctor, "--no-cache").stdout
    assert "seen at runtime by the Doctor" in why or "the Doctor's iter check" in why
    sarif = json.loads(invoke("assess", tree, "--doctor", doctor, "--format", "sarif", "--no-cache").stdout)
    props = [r["properties"] for r in sarif["runs"][0]["results"] if r["ruleId"] == "R104"]
    assert props and props[0]["doctor"] == "confirmed"


def test_a_clean_doctor_run_passes_gate_6(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "sync_in_loop.py", tmp_path / "sync_in_loop.py")
    doctor = tmp_path.parent / f"{tmp_path.name}-doctor.json"
    doctor.write_text("[]\n")
    gate6 = next(g for g in report(tmp_path, "--doctor", doctor)["gates"] if g["gate"] == 6)
    assert gate6["status"] == "pass"


@pytest.mark.parametrize(
    ("option", "content"),
    [
        ("--profile", b""),
        ("--profile", b"\x00\x01garbage"),
        ("--profile", b'{"not": "a profile"}'),
        ("--doctor", b"not json"),
        ("--doctor", b'[{"filename": "a.py", "lineno": "x"}]'),
        ("--doctor", b'{"filename": "a.py"}'),
    ],
)
def test_a_malformed_file_is_one_line_and_exit_2(tmp_path: Path, option: str, content: bytes) -> None:
    shutil.copy(EXAMPLES / "sync_in_loop.py", tmp_path / "sync_in_loop.py")
    bad = tmp_path.parent / f"{tmp_path.name}.bad"
    bad.write_bytes(content)
    result = subprocess.run(
        [sys.executable, "-m", "cpq", "assess", str(tmp_path), option, str(bad), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cpq: {option}: {bad}: ")


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "sync_in_loop.py", tmp_path / "sync_in_loop.py")
    result = invoke("assess", tmp_path, "--profile", tmp_path / "nope.prof", "--no-cache")
    assert result.exit_code == 2
    assert "--profile" in result.output and "nope.prof" in result.output


def test_saved_results_are_never_reused_across_evidence(profiled: tuple[Path, Path], tmp_path: Path) -> None:
    tree, profile = profiled
    cache = tmp_path / "cache"

    def counted(*extra: object) -> bool:
        result = invoke("assess", tree, "--format", "json", "--cache-dir", cache, *extra)
        assert result.exit_code == 0, result.output
        return finding(json.loads(result.stdout), "R105", 24)["counts_for_verdict"]

    assert counted()
    assert not counted("--profile", profile)
    assert counted()  # the cached results of the run without a profile, not the last one


def gate(data: dict, number: int) -> dict:
    return next(g for g in data["gates"] if g["gate"] == number)


def test_gate_5_fails_when_the_run_is_spent_at_host_touchpoints(tmp_path: Path) -> None:
    profile = run_under_cprofile(
        tmp_path,
        "dump.py",
        "import numpy as np\n\n\ndef main():\n    a = np.random.default_rng(0).standard_normal((300, 20))\n"
        "    for i in range(60):\n        np.savetxt('out.txt', a * i)\n\n\nmain()\n",
    )
    measured = report(tmp_path, "--profile", profile)
    assert gate(measured, 5)["status"] == "fail"
    assert measured["runtime_evidence"]["profile"]["shares"]["host"] >= 0.5


def test_gate_5_passes_on_array_work_and_leaves_the_imports_out(tmp_path: Path) -> None:
    profile = run_under_cprofile(
        tmp_path,
        "work.py",
        "import numpy as np\n\n\ndef main():\n    a = np.ones((400, 400))\n    for _ in range(40):\n"
        "        a = np.sqrt(np.dot(a, a) / 400.0)\n    return a\n\n\nmain()\n",
    )
    measured = report(tmp_path, "--profile", profile)
    assert gate(measured, 5)["status"] == "pass"
    # Loading NumPy is not the workload: the measured time is less than the whole run.
    totals = "work_total(T), profile_run(_, _, R)"
    query = invoke("query", totals, tmp_path, "--profile", profile, "--no-cache")
    assert query.exit_code == 0, query.output
    work, run = (int(x) for x in query.stdout.splitlines()[2].split())
    assert 0 < work < run


def test_the_call_graph_of_a_cprofile_run_is_read(profiled: tuple[Path, Path]) -> None:
    """The callers pstats keeps become profile_call rows: descend's calls come from run.py's top level."""
    from cpq.runtime import read_profile

    _, profile = profiled
    read = read_profile(profile)
    callers = {(c[5], c[3].rsplit("/", 1)[-1]) for c in read.calls if c[2] == "descend"}
    assert callers == {("<module>", "run.py")}
    descend = next(row for row in read.functions if row[2] == "descend")
    edge = next(c for c in read.calls if c[2] == "descend")
    assert edge[6] == descend[3] == 1 and edge[8] == descend[5]


ITEM_OPS = "multiple scalar item accesses repeated on the same line"


def test_the_doctor_confirms_a_loop_finding_from_any_line_of_its_loop(tmp_path: Path) -> None:
    """R101 cites the element write; the Doctor's repeated item access may be another line of the loop."""
    (tmp_path / "smooth.py").write_text(
        "import numpy as np\n\n\ndef smooth(a):\n    out = np.zeros_like(a)\n"
        "    for i in range(1, a.shape[0] - 1):\n        left = a[i - 1]\n"
        "        out[i] = (left + a[i] + a[i + 1]) / 3.0\n    return out\n"
    )
    static = report(tmp_path)
    r101 = [f for f in static["findings"] if f["code"] == "R101"]
    assert [f["line"] for f in r101] == [8]
    doctor = tmp_path.parent / f"{tmp_path.name}-doctor.json"
    doctor.write_text(json.dumps([_doctor_entry(tmp_path / "smooth.py", 7, ITEM_OPS, "left = a[i - 1]")]))
    measured = report(tmp_path, "--doctor", doctor)
    confirmed = finding(measured, "R101", 8)
    assert confirmed["runtime"]["doctor"] == "confirmed"
    assert not [f for f in measured["findings"] if f["code"] == "R101" and f["line"] == 7]
    assert measured["runtime_evidence"]["doctor"]["added"] == 0


MPI = (
    "mpi4py is imported in this application; using mpi4py with cuPyNumeric is not permitted because "
    "Legate manages its own communication layer"
)


def test_the_mpi4py_check_confirms_the_import_wherever_the_doctor_saw_it(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "mpi_halo.py", tmp_path / "mpi_halo.py")
    static = report(tmp_path)
    r108 = [f for f in static["findings"] if f["code"] == "R108"]
    assert r108
    array_line = next(f["line"] for f in static["findings"] if f["kind"] == "SCALES")
    doctor = tmp_path.parent / f"{tmp_path.name}-doctor.json"
    doctor.write_text(json.dumps([_doctor_entry(tmp_path / "mpi_halo.py", array_line, MPI, "")]))
    measured = report(tmp_path, "--doctor", doctor)
    after = [f for f in measured["findings"] if f["code"] == "R108"]
    assert [f["line"] for f in after] == [f["line"] for f in r108]
    assert all(f["runtime"]["doctor"] == "confirmed" for f in after)


def test_paths_are_matched_under_the_root_that_holds_the_tree(tmp_path: Path) -> None:
    """A run elsewhere (/scratch/me/repo) matches by the ends of its paths; another package's
    __init__.py, which ends like the tree's own, is not the tree's."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("__init__.py", "solver.py", "util.py"):
        (tree / name).write_text("import numpy as np\n\n\ndef f(a):\n    return np.sum(a)\n")
    frames = [
        {"name": "f", "file": f"/scratch/me/repo/{name}", "line": 5}
        for name in ("__init__.py", "solver.py", "util.py")
    ]
    frames.append({"name": "g", "file": "/usr/lib/python3/site-packages/other/__init__.py", "line": 5})
    profile = tmp_path / "run.json"
    profile.write_text(
        json.dumps(
            {
                "$schema": "https://www.speedscope.app/file-format-schema.json",
                "shared": {"frames": frames},
                "profiles": [
                    {
                        "type": "sampled",
                        "unit": "none",
                        "startValue": 0,
                        "endValue": 4,
                        "samples": [[0], [1], [2], [3]],
                        "weights": [1, 1, 1, 1],
                    }
                ],
            }
        )
    )
    result = invoke(
        "query", "runtime_file(P, F)", tree, "--profile", profile, "--no-cache", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    rows = {(row["P"], row["F"]) for row in json.loads(result.stdout)}
    assert rows == {(f"/scratch/me/repo/{name}", name) for name in ("__init__.py", "solver.py", "util.py")}
