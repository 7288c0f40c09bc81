"""The modules that fit cpq into a team's tools: SARIF, [tool.cpq], inline suppressions,
baselines, notebooks, the progress bar and the pre-commit hook. Each is tested on its own,
on real files (the examples, temporary projects) rather than on mocks."""

from __future__ import annotations

import ast
import io
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from conftest import EXAMPLES, TESTS
from hypothesis import given, settings
from hypothesis import strategies as st

from cpq.config.context import Context
from cpq.config.project import Config, ConfigError, config_for, find_pyproject, load_config
from cpq.config.suppress import Suppression, find_suppression, match_suppressions, parse_suppressions
from cpq.facts.notebook import NotebookError, notebook_to_source
from cpq.pipeline.assessment import Assessment, assess
from cpq.pipeline.progress import Progress
from cpq.report.baseline import (
    SCHEMA as BASELINE_SCHEMA,
)
from cpq.report.baseline import (
    Baseline,
    BaselineError,
    fingerprint,
    load_baseline,
    normalise_line,
    write_baseline,
)
from cpq.report.places import repository_root
from cpq.report.sarif import LEVELS, rule_name, sarif_report
from cpq.rules.catalogue import catalogue_rows
from cpq.rules.registry import code_doc, registry

SARIF_SCHEMA = TESTS / "data" / "sarif-schema-2.1.0.json"
REPO = TESTS.parent


def _assess(path: Path, **options: object) -> Assessment:
    return assess(path, Context.from_options(**options))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def sync_loop() -> Assessment:
    return _assess(EXAMPLES / "sync_in_loop.py", elements="20M")


@pytest.fixture(scope="module")
def examples_tree() -> Assessment:
    return _assess(EXAMPLES, elements="50M", gpus=4)


# --------------------------------------------------------------------------- SARIF


def _validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def test_shipped_schema_is_the_official_sarif_2_1_0_schema() -> None:
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]
    jsonschema.Draft4Validator.check_schema(schema)


