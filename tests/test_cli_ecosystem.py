"""The ecosystem features wired through `cpq assess`, as a user runs them."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import jsonschema
from conftest import EXAMPLES, SYNC_LOOP, write_notebook
from typer.testing import CliRunner

from cpq.cli.app import app

runner = CliRunner()
SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"


def _json(args: list[str]) -> dict:
    out = runner.invoke(app, [*args, "--format", "json", "--no-cache"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_sarif_output_validates_against_the_official_schema(tmp_path: Path) -> None:
    out = runner.invoke(app, ["assess", str(EXAMPLES), "--format", "sarif", "--no-cache"])
    assert out.exit_code == 0, out.output
    log = json.loads(out.stdout)
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.validate(log, schema)
    run = log["runs"][0]
    assert run["properties"]["verdict"] == "SIGNIFICANT REFACTOR"
    assert {r["ruleId"] for r in run["results"]} >= {"R104", "R101", "R108", "R201", "R301"}
    assert all(r["ruleId"][1] != "0" for r in run["results"])  # no SCALES results


def test_inline_suppression_is_excluded_from_the_verdict(tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text(SYNC_LOOP.format(comment=""))
    before = _json(["assess", str(plain), "--elements", "50M"])
    assert before["verdict"] == "LIGHT REFACTOR"
    quiet = tmp_path / "quiet.py"
    quiet.write_text(SYNC_LOOP.format(comment="  # cpq: ignore[R104] -- logged once per epoch"))
    after = _json(["assess", str(quiet), "--elements", "50M"])
    assert after["verdict"] == "READY"
    r104 = [f for f in after["findings"] if f["code"] == "R104"]
    assert r104 and all(f["suppressed"] for f in r104)
    assert after["suppressions"]["suppressed"] == 1
    md = runner.invoke(
        app, ["assess", str(quiet), "--elements", "50M", "--no-cache", "--show-suppressed", "-f", "md"]
    )
    assert "Suppressed findings: 1" in md.stdout and "R104 (descend)" in md.stdout


def test_unused_suppression_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("import numpy as np\n\nx = np.zeros(10)  # cpq: ignore[R105]\n")
    report = _json(["assess", str(path)])
    assert report["suppressions"]["unused"] == [{"file": "m.py", "line": 3, "codes": ["R105"]}]
    md = runner.invoke(app, ["assess", str(path), "--no-cache", "-f", "md"])
    assert "Unused suppressions (1)" in md.stdout


def test_notebook_hot_item_reported_at_its_cell(tmp_path: Path) -> None:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# A notebook\n"]},
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": 1,
            "outputs": [],
            "source": ["import numpy as np\n", "%matplotlib inline\n", "A = np.ones((64, 64))\n"],
        },
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": 2,
            "outputs": [],
            "source": [
                "total = []\n",
                "for i in range(100):\n",
                "    v = A @ A\n",
                "    total.append(v.sum().item())\n",
            ],
        },
    ]
    write_notebook(tmp_path / "analysis.ipynb", cells)
    report = _json(["assess", str(tmp_path)])
    r104 = [f for f in report["findings"] if f["code"] == "R104"]
    assert [f["location"] for f in r104] == ["analysis.ipynb:cell 3:line 4"]
    assert report["files"]["notebooks"] == ["analysis.ipynb"]
    md = runner.invoke(app, ["assess", str(tmp_path), "--no-cache"])
    assert "analysis.ipynb:cell 3:line 4" in md.stdout


def test_baseline_reports_only_new_findings_and_survives_edits(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(EXAMPLES / "particle_loop.py", tree / "particle_loop.py")
    base = tmp_path / "baseline.json"
    first = runner.invoke(app, ["assess", str(tree), "--no-cache", "--write-baseline", str(base)])
    assert first.exit_code == 0 and base.exists()
    # An unrelated edit moves every line down; the baseline still knows the old findings.
    path = tree / "particle_loop.py"
    path.write_text(
        "# a new header comment\n\n"
        + path.read_text()
        + textwrap.dedent("""

        def sync(a: np.ndarray):
            for x in range(10):
                print(float(a[x]))
        """)
    )
    report = _json(["assess", str(tree), "--baseline", str(base)])
    states = {
        (f["code"], f["function"]): f.get("baseline") for f in report["findings"] if f["kind"] != "SCALES"
    }
    assert states[("R101", "push")] == "unchanged"
    assert states[("R103", "kinetic")] == "unchanged"
    assert states[("R104", "sync")] == "new"
    md = runner.invoke(app, ["assess", str(tree), "--no-cache", "--baseline", str(base), "-f", "md"])
    assert "already recorded are not shown" in md.stdout
    blocks = md.stdout.split("## What blocks")[1].split("## What's fixable")[0]
    assert "R104" in blocks and "R101" not in blocks
    assert report["verdict"] == "SIGNIFICANT REFACTOR"  # computed on all findings


def test_pyproject_configuration_applies_and_command_line_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent("""
        [tool.cpq]
        elements = "20M"
        gpus = 2
        exclude = ["generated/"]
        ignore = ["R103"]
        per-file-ignores = {"legacy.py" = ["R101"]}
    """)
    )
    shutil.copy(EXAMPLES / "particle_loop.py", tmp_path / "legacy.py")
    shutil.copy(EXAMPLES / "particle_loop.py", tmp_path / "current.py")
    (tmp_path / "generated").mkdir()
    shutil.copy(EXAMPLES / "odd_apis.py", tmp_path / "generated" / "odd.py")
    report = _json(["assess", str(tmp_path)])
    assert report["context"]["elements"]["value"] == 20_000_000
    assert report["context"]["gpus"]["value"] == 2
    codes = {(f["code"], f["file"]) for f in report["findings"]}
    assert ("R101", "current.py") in codes and ("R101", "legacy.py") not in codes
    assert not any(code == "R103" for code, _ in codes)
    assert not any(file.startswith("generated/") for _, file in codes)
    overridden = _json(["assess", str(tmp_path), "--gpus", "4"])
    assert overridden["context"]["gpus"]["value"] == 4


def test_bad_configuration_is_a_one_line_usage_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.cpq]\nelemnts = 5\n")
    (tmp_path / "m.py").write_text("import numpy as np\n")
    out = runner.invoke(app, ["assess", str(tmp_path), "--no-cache"])
    assert out.exit_code == 2
    assert "elemnts" in out.output and "Traceback" not in out.output


def test_max_file_size(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text("x = 1\n" * 50_000)
    (tmp_path / "small.py").write_text("import numpy as np\n")
    report = _json(["assess", str(tmp_path), "--max-file-size", "100K"])
    assert [s["file"] for s in report["files"]["skipped"]] == ["big.py"]
    assert "too large" in report["files"]["skipped"][0]["reason"]
