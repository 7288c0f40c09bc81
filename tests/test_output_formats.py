"""`cpq assess` output formats as CI, code review and editors read them: concise (the default on
stdout), github, gitlab, junit, `--statistics`, several outputs in one run, and SARIF located
in the repository and in notebooks."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import jsonschema
import pytest
from conftest import EXAMPLES, TESTS
from typer.testing import CliRunner

from cpq.cli.app import app
from cpq.cli.outputs import DEFAULT_LIMIT
from cpq.report.github import escape_data, escape_property
from cpq.report.notebook_lines import NotebookLines
from cpq.report.places import repository_root

runner = CliRunner()
SARIF_SCHEMA = TESTS / "data" / "sarif-schema-2.1.0.json"
LISTED = ("BLOCKS", "REFACTOR", "INFO")

# A finding line of the concise format: path:line:col: CODE title, or in a notebook
# path:cell N:line M: CODE title.
CONCISE_LINE = re.compile(
    r"^(?P<path>.+?):(?:(?P<line>\d+):(?P<col>\d+)|cell (?P<cell>\d+):line (?P<cl>\d+)): "
    r"(?P<code>[A-Z]\d{3}) (?P<title>\S.*)$"
)

# GitHub's workflow command grammar (docs "Workflow commands for GitHub Actions", and
# @actions/core's command.ts): ::name key=value,key=value::message, where values have `%`,
# CR, LF, `:` and `,` escaped and the message `%`, CR and LF.
_ESCAPED = r"(?:[^%\r\n]|%25|%0D|%0A)"
_PROPERTY_VALUE = r"(?:[^%\r\n:,]|%25|%0D|%0A|%3A|%2C)*"
GITHUB_COMMAND = re.compile(
    rf"^::(?P<name>error|warning|notice)"
    rf"(?: (?P<props>[A-Za-z]+={_PROPERTY_VALUE}(?:,[A-Za-z]+={_PROPERTY_VALUE})*))?"
    rf"::(?P<message>{_ESCAPED}*)$"
)

# GitLab Code Quality, from the fields GitLab documents as required ("Code Quality report
# format": description, check_name, fingerprint, severity, location.path, location.lines.begin).
GITLAB_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "minLength": 1},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string", "minLength": 1, "not": {"pattern": "^/"}},
                    "lines": {
                        "type": "object",
                        "required": ["begin"],
                        "properties": {"begin": {"type": "integer", "minimum": 1}},
                    },
                },
            },
        },
    },
}

SYNC = """import numpy as np


def step_{i}():
    a = np.ones(1000)
    total = 0.0
    for _ in range(10):
        total += a.sum().item()
    return total
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fact store for the module's runs on the examples: after the first, they read it."""
    return tmp_path_factory.mktemp("store")


def _run(*args: str | Path) -> object:
    return runner.invoke(app, ["assess", *map(str, args)])


def _report(path: Path, *args: str | Path) -> dict:
    out = _run(path, *(args or ["--no-cache"]), "-f", "json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _listed(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["kind"] in LISTED and not f["suppressed"]]


def _sarif_validator() -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text(encoding="utf-8")))


def _notebook(path: Path) -> None:
    """A notebook as Jupyter writes it (indented JSON, a source line per string), with a hot
    R104 at cell 3, line 4."""
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# A notebook\n", "with two lines\n"]},
        {
            "cell_type": "code",
            "execution_count": 1,
            "metadata": {},
            "outputs": [],
            "source": ["import numpy as np\n", "A = np.ones((64, 64))"],
        },
        {
            "cell_type": "code",
            "execution_count": 2,
            "metadata": {},
            "outputs": [],
            "source": [
                "total = []\n",
                "for i in range(100):\n",
                "    v = A @ A\n",
                "    total.append(v.sum().item())",
            ],
        },
    ]
    nb = {
        "cells": cells,
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1) + "\n")


# --------------------------------------------------------------------------- concise