@pytest.mark.parametrize("which", ["sync_loop", "examples_tree"])
def test_sarif_validates_against_the_official_schema(which: str, request: pytest.FixtureRequest) -> None:
    a = request.getfixturevalue(which)
    log = sarif_report(a)
    errors = sorted(_validator().iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    json.dumps(log)  # plain JSON types only


def test_the_schema_check_has_teeth(sync_loop: Assessment) -> None:
    log = sarif_report(sync_loop)
    result = log["runs"][0]["results"][0]
    result["level"] = "fatal"
    del result["message"]
    log["runs"][0]["tool"]["driver"]["rules"][0]["defaultConfiguration"]["level"] = "severe"
    assert len(list(_validator().iter_errors(log))) == 3


def test_sarif_rules_one_per_code_with_level_by_kind(sync_loop: Assessment) -> None:
    rules = sarif_report(sync_loop)["runs"][0]["tool"]["driver"]["rules"]
    catalogue = catalogue_rows()
    assert [r["id"] for r in rules] == [row[0] for row in catalogue]
    for rule, (code, kind, title, recipe) in zip(rules, catalogue, strict=True):
        assert rule["defaultConfiguration"]["level"] == LEVELS[kind]
        assert rule["shortDescription"]["text"] == title
        assert rule["fullDescription"]["text"] == code_doc(code)
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", rule["name"])
        assert rule["properties"] == {"kind": kind, "recipe": recipe, "tags": ["cupynumeric", kind.lower()]}
        if recipe:
            assert recipe in rule["help"]["text"] and recipe in rule["help"]["markdown"]
    assert rule_name("host materialization in a hot loop") == "HostMaterializationInAHotLoop"
    assert rule_name("cuPyNumeric and CuPy mixed in a hot loop") == "CuPyNumericAndCuPyMixedInAHotLoop"


def test_every_catalogue_code_has_a_doc() -> None:
    codes = {row[0] for row in catalogue_rows()}
    assert codes == set(registry())
    assert all(40 <= len(entry.doc) <= 600 for entry in registry().values())


def test_sarif_results_are_the_non_scales_findings_with_precise_regions(sync_loop: Assessment) -> None:
    run = sarif_report(sync_loop)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    expected = [f for f in sync_loop.findings if f.kind != "SCALES"]
    assert expected, "the example must have BLOCKS findings"
    assert len(run["results"]) == len(expected)
    source = (EXAMPLES / "sync_in_loop.py").read_text().splitlines()
    # Relative to the repository root when the tests are in a checkout, else to PATH's folder.
    top = repository_root(EXAMPLES)
    base = top if top is not None else EXAMPLES
    uri = (EXAMPLES / "sync_in_loop.py").relative_to(base).as_posix()
    for result, f in zip(run["results"], expected, strict=True):
        assert result["ruleId"] == f.code == rules[result["ruleIndex"]]["id"]
        assert result["level"] == LEVELS[f.kind]
        loc = result["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": uri, "uriBaseId": "%SRCROOT%"}
        region = loc["region"]
        line = source[f.line - 1]
        assert region["startLine"] == f.line
        assert region["snippet"]["text"] == line.rstrip()
        assert line[region["startColumn"] - 1 : region["endColumn"] - 1] == line.strip()
        assert f.source_line in result["message"]["text"] and f.function in result["message"]["text"]
        assert "suppressions" not in result and "baselineState" not in result
    root = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert root == base.as_uri() + "/"


def test_sarif_run_properties_carry_the_verdict(sync_loop: Assessment) -> None:
    props = sarif_report(sync_loop)["runs"][0]["properties"]
    assert props["verdict"] == sync_loop.verdict == "LIGHT REFACTOR"
    assert props["verdict_reason"].startswith(f"Rule {sync_loop.decision.verdict_rule}:")
    assert props["pattern"] == sync_loop.decision.pattern
    assert [g["gate"] for g in props["gates"]] == [1, 2, 3, 4, 5, 6]
    assert all(g["reason"] for g in props["gates"])


def test_sarif_suppressions_baseline_and_notebook_cells(sync_loop: Assessment, tmp_path: Path) -> None:
    a = replace(sync_loop, findings=[replace(f) for f in sync_loop.findings])
    r104 = next(f for f in a.findings if f.code == "R104")
    r104.suppressed = True
    justifications = {(r104.code, r104.file, r104.line): "reviewed: logging only"}
    path = tmp_path / "baseline.json"
    write_baseline(path, [f for f in a.findings if f.code == "R104"])
    log = sarif_report(a, justifications=justifications, baseline=load_baseline(path))
    assert not list(_validator().iter_errors(log))
    by_code = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    assert by_code["R104"]["suppressions"] == [
        {"kind": "inSource", "justification": "reviewed: logging only"}
    ]
    assert by_code["R104"]["baselineState"] == "unchanged"
    assert by_code["R105"]["baselineState"] == "new"
    assert log["runs"][0]["properties"]["suppressed"] == 1

    class TwoCells:
        def location(self, line: int) -> tuple[int, int]:
            return (4, line - 10) if line > 10 else (2, line)

    cell_log = sarif_report(a, notebooks={"sync_in_loop.py": TwoCells()})
    r = next(r for r in cell_log["runs"][0]["results"] if r["ruleId"] == "R104")
    # Not a notebook's JSON to find the cell's line in: the file's first line, the cell said.
    assert r["locations"][0]["physicalLocation"]["region"] == {"startLine": 1}
    assert r["properties"]["cell"] == 4 and r["message"]["text"].startswith("cell 4:line 2: ")


def test_sarif_fingerprints_survive_unrelated_edits(tmp_path: Path) -> None:
    original = (EXAMPLES / "sync_in_loop.py").read_text()
    target = tmp_path / "solver.py"
    target.write_text(original)
    before = sarif_report(_assess(target, elements="20M"))["runs"][0]["results"]
    shifted = original.replace('"""Gradient', '# a new header comment\n\n\n"""Gradient')
    target.write_text(shifted.replace("loss = np.dot(r, r).item()", "loss = np.dot(r, r).item()  # noted"))
    after = sarif_report(_assess(target, elements="20M"))["runs"][0]["results"]

    def prints(results: list[dict]) -> list[str]:
        return [r["partialFingerprints"]["cpqFinding/v1"] for r in results]

    assert prints(before) == prints(after)
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in after] == [
        r["locations"][0]["physicalLocation"]["region"]["startLine"] + 3 for r in before
    ]
    assert len(set(prints(before))) == len(before)


# --------------------------------------------------------------------------- [tool.cpq]


def _project(tmp_path: Path, toml: str) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(toml)
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    shutil.copy(EXAMPLES / "sync_in_loop.py", tmp_path / "src" / "pkg" / "solver.py")
    return tmp_path


FULL = """
[project]
name = "demo"

[tool.cpq]
elements = "16M"
gpus = 4
nodes = 2
gpu = "H100"
cpu-only = false
pattern = "stencil"
exclude = ["build/"]
extend-exclude = ["*_pb2.py", "tests/**"]
select = ["R1", "R2"]
ignore = ["R106"]
per-file-ignores = { "scripts/*.py" = ["R104"], "legacy/" = ["R1"] }
"""


def test_config_found_by_walking_up_and_read(tmp_path: Path) -> None:
    root = _project(tmp_path, FULL)
    solver = root / "src" / "pkg" / "solver.py"
    assert find_pyproject(solver) == root / "pyproject.toml"
    assert find_pyproject(root / "src") == root / "pyproject.toml"
    c = config_for(solver)
    assert c.source == root / "pyproject.toml" and c.root == root
    context = (c.elements, c.gpus, c.nodes, c.gpu, c.cpu_only, c.pattern)
    assert context == ("16M", 4, 2, "H100", False, "stencil")
    assert c.select == ["R1", "R2"] and c.ignore == ["R106"]
    assert c.per_file_ignores == {"scripts/*.py": ["R104"], "legacy/": ["R1"]}
    assert c.relpath(solver) == "src/pkg/solver.py"
    assert c.relpath(tmp_path.parent) is None


def test_config_walk_stops_at_the_repository_top(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.cpq]\ngpus = 2\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "code").mkdir()
    assert find_pyproject(repo / "code") is None
    assert config_for(repo / "code") == Config()
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert find_pyproject(repo / "code") == repo / "pyproject.toml"
    assert config_for(repo / "code") == Config()  # no [tool.cpq] table: the defaults