def test_default_output_is_concise_lines_and_a_verdict_paragraph(store: Path) -> None:
    report = _report(EXAMPLES, "--cache-dir", store)
    out = _run(EXAMPLES, "--cache-dir", store)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    listed = _listed(report)
    shown = min(len(listed), DEFAULT_LIMIT)
    finding_lines, rest = lines[:shown], lines[shown:]
    assert all(CONCISE_LINE.match(line) for line in finding_lines), finding_lines
    if len(listed) > DEFAULT_LIMIT:
        assert rest[0].startswith(f"… and {len(listed) - DEFAULT_LIMIT} more")
        rest = rest[1:]
    assert rest[0] == "" and rest[1].startswith(f"{report['verdict']} — Rule ")
    paragraph = " ".join(rest[1:])
    assert "-o report.md" in paragraph and "--format md" in paragraph
    counts = {kind: sum(1 for f in report["findings"] if f["kind"] == kind) for kind in LISTED}
    assert f"{counts['BLOCKS']} BLOCKS, {counts['REFACTOR']} REFACTOR, {counts['INFO']} INFO" in paragraph
    # The examples tree: 40 findings to list and a three-line summary, 44 lines in all.
    assert len(listed) == 40 and len(lines) == 44
    # Paths as PATH was given, the column where the line's code starts.
    source = (EXAMPLES / "particle_loop.py").read_text().splitlines()
    column = len(source[7]) - len(source[7].lstrip()) + 1
    assert (
        f"{EXAMPLES / 'particle_loop.py'}:8:{column}: R101 Python loop over array elements or rows" in lines
    )


def test_default_output_keeps_the_findings_that_weigh_most(tmp_path: Path) -> None:
    for i in range(DEFAULT_LIMIT + 5):
        (tmp_path / f"m{i:02}.py").write_text(SYNC.format(i=i))
    (tmp_path / "z_module.py").write_text(
        "import numpy as np\n\ndef hot(a):\n    for i in range(10):\n        a[i] = a[i + 1]\n"
    )
    full = _run(tmp_path, "--no-cache", "--format", "concise")
    all_lines = [line for line in full.stdout.splitlines() if CONCISE_LINE.match(line)]
    assert len(all_lines) > DEFAULT_LIMIT
    default = _run(tmp_path, "--no-cache").stdout.splitlines()
    shown = [line for line in default if CONCISE_LINE.match(line)]
    assert len(shown) == DEFAULT_LIMIT
    assert shown == sorted(shown, key=lambda line: all_lines.index(line))  # in file order
    more = default[DEFAULT_LIMIT]
    assert (
        more.startswith(f"… and {len(all_lines) - DEFAULT_LIMIT:,} more (") and "`--format concise`" in more
    )
    kinds = [CONCISE_LINE.match(line)["code"] for line in shown]  # type: ignore[index]
    assert all(code.startswith("R1") for code in kinds)  # BLOCKS before INFO


def test_concise_notebook_findings_by_cell_and_line(tmp_path: Path) -> None:
    _notebook(tmp_path / "analysis.ipynb")
    out = _run(tmp_path, "--no-cache", "-f", "concise")
    assert out.exit_code == 0, out.output
    assert (
        f"{tmp_path / 'analysis.ipynb'}:cell 3:line 4: R104 host materialization in a hot loop" in out.stdout
    )


def test_markdown_on_request_and_with_o(tmp_path: Path) -> None:
    md = _run(EXAMPLES / "wave_equation.py", "--no-cache", "--format", "md").stdout
    assert md.startswith("# ") and "## Verdict" in md
    target = tmp_path / "report.md"
    assert _run(EXAMPLES / "wave_equation.py", "--no-cache", "-o", target).exit_code == 0
    written = target.read_text()
    # The same report but for the time it took (the header's "in 0.41 s").
    timing = re.compile(r" in \d+\.\d+ s ")
    assert timing.sub(" in T s ", written) == timing.sub(" in T s ", md)


# --------------------------------------------------------------------------- github


def test_github_format_lines_are_workflow_commands(store: Path) -> None:
    report = _report(EXAMPLES, "--cache-dir", store)
    out = _run(EXAMPLES, "--cache-dir", store, "--format", "github")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    matches = [GITHUB_COMMAND.match(line) for line in lines]
    assert all(matches), [line for line, m in zip(lines, matches, strict=True) if not m]
    *findings, verdict = matches
    listed = _listed(report)
    assert len(findings) == len(listed)
    expected = {"BLOCKS": "error", "REFACTOR": "warning", "INFO": "notice"}
    top = repository_root(EXAMPLES)
    prefix = EXAMPLES.relative_to(top).as_posix() + "/" if top is not None else ""
    for m, f in zip(findings, listed, strict=True):  # both in file, line, code order
        props = dict(item.split("=", 1) for item in m["props"].split(","))
        assert m["name"] == expected[f["kind"]]
        assert props["file"] == prefix + f["file"] and props["line"] == str(f["line"])
        assert props["title"] == f["code"] and int(props["col"]) >= 1
    assert verdict["name"] == "notice" and verdict["message"].startswith(report["verdict"])