def test_config_snake_case_keys_and_integer_elements(tmp_path: Path) -> None:
    p = tmp_path / "pyproject.toml"
    p.write_text(
        '[tool.cpq]\nelements = 16000000\ncpu_only = true\nextend_exclude = ["gen/"]\n'
        'per_file_ignores = {"a.py" = ["r104"]}\n'
    )
    c = load_config(p)
    assert c.elements == "16000000" and c.cpu_only is True
    assert c.extend_exclude == ["gen/"] and c.per_file_ignores == {"a.py": ["R104"]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("foo = 1", r"unknown key 'foo' \(known: elements, gpus, .*per-file-ignores\)"),
        ("gpus = '4'", r"gpus must be an integer, got str"),
        ("gpus = true", r"gpus must be an integer, got bool"),
        ("nodes = 0", r"nodes must be at least 1"),
        ("elements = 'lots'", r"elements must be .*cannot read 'lots'"),
        ("gpu = 'Z80'", r"gpu must be a string, got str: --gpu: unknown model"),
        ("cpu-only = 'yes'", r"cpu-only must be a boolean, got str"),
        ("exclude = 'build/'", r"exclude must be a list of strings, got str"),
        ("select = ['R104', 'E501']", r"select: unknown code 'E501'"),
        ("ignore = ['R999']", r"ignore: unknown code 'R999'"),
        ("ignore = ['R4']", r"ignore: unknown code 'R4'"),
        ("per-file-ignores = {'a.py' = 'R104'}", r"per-file-ignores 'a.py' must be a list of strings"),
        ("per-file-ignores = {'a.py' = ['X1']}", r"per-file-ignores 'a.py': unknown code 'X1'"),
        ("cpu-only = true\ncpu_only = false", r"'cpu_only' and 'cpu-only' are the same key"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, body: str, message: str) -> None:
    p = tmp_path / "pyproject.toml"
    p.write_text(f"[tool.cpq]\n{body}\n")
    with pytest.raises(ConfigError, match=message) as err:
        load_config(p)
    assert str(err.value).startswith(f"{p}: ")


def test_config_malformed_toml_names_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "pyproject.toml"
    p.write_text('[tool.cpq]\ngpus = 4\nselect = ["R1",\n')
    with pytest.raises(ConfigError, match=r"invalid TOML at line 3, column 16 \(end of file\): Invalid"):
        load_config(p)
    p.write_text("[tool.cpq]\ngpus = = 4\n")
    with pytest.raises(ConfigError, match=r"invalid TOML at line 2, column 8: Invalid value"):
        load_config(p)


@pytest.mark.parametrize(
    ("patterns", "path", "excluded"),
    [
        (["build/"], "build/x.py", True),
        (["build/"], "src/build/deep/x.py", True),
        (["build/"], "build", False),  # a file named build: the pattern is for folders
        (["build/"], "build/", True),
        (["build/"], "rebuild/x.py", False),
        (["*_pb2.py"], "api/msg_pb2.py", True),
        (["*_pb2.py"], "api/msg_pb2.pyi", False),
        (["tests/**"], "tests/unit/test_a.py", True),
        (["tests/**"], "src/tests/test_a.py", False),
        (["src/gen/*.py"], "src/gen/a.py", True),
        (["src/gen/*.py"], "src/gen/sub/a.py", False),
        (["**/fixtures"], "a/b/fixtures/data.py", True),
        (["/setup.py"], "setup.py", True),
        (["/setup.py"], "pkg/setup.py", False),
        (["notebooks/scratch?.ipynb"], "notebooks/scratch1.ipynb", True),
        (["[ab].py"], "pkg/a.py", True),
        ([], "anything.py", False),
    ],
)
def test_config_exclude_globs_follow_gitignore(patterns: list[str], path: str, excluded: bool) -> None:
    assert Config(exclude=patterns).is_excluded(path) is excluded
    assert Config(extend_exclude=patterns).is_excluded(path) is excluded


def test_config_code_selection_like_ruff() -> None:
    per_file = {"scripts/*.py": ["R104"], "legacy/": ["R1"]}
    c = Config(select=["R1", "R2"], ignore=["R106"], per_file_ignores=per_file)
    assert c.code_enabled("R104", "src/a.py")
    assert not c.code_enabled("R106", "src/a.py")
    assert not c.code_enabled("R301", "src/a.py")  # not selected
    assert not c.code_enabled("R104", "scripts/run.py")
    assert c.code_enabled("R105", "scripts/run.py")
    assert not c.code_enabled("R101", "legacy/old.py") and c.code_enabled("R201", "legacy/old.py")
    assert Config().code_enabled("R305") and Config(ignore=["R3"]).code_enabled("R104")
    # The more specific prefix wins; on a tie, ignore wins.
    assert Config(select=["R104"], ignore=["R1"]).code_enabled("R104")
    assert not Config(select=["R1"], ignore=["R1"]).code_enabled("R104")


def test_config_command_line_wins() -> None:
    c = Config(elements="16M", gpus=4, gpu="H100", cpu_only=True, pattern="stencil")
    opts = c.context_options(gpus=8, pattern=None)
    assert opts == {
        "elements": "16M",
        "gpus": 8,
        "nodes": None,
        "gpu": "H100",
        "cpu_only": True,
        "pattern": "stencil",
    }
    assert c.context_options(cpu_only=False)["cpu_only"] is False
    assert Config().context_options()["cpu_only"] is False
    ctx = Context.from_options(**c.context_options(elements="2M"))
    assert ctx.elements.low == 2_000_000 and ctx.gpus.low == 4 and ctx.gpu.label == "H100"


def test_config_drives_a_real_assessment(tmp_path: Path) -> None:
    root = _project(tmp_path, '[tool.cpq]\nelements = "20M"\nignore = ["R105"]\n')
    c = config_for(root / "src")
    a = _assess(root / "src", **c.context_options())
    assert a.context.elements.low == 20_000_000 and a.context.elements.source == "given"
    kept = [f.code for f in a.findings if c.code_enabled(f.code, c.relpath(root / "src" / f.file))]
    assert "R104" in kept and "R105" not in kept and "R105" in [f.code for f in a.findings]


# --------------------------------------------------------------------------- suppressions

SUPPRESSED = """import numpy as np


def f(a, n):
    out = []
    for i in range(n):
        out.append(a.sum().item())  # cpq: ignore[R104, r105] -- reviewed: logging only
        label = "# cpq: ignore"
        x = a.max().item()  #CPQ:IGNORE
        y = 1  # noqa: E501  # cpq:ignore[R201]
    z = 3  # cpq: ignored -- not a directive
    return out  # cpq: ignore[]
"""


def test_parse_suppressions_reads_real_comments_only() -> None:
    assert parse_suppressions(SUPPRESSED) == [
        Suppression(7, ("R104", "R105"), "reviewed: logging only"),
        Suppression(9, None, ""),
        Suppression(10, ("R201",), ""),
        Suppression(12, None, ""),  # empty brackets read as a bare ignore
    ]
    assert parse_suppressions('s = """\n# cpq: ignore\n"""\n') == []
    assert parse_suppressions("x = 1  # cpq :  ignore [ R104 ,R105 ]--  why \n") == [
        Suppression(1, ("R104", "R105"), "why")
    ]


def test_parse_suppressions_falls_back_on_broken_code() -> None:
    text = "def f(:\n  x = 1  # cpq: ignore\n s = '# cpq: ignore[R104]'\n t = 2  # cpq: ignore[R106]\n"
    assert parse_suppressions(text) == [Suppression(2, None, ""), Suppression(4, ("R106",), "")]
    unterminated = 'x = 1  # cpq: ignore[R1]\ns = """\ny = 2  # cpq: ignore\n'
    assert parse_suppressions(unterminated)[0] == Suppression(1, ("R1",), "")


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30))
def test_a_directive_inside_a_string_literal_never_suppresses(prefix: str) -> None:
    text = f"x = {('# cpq: ignore ' + prefix)!r}\n"
    assert parse_suppressions(text) == []