def test_github_escaping_follows_the_toolkit() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a,b:c%d\n") == "a%2Cb%3Ac%25d%0A"
    assert escape_data("a,b:c") == "a,b:c"


def test_github_verdict_is_an_error_when_it_fails_the_run() -> None:
    out = _run(EXAMPLES / "mpi_halo.py", "--no-cache", "-f", "github", "--fail-on", "significant")
    assert out.exit_code == 1
    assert out.stdout.splitlines()[-1].startswith("::error title=cpq verdict::")


# --------------------------------------------------------------------------- gitlab


def test_gitlab_code_quality_report(store: Path) -> None:
    out = _run(EXAMPLES, "--cache-dir", store, "--format", "gitlab")
    assert out.exit_code == 0, out.output
    issues = json.loads(out.stdout)
    jsonschema.validate(issues, GITLAB_SCHEMA)
    assert len(issues) == len(_listed(_report(EXAMPLES, "--cache-dir", store)))
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    by_code = {i["check_name"]: i for i in issues}
    assert by_code["R104"]["severity"] == "critical"  # BLOCKS
    assert by_code["R201"]["severity"] == "major"  # REFACTOR
    assert by_code["R301"]["severity"] == "info"  # INFO


def test_gitlab_fingerprints_survive_lines_moving(tmp_path: Path) -> None:
    target = tmp_path / "solver.py"
    original = (EXAMPLES / "sync_in_loop.py").read_text()
    target.write_text(original)
    before = json.loads(_run(target, "--no-cache", "-f", "gitlab", "--elements", "20M").stdout)
    target.write_text("# a header comment\n\n\n" + original)
    after = json.loads(_run(target, "--no-cache", "-f", "gitlab", "--elements", "20M").stdout)
    assert before and [i["fingerprint"] for i in before] == [i["fingerprint"] for i in after]
    assert [i["location"]["lines"]["begin"] + 3 for i in before] == [
        i["location"]["lines"]["begin"] for i in after
    ]


# --------------------------------------------------------------------------- junit


def test_junit_report_structure(store: Path) -> None:
    report = _report(EXAMPLES, "--cache-dir", store)
    out = _run(EXAMPLES, "--cache-dir", store, "--format", "junit")
    assert out.exit_code == 0, out.output
    root = ET.fromstring(out.stdout.encode())
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    listed = _listed(report)
    assert len(cases) == len(listed) + 1 == int(suite.get("tests", ""))
    failing = [f for f in listed if f["kind"] in ("BLOCKS", "REFACTOR")]
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == len(failing) == int(suite.get("failures", ""))
    assert {c.find("failure").get("type") for c in failed} == {"BLOCKS", "REFACTOR"}  # type: ignore[union-attr]
    for case in cases[:-1]:
        assert case.get("file") and int(case.get("line", "0")) >= 1 and case.get("classname")
    verdict = cases[-1]
    assert verdict.get("name") == "verdict" and verdict.find("failure") is None
    assert verdict.findtext("system-out", "").startswith(report["verdict"])
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["verdict"] == report["verdict"]


def test_junit_verdict_fails_with_fail_on(store: Path) -> None:
    out = _run(EXAMPLES, "--cache-dir", store, "--format", "junit", "--fail-on", "light")
    assert out.exit_code == 1
    suite = ET.fromstring(out.stdout.encode()).find("testsuite")
    verdict = suite.findall("testcase")[-1]  # type: ignore[union-attr]
    assert verdict.get("name") == "verdict" and verdict.find("failure") is not None


# --------------------------------------------------------------------------- --statistics