def test_match_suppressions_reports_suppressed_and_unused() -> None:
    sups = {"a.py": parse_suppressions(SUPPRESSED), "b.py": [Suppression(3, None, "old")]}
    findings = [
        ("R104", "a.py", 7),
        ("R101", "a.py", 6),
        ("R104", "a.py", 9),
        ("R110", "a.py", 9),
        ("R104", "b.py", 4),
    ]
    suppressed, unused = match_suppressions(findings, sups)
    assert suppressed == {("R104", "a.py", 7), ("R104", "a.py", 9), ("R110", "a.py", 9)}
    assert unused == [
        ("a.py", Suppression(7, ("R105",), "reviewed: logging only")),  # R104 used, R105 not
        ("a.py", Suppression(10, ("R201",), "")),
        ("a.py", Suppression(12, None, "")),
        ("b.py", Suppression(3, None, "old")),
    ]
    assert unused[0][1].describe() == "cpq: ignore[R105]" and unused[2][1].describe() == "cpq: ignore"
    assert find_suppression(("R104", "a.py", 7), sups).reason == "reviewed: logging only"  # type: ignore[union-attr]
    assert find_suppression(("R101", "a.py", 6), sups) is None


def test_suppressions_on_a_real_assessment(tmp_path: Path) -> None:
    line = "loss = np.dot(r, r).item()"
    src = (
        (EXAMPLES / "sync_in_loop.py")
        .read_text()
        .replace(line, f"{line}  # cpq: ignore[R104] -- one scalar per epoch")
        .replace("lam_old = lam", "lam_old = lam  # cpq: ignore")
    )
    target = tmp_path / "solver.py"
    target.write_text(src)
    a = _assess(target, elements="20M")
    sups = {"solver.py": parse_suppressions(src)}
    suppressed, unused = match_suppressions([(f.code, f.file, f.line) for f in a.findings], sups)
    assert {c for c, _, _ in suppressed} == {"R104"}
    assert [(file, s.line) for file, s in unused] == [("solver.py", 26)]