def test_statistics_counts_per_code(store: Path) -> None:
    report = _report(EXAMPLES, "--cache-dir", store)
    out = _run(EXAMPLES, "--cache-dir", store, "--statistics")
    assert out.exit_code == 0, out.output
    rows = [line.split(None, 3) for line in out.stdout.splitlines()]
    counts = [int(count.replace(",", "")) for count, *_ in rows]
    assert counts == sorted(counts, reverse=True)
    expected: dict[str, int] = {}
    for f in report["findings"]:
        if not f["suppressed"]:
            expected[f["code"]] = expected.get(f["code"], 0) + 1
    assert {code: int(count) for count, code, _, _ in rows} == expected
    kinds = {f["code"]: f["kind"] for f in report["findings"]}
    assert all(kind == kinds[code] for _, code, kind, _ in rows)
    as_json = json.loads(_run(EXAMPLES, "--cache-dir", store, "--statistics", "-f", "json").stdout)
    assert [(r["code"], r["count"]) for r in as_json] == [(code, int(c)) for c, code, _, _ in rows]
    assert set(as_json[0]) == {"code", "kind", "title", "count"}


def test_statistics_with_a_report_format_is_a_usage_error(store: Path) -> None:
    out = _run(EXAMPLES, "--cache-dir", store, "--statistics", "-f", "sarif")
    assert out.exit_code == 2 and "--output-format sarif=PATH" in out.output
    assert len(out.output.strip().splitlines()) == 1


# --------------------------------------------------------------------------- several outputs