# --------------------------------------------------------------------------- baselines


def test_baseline_round_trip_survives_unrelated_edits(tmp_path: Path) -> None:
    target = tmp_path / "solver.py"
    original = (EXAMPLES / "sync_in_loop.py").read_text()
    target.write_text(original)
    first = _assess(target, elements="20M").findings
    path = tmp_path / "cpq-baseline.json"
    assert write_baseline(path, first) == len(first)
    data = json.loads(path.read_text())
    assert data["schema"] == BASELINE_SCHEMA and data["entries"] == sorted(
        data["entries"], key=lambda e: (e["code"], e["file"], e["function"], e["text"])
    )
    edited = "import os\n\n" + original.replace("lr * g", "lr   *   g").replace(
        "loss = np.dot(r, r).item()", "loss = np.dot(r, r).item()  # logged"
    )
    edited += "\n\ndef scale(n):\n    a = np.zeros(n)\n    for i in range(len(a)):\n        a[i] *= 2.0\n"
    target.write_text(edited)
    second = _assess(target, elements="20M").findings
    base = load_baseline(path)
    new = base.new_findings(second)
    assert new and all(f.function == "scale" for f in new)
    assert {f.code for f in new} >= {"R101"}
    assert [base.is_known(f) for f in second] == [f not in new for f in second]
    base.reset()
    assert base.is_known(next(f for f in second if f.code == "R104"))


def test_baseline_is_a_multiset() -> None:
    from cpq.pipeline.assessment import Finding

    def finding(line: int) -> Finding:
        return Finding("R104", "BLOCKS", "t", "RR-sync", "a.py", line, "f", True, True, "s = x.item()")

    base = Baseline()
    base.entries[("R104", "a.py", "f", "s = x.item()")] = 1
    base.reset()
    twice = [finding(3), finding(9)]
    assert base.new_findings(twice) == [twice[1]]
    assert [base.is_known(f) for f in twice] == [True, False]


def test_baseline_key_normalisation() -> None:
    assert normalise_line("  x  =  a.item()   # was y") == "x = a.item()"
    assert normalise_line('s = "# not a comment"  # real') == 's = "# not a comment"'
    assert normalise_line("t = 'it\\'s'  # c") == "t = 'it\\'s'"
    assert fingerprint("R104", "f", "x = a.item()") == fingerprint("R104", "f", "x  = a.item()  # ok")
    assert fingerprint("R104", "f", "x = a.item()") != fingerprint("R104", "g", "x = a.item()")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"no such file"),
        ("{not json", r"invalid JSON at line 1, column 2"),
        (
            '{"schema": "cpq.report/1", "entries": []}',
            r"expected schema 'cpq.baseline/1', found 'cpq.report/1'",
        ),
        ("[]", r"expected schema 'cpq.baseline/1', found 'list'"),
        ('{"schema": "cpq.baseline/1"}', r"'entries' must be a list"),
        ('{"schema": "cpq.baseline/1", "entries": [{"code": "R104"}]}', r"entry 0 needs"),
        (
            '{"schema": "cpq.baseline/1", "entries": [{"code": "R1", "file": "a", "function": "f", '
            '"text": "", "count": 0}]}',
            r"entry 0 needs",
        ),
    ],
)
def test_baseline_errors_are_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "b.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(BaselineError, match=message) as err:
        load_baseline(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


# --------------------------------------------------------------------------- notebooks


def _nb(cells: list[dict], **meta: object) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": meta, "cells": cells})


def _code(source: str | list[str]) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}


NOTEBOOK_CELLS = [
    {"cell_type": "markdown", "metadata": {}, "source": ["# Heat diffusion\n", "Some text.\n"]},
    _code(["%matplotlib inline\n", "import numpy as np\n", "!pip install tqdm\n"]),
    _code("def relax(u, n):\n    for i in range(len(u)):\n        u[i] = 0.5 * u[i]\n    return u"),
    {"cell_type": "raw", "metadata": {}, "source": "not code"},
    _code("%%bash\necho hi\n"),
    _code("%%time\nu = np.ones(100)\nfor step in range(10):\n    !echo step\n    relax(u, 3)\n"),
    _code("np.sum?\n?np.mean\nx = (1\n%2)\n%timeit -n 10 -r 2 np.sum(u)\nfiles = !ls\n"),
    _code("def broken(:\n    pass\n"),
    _code([]),
]


def test_notebook_cells_become_one_parseable_module() -> None:
    nb = notebook_to_source(_nb(NOTEBOOK_CELLS, kernelspec={"language": "python", "name": "python3"}))
    lines = nb.text.splitlines()
    ast.parse(nb.text)
    assert nb.cell_count == 9
    assert len(lines) == len(nb.line_map) == 3 + 4 + 2 + 5 + 6 + 2
    assert lines[:3] == ["pass", "import numpy as np", "pass"]
    assert lines[3:7] == NOTEBOOK_CELLS[2]["source"].splitlines()
    assert lines[7:9] == ["", ""]  # %%bash cell blanked
    timed = ["pass", "u = np.ones(100)", "for step in range(10):", "    pass", "    relax(u, 3)"]
    assert lines[9:14] == timed
    assert lines[14:20] == ["pass", "pass", "x = (1", "%2)", "np.sum(u)", "pass"]
    assert lines[20:] == ["", ""] and nb.skipped_cells == [(8, "line 1: invalid syntax")]
    assert nb.location(1) == (2, 1) and nb.location(6) == (3, 3) and nb.location(13) == (6, 4)
    assert nb.label(6) == "cell 3:line 3"
    with pytest.raises(ValueError):
        nb.location(len(lines) + 1)


def test_notebook_bytes_and_nbformat_3() -> None:
    cells = [
        {"cell_type": "heading", "level": 1, "source": ["Title"]},
        {"cell_type": "code", "language": "python", "input": ["a = 1\n", "b = a\n"]},
    ]
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": cells}]}
    nb = notebook_to_source(json.dumps(v3).encode())
    assert nb.text == "a = 1\nb = a\n" and nb.label(2) == "cell 2:line 2"
    assert notebook_to_source(_nb([])).text == ""


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe not utf8", r"not UTF-8"),
        ("{", r"invalid JSON at line 1, column 2"),
        ("[1, 2]", r"the JSON is a list"),
        ('{"metadata": {}}', r"no 'cells' list"),
        ('{"cells": [1]}', r"'cells' is not a list of objects"),
        ('{"cells": [{"cell_type": "code", "source": 3}]}', r"cell 1: source is neither"),
        ('{"nbformat": 2, "worksheets": []}', r"nbformat 2 is not supported"),
        (
            _nb([_code("x <- 1")], kernelspec={"language": "R"}),
            r"not a Python notebook \(kernel language: r\)",
        ),
    ],
)
def test_notebook_errors_say_why(data: str | bytes, message: str) -> None:
    with pytest.raises(NotebookError, match=message):
        notebook_to_source(data)