def test_several_outputs_in_one_run(tmp_path: Path) -> None:
    md, sarif, junit, gitlab = (tmp_path / n for n in ("report.md", "cpq.sarif", "cpq.xml", "cq.json"))
    out = _run(
        EXAMPLES,
        "--no-cache",
        "--output-format",
        f"md={md}",
        "--output-format",
        f"sarif={sarif}",
        "--output-format",
        f"JUnit={junit}",
        "--output-format",
        f"gitlab={gitlab}",
    )
    assert out.exit_code == 0, out.output
    assert CONCISE_LINE.match(out.stdout.splitlines()[0])  # stdout keeps its default
    assert "## What blocks (BLOCKS findings)" in md.read_text()
    log = json.loads(sarif.read_text())
    assert not list(_sarif_validator().iter_errors(log))
    assert ET.parse(junit).getroot().tag == "testsuites"
    jsonschema.validate(json.loads(gitlab.read_text()), GITLAB_SCHEMA)
    # One run: the same verdict everywhere.
    verdict = log["runs"][0]["properties"]["verdict"]
    assert f"**{verdict}**" in md.read_text() and out.stdout.count(verdict) == 1


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--output-format", "md=/no/such/dir/r.md"], "no such folder: /no/such/dir"),
        (["-o", "/no/such/dir/r.md"], "no such folder: /no/such/dir"),
        (["--output-format", "html=r.html"], "unknown format 'html'"),
        (["--output-format", "report.md"], "give FORMAT=PATH"),
        (["--output-format", "md={tmp}"], "is a folder, not a file"),
        (["-o", "{tmp}/r.md", "--output-format", "sarif={tmp}/r.md"], "named for two outputs"),
    ],
)
def test_unwritable_outputs_are_refused_before_the_analysis(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(EXAMPLES / "sync_in_loop.py", tree)
    # A broken rules file: were the analysis started, its error would be what is said.
    bad_rules = tmp_path / "bad.dl"
    bad_rules.write_text("this is not datalog\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = _run(tree, "--rules", bad_rules, *argv)
    assert out.exit_code == 2
    assert out.output.count("\n") == 1 and needle in out.output, out.output
    assert not (tree / ".cpq").exists()


# --------------------------------------------------------------------------- SARIF locations


def _sarif(path: Path, *args: str) -> dict:
    out = _run(path, "--no-cache", "-f", "sarif", *args)
    assert out.exit_code == 0, out.output
    log = json.loads(out.stdout)
    errors = list(_sarif_validator().iter_errors(log))
    assert not errors, errors[:3]
    return log


@pytest.mark.parametrize("marker", ["folder", "file"])
def test_sarif_uris_are_relative_to_the_repository_root(tmp_path: Path, marker: str) -> None:
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    if marker == "folder":
        (repo / ".git").mkdir()
    else:  # a worktree or submodule: .git is a file naming the real one
        (repo / ".git").write_text("gitdir: /elsewhere/.git/worktrees/repo\n")
    shutil.copy(EXAMPLES / "sync_in_loop.py", repo / "src" / "pkg" / "solver.py")
    run = _sarif(repo / "src", "--elements", "20M")["runs"][0]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": repo.as_uri() + "/"}}
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run["results"]]
    assert locations and all(
        loc == {"uri": "src/pkg/solver.py", "uriBaseId": "%SRCROOT%"} for loc in locations
    )
    github = _run(repo / "src", "--no-cache", "-f", "github", "--elements", "20M").stdout
    assert "file=src/pkg/solver.py," in github
    gitlab = json.loads(_run(repo / "src", "--no-cache", "-f", "gitlab", "--elements", "20M").stdout)
    assert {i["location"]["path"] for i in gitlab} == {"src/pkg/solver.py"}


def test_sarif_uris_without_a_repository_are_relative_to_path(tmp_path: Path) -> None:
    if repository_root(tmp_path) is not None:
        pytest.skip("the temporary folder is inside a git work tree")
    (tmp_path / "pkg").mkdir()
    shutil.copy(EXAMPLES / "sync_in_loop.py", tmp_path / "pkg" / "solver.py")
    run = _sarif(tmp_path, "--elements", "20M")["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert uris == {"pkg/solver.py"}


def test_sarif_notebook_results_point_at_the_source_line_in_the_json(tmp_path: Path) -> None:
    path = tmp_path / "analysis.ipynb"
    _notebook(path)
    run = _sarif(tmp_path)["runs"][0]
    (r104,) = [r for r in run["results"] if r["ruleId"] == "R104"]
    location = r104["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].endswith("analysis.ipynb")
    line = location["region"]["startLine"]
    assert path.read_text().splitlines()[line - 1].strip() == '"    total.append(v.sum().item())"'
    assert set(location["region"]) == {"startLine"}  # no columns: the JSON line is escaped text
    assert r104["message"]["text"].startswith("cell 3:line 4: R104")
    assert r104["properties"]["cell"] == 3 and r104["properties"]["cellLine"] == 4
    github = _run(tmp_path, "--no-cache", "-f", "github").stdout
    assert f"file={path.name},line={line},title=R104::cell 3:line 4: " in github


def test_notebook_lines_follow_the_json_layout() -> None:
    text = json.dumps(
        {
            "cells": [
                {"cell_type": "code", "source": ["a = 1\r", "\nb = 2\n", "", "c = 3\n"]},
                {"cell_type": "code", "source": "x = 1\ny = 2\n"},
                {"cell_type": "markdown", "source": None},
            ]
        },
        indent=1,
    )
    lines = text.splitlines()
    nl = NotebookLines(text)
    first = nl.json_line(1, 1)
    assert first is not None and lines[first - 1].strip() == '"a = 1\\r",'
    assert nl.json_line(1, 2) == first + 1  # "\r" + "\n" across two strings: one break
    assert nl.json_line(1, 3) == first + 3  # past the empty string
    assert nl.json_line(1, 4) is None
    assert nl.json_line(2, 1) == nl.json_line(2, 2)  # one string: its line
    assert nl.json_line(3, 1) is None and NotebookLines("not json").json_line(1, 1) is None


def test_sarif_rules_link_their_catalogue_entry() -> None:
    rules = _sarif(EXAMPLES / "wave_equation.py")["runs"][0]["tool"]["driver"]["rules"]
    for rule in rules:
        uri = urlparse(rule["helpUri"])
        assert uri.scheme == "file"
        doc = Path(url2pathname(uri.path))
        assert doc.name == "doc.md" and doc.parent.name == rule["id"] and doc.is_file()


# --------------------------------------------------------------------------- NumPy


def _numpy_tree() -> Path | None:
    for candidate in (TESTS.parent / ".bench/trees/numpy", TESTS.parent.parent / "main/.bench/trees/numpy"):
        if candidate.is_dir():
            return candidate
    return None


@pytest.mark.skipif(_numpy_tree() is None, reason="no NumPy tree under .bench/trees (bench/ fetches it)")
def test_default_output_on_numpy_is_under_60_lines(tmp_path: Path) -> None:
    out = _run(_numpy_tree(), "--cache-dir", tmp_path / "store")  # type: ignore[arg-type]
    assert out.exit_code == 0, out.output[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) < 60, len(lines)
    assert "more (" in out.stdout and "Full report:" in out.stdout