def test_notebook_assessed_with_cell_locations(tmp_path: Path) -> None:
    path = tmp_path / "analysis.ipynb"
    path.write_text(_nb(NOTEBOOK_CELLS, language_info={"name": "python"}))
    nb = notebook_to_source(path.read_bytes())
    module = tmp_path / "analysis.py"
    module.write_text(nb.text)
    a = _assess(module, elements="20M")
    r101 = [f for f in a.findings if f.code == "R101"]
    assert r101, [(f.code, f.line) for f in a.findings]
    assert {nb.label(f.line) for f in r101} == {"cell 3:line 3"}


# --------------------------------------------------------------------------- progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_draws_only_after_a_second_on_a_terminal() -> None:
    stream, clock = FakeTTY(), Clock()
    with Progress(10, "assessing", stream=stream, clock=clock, environ={}) as p:
        p.advance(3)
        assert stream.getvalue() == ""  # a short run stays silent
        clock.now = 1.5
        p.advance(2)
        assert p.drawn and "assessing" in stream.getvalue() and "5/10" in stream.getvalue()
        clock.now = 1.55
        p.advance()
        assert "6/10" not in stream.getvalue()  # redraws are throttled
        clock.now = 2.0
        p.advance()
        assert "7/10" in stream.getvalue()
    text = stream.getvalue()
    assert text.endswith("\r") and not p.drawn
    assert text.rsplit("\r", 2)[-2].strip() == ""  # the last write blanks the line


@pytest.mark.parametrize("quiet, tty", [(True, True), (False, False)])
def test_progress_silent_when_quiet_or_piped(quiet: bool, tty: bool) -> None:
    stream, clock = (FakeTTY() if tty else io.StringIO()), Clock()
    with Progress(5, "x", quiet, stream=stream, clock=clock, environ={}) as p:
        clock.now = 5.0
        p.advance(5)
    assert stream.getvalue() == "" and p.done == 5


def test_progress_without_a_total_counts_with_a_spinner_and_seconds() -> None:
    stream, clock = FakeTTY(), Clock()
    p = Progress(None, "files", stream=stream, clock=clock, environ={})
    clock.now = 2.0
    p.advance(7)
    assert stream.getvalue().endswith("cpq: files - 7, 2.0s")
    p.close()


# --------------------------------------------------------------------------- pre-commit


def test_pre_commit_hook_definition() -> None:
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load(text)
    assert [h["id"] for h in hooks] == ["cpq"]
    hook = hooks[0]
    assert hook["language"] == "python"
    assert hook["entry"].split()[:1] == ["cpq"] and "assess" in hook["entry"].split()
    assert hook["args"] == ["--fail-on-findings", "BLOCKS"]
    assert hook["types_or"] == ["python", "jupyter"] and hook["pass_filenames"] is False
    assert all(isinstance(hook[k], str) for k in ("name", "description", "entry"))


def test_pre_commit_entry_runs_as_a_command_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cpq.cli.app import app

    yaml = pytest.importorskip("yaml")
    hook = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())[0]
    argv = hook["entry"].split()[1:] + hook["args"]
    shutil.copy(EXAMPLES / "refactor_only.py", tmp_path / "ok.py")
    runner = CliRunner()
    argv = [str(tmp_path) if a == "." else a for a in argv]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output  # REFACTOR findings only: below the threshold
    shutil.copy(EXAMPLES / "mpi_halo.py", tmp_path / "mpi.py")
    assert runner.invoke(app, argv).exit_code == 1  # R108 is a BLOCKS finding
