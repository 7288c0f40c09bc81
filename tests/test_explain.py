"""`cpq why` / `why not` / `query`: proofs down to the user's lines, failing literals, queries."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from cpq.cli.app import app
from cpq.config.context import Context
from cpq.explain import ProofNode, Prover, proof_to_json, render_dot, render_text
from cpq.explain.locations import node_columns
from cpq.explain.whynot import WhyNotAnalyzer
from cpq.pipeline.assessment import Assessment, assess
from cpq.rules.program import load_program

runner = CliRunner()
PACKAGE = Path(__file__).resolve().parent.parent


def rule_line(file: str, line: int) -> str:
    """Line `line` of the shipped rules file `file` ("rules/arrays.dl")."""
    return (PACKAGE / file).read_text(encoding="utf-8").splitlines()[line - 1]


CHAIN = """\
import numpy as np


def inner(a: np.ndarray):
    return a.sum().item()


def middle(a):
    return inner(a) + 1


def ping(a: np.ndarray, k):
    if k:
        return pong(a, k - 1)
    return float(np.max(a))


def pong(a, k):
    return ping(a, k)


def run(a, n):
    for _ in range(n):
        middle(a)
        ping(a, 3)
"""


@pytest.fixture(scope="module")
def examples() -> Assessment:
    return assess(EXAMPLES)


@pytest.fixture(scope="module")
def sync() -> Assessment:
    return assess(EXAMPLES / "sync_in_loop.py", Context.from_options(elements="50M", gpus=1))


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Assessment:
    root = tmp_path_factory.mktemp("chain")
    (root / "chain.py").write_text(CHAIN)
    return assess(root)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the examples for the CLI, whose reusable store lives beside the files."""
    root = tmp_path_factory.mktemp("cli") / "examples"
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns(".cpq"))
    return root


def prove(result: Assessment, relation: str, values: tuple, **kw: object) -> ProofNode:
    assert result.db is not None
    return Prover(result.db, source_line=result.source_line, **kw).prove(relation, values)  # type: ignore[arg-type]


def line_of(path: Path, needle: str, after: str = "") -> int:
    lines = path.read_text().splitlines()
    start = next(i for i, text in enumerate(lines) if after in text) if after else 0
    return next(i + 1 for i in range(start, len(lines)) if needle in lines[i])


def extracted_with_source(root: ProofNode) -> list[ProofNode]:
    return [
        n
        for n in root.walk()
        if n.kind == "input" and n.origin == "extracted fact" and n.location and n.location.source
    ]


def assert_well_formed(root: ProofNode) -> None:
    """Rules are quoted from their file and line; body tuples are strictly older than the head."""
    for node in root.walk():
        if node.kind != "derived" or node.truncated:
            continue
        assert node.rule is not None
        assert node.rule.source.startswith("rules/")
        assert rule_line(node.rule.source, node.rule.line).strip() in node.rule.text
        stack = list(node.children)
        while stack:
            child = stack.pop()
            if child.kind == "aggregate":
                stack.extend(child.children)
            elif child.iteration is not None:
                assert child.iteration < node.iteration, (node.text, child.text)
    full = [(n.relation, n.values) for n in root.walk() if n.kind in ("derived", "fact", "input")]
    assert len(full) == len(set(full)), "a subproof was expanded twice"
    ids = {n.id for n in root.walk()}
    assert all(n.ref in ids for n in root.walk() if n.kind == "ref")


# -- proofs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "file", "line", "kind"),
    [
        ("R003", "sync_in_loop.py", 9, "SCALES"),
        ("R104", "sync_in_loop.py", 12, "BLOCKS"),
        ("R202", "refactor_only.py", 16, "REFACTOR"),
        ("R303", "spectral.py", 16, "INFO"),
    ],
)
def test_finding_proof_reaches_extracted_facts_with_source_lines(
    examples: Assessment, code: str, file: str, line: int, kind: str
) -> None:
    assert examples.db is not None
    assert examples.db.query(f'code_info("{code}", K, _, _)')[1] == [(kind,)]
    (row,) = examples.db.query(f'finding("{code}", "{file}", {line}, Q)')[1]
    root = prove(examples, "finding", (code, file, line, row[0]))
    assert root.kind == "derived" and root.location and root.location.line == line
    sites = [n for n in root.walk() if n.relation == "site" and n.kind == "derived"]
    assert sites and sites[0].text.startswith(f'site("{code}", n')
    facts = extracted_with_source(root)
    assert any(n.location and n.location.file == file for n in facts)
    assert_well_formed(root)
    text = render_text(root)
    assert root.rule is not None and f"[{root.rule.where}]" in text
    assert examples.source_line(file, line) in text


def test_r104_proof_reads_like_the_issue(examples: Assessment) -> None:
    root = prove(examples, "finding", ("R104", "sync_in_loop.py", 12, "descend"))
    text = render_text(root)
    line = next(ln for ln in text.splitlines() if ln.strip().startswith('site("R104", n'))
    assert line.rsplit("  #", 1)[0].endswith("— sync_in_loop.py:12  loss = np.dot(r, r).item()")
    assert 'site("R104", C) :- host_conversion(C), hot(C).' in text
    assert "[extracted fact] — sync_in_loop.py:12" in text
    assert "[fact, rules/codes/R104/rules.dl:" in text  # code_info, written in its code's folder
    assert "absent: not_array_api(" in text
    assert 'check: "BLOCKS" != "SCALES"' in text


def test_every_finding_of_the_examples_has_a_proof(examples: Assessment) -> None:
    assert examples.db is not None
    for values in examples.db.rows("finding"):
        root = prove(examples, "finding", values)
        assert extracted_with_source(root), values


def test_verdict_proof_counts_the_blocks_sites_down_to_their_lines(sync: Assessment) -> None:
    (verdict,) = sync.db.rows("verdict")  # type: ignore[union-attr]
    assert verdict == ("LIGHT REFACTOR", 6)
    root = prove(sync, "verdict", verdict)
    assert_well_formed(root)
    text = render_text(root)
    assert "absent: demotion()" in text
    assert 'N = count : { counted(_, _, _, "BLOCKS") } = 2' in text
    assert "R = min X : { verdict_rule(X, _) } = 6" in text
    counted = [n for n in root.walk() if n.relation == "counted" and n.kind == "derived"]
    assert {n.values[0] for n in counted} == {"R104", "R105"}
    lines = {n.location.line for n in extracted_with_source(root) if n.location}
    assert {12, 24} <= lines
    assert "(shown above)" in text  # hot(n) is needed twice and proved once


def test_gate_proof_reaches_extracted_facts(sync: Assessment) -> None:
    (gate,) = [g for g in sync.db.rows("gate_status") if g[0] == 5]  # type: ignore[union-attr]
    assert gate[2:] == ("uncertain", "touchpoints-on-hot-path")
    root = prove(sync, "gate_status", gate)
    assert_well_formed(root)
    aggregates = [n for n in root.walk() if n.kind == "aggregate"]
    assert any(n.text.startswith("H = count : { host_touchpoint(C), hot(C) }") for n in aggregates)
    touch = [n for n in root.walk() if n.relation == "host_touchpoint" and n.kind == "derived"]
    assert touch and all(n.location for n in touch)
    assert extracted_with_source(root)


def test_recursive_hot_path_through_two_calls_is_a_finite_shortest_proof(chain: Assessment) -> None:
    root = prove(chain, "finding", ("R104", "chain.py", 5, "inner"))
    assert_well_formed(root)
    hot_functions = [n for n in root.walk() if n.relation == "hot_function" and n.kind == "derived"]
    assert [n.location.source for n in hot_functions if n.location] == [
        "def inner(a: np.ndarray):",
        "def middle(a):",
    ]
    assert any(n.relation == "innermost_loop" and n.location and n.location.line == 24 for n in root.walk())
    # ping is hot through pong (a cycle) and directly from the loop: the proof takes the direct,
    # shortest way and does not enter the cycle.
    root = prove(chain, "finding", ("R104", "chain.py", 15, "ping"))
    assert_well_formed(root)
    hot_functions = [n for n in root.walk() if n.relation == "hot_function" and n.kind == "derived"]
    assert len(hot_functions) == 1
    assert not any(n.location and n.location.source.startswith("def pong") for n in root.walk())


def test_depth_cuts_the_tree(examples: Assessment) -> None:
    root = prove(examples, "finding", ("R104", "sync_in_loop.py", 12, "descend"), max_depth=1)
    derived = [n for n in root.children if n.kind == "derived"]
    assert derived and all(n.truncated and not n.children for n in derived)
    assert "cut by --depth" in render_text(root)


def test_json_and_dot_renderings(examples: Assessment) -> None:
    root = prove(examples, "finding", ("R104", "sync_in_loop.py", 12, "descend"))
    data = json.loads(json.dumps(proof_to_json(root)))
    assert data["relation"] == "finding" and data["rule"]["line"] == root.rule.line  # type: ignore[union-attr]
    assert data["children"][0]["location"]["source"] == "loss = np.dot(r, r).item()"
    dot = render_dot(root)
    assert dot.startswith("digraph proof {") and dot.count("->") >= len(list(root.walk())) - 1


def test_node_columns_are_inferred_from_the_extractor_schema() -> None:
    cols = node_columns(load_program())
    assert cols["site"] == {1}
    assert cols["hot"] == {0}
    assert cols["var_value"] == {0, 2}
    assert cols["finding"] == set() and cols["gate"] == set() and cols["const_value"] == {0}


# -- why not -----------------------------------------------------------------------------------


def test_why_not_names_the_failing_atom_for_a_forbidden_case(examples: Assessment, expected_cases) -> None:
    case = next(c for c in expected_cases if c["file"] == "particle_loop.py")
    assert ["R110", "pairwise_energy"] in case["forbidden"]
    line = line_of(EXAMPLES / "particle_loop.py", "abs(", after="def pairwise_energy")
    answer = WhyNotAnalyzer(examples.db, source_line=examples.source_line).finding(  # type: ignore[arg-type]
        "R110", "particle_loop.py", line
    )
    assert not answer.exists and answer.failures
    first = answer.failures[0]
    assert first.failing == 'array_builtin("builtins.abs")'
    assert first.message.startswith('R110 needs array_builtin("builtins.abs"): no such fact')
    assert all(not f.holds for f in answer.failures)


def test_why_not_follows_a_missing_hot_path(examples: Assessment, expected_cases) -> None:
    case = next(c for c in expected_cases if c["file"] == "sync_in_loop.py")
    assert ["R104", "final_report"] in case["forbidden"]
    line = line_of(EXAMPLES / "sync_in_loop.py", "float(", after="def final_report")
    answer = WhyNotAnalyzer(examples.db, source_line=examples.source_line).finding(  # type: ignore[arg-type]
        "R104", "sync_in_loop.py", line
    )
    (failure,) = answer.failures
    assert failure.failing and failure.failing.startswith("hot(n")
    assert failure.satisfied and failure.satisfied[0].startswith("host_conversion(n")
    assert f"at sync_in_loop.py:{line}" in failure.message
    assert "Hot: code inside a loop" in failure.message
    causes = [c.failing for c in failure.causes]
    assert any(c and c.startswith("innermost_loop(n") for c in causes)
    assert any(c and c.startswith("hot_function(n") for c in causes)


# -- command line ------------------------------------------------------------------------------


def test_cli_why_finding_verdict_gate_and_formats(tree: Path) -> None:
    out = runner.invoke(app, ["why", "R104", "sync_in_loop.py:12", str(tree), "--format", "tree"])
    assert out.exit_code == 0, out.output
    assert "[rules/findings.dl:" in out.stdout and "loss = np.dot(r, r).item()" in out.stdout
    verdict = runner.invoke(
        app,
        ["why", "verdict", str(tree / "sync_in_loop.py"), "--elements", "50M", "--gpus", "1", "-f", "tree"],
    )
    assert verdict.exit_code == 0, verdict.output
    assert verdict.stdout.startswith('verdict("LIGHT REFACTOR", 6)')
    gate = runner.invoke(app, ["why", "gate", "4", str(tree), "--format", "json"])
    assert gate.exit_code == 0, gate.output
    assert json.loads(gate.stdout)["proofs"][0]["tuple"][0] == 4
    dot = runner.invoke(app, ["why", "R104", "sync_in_loop.py:12", str(tree), "-f", "dot", "--depth", "2"])
    assert dot.exit_code == 0 and dot.stdout.startswith("digraph")


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["R104", "sync_in_loop.py:13"], "on or near that line: R104 sync_in_loop.py:12 (descend)"),
        (["R999", "sync_in_loop.py:12"], "unknown code 'R999'"),
        (["R104", "sync_in_loop.py"], "expected FILE:LINE"),
        (["R104", "nowhere.py:3"], "no assessed file 'nowhere.py'"),
        (["R104", "sync_in_loop.py:99"], "has 32 lines"),
        (["gate", "9"], "no gate 9; gates are 1, 2, 3, 4, 5, 6"),
        (["not", "R999", "sync_in_loop.py:12"], "unknown code 'R999'"),
    ],
)
def test_cli_why_usage_errors(tree: Path, words: list[str], message: str) -> None:
    out = runner.invoke(app, ["why", *words, str(tree)])
    assert out.exit_code == 2
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_why_not(tree: Path) -> None:
    out = runner.invoke(app, ["why", "not", "R110", "particle_loop.py:18", str(tree)])
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith("no R110 finding at particle_loop.py:18")
    assert 'R110 needs array_builtin("builtins.abs"): no such fact' in out.stdout
    data = runner.invoke(app, ["why", "not", "R104", "sync_in_loop.py:31", str(tree), "-f", "json"])
    # A node is shown by its code: the call at sync_in_loop.py:31, not its internal id.
    assert json.loads(data.stdout)["rules"][0]["failing"] == "hot(`float(np.max(np.abs(x)))`)"
    text = runner.invoke(app, ["why", "not", "R104", "sync_in_loop.py:31", str(tree)]).stdout
    assert "`float(np.max(np.abs(x)))` (call, column 12)" in text
    assert re.search(r"\bn\d+", text) is None, text


def test_cli_query_formats_and_errors(tree: Path) -> None:
    text = 'finding(C, F, L, _), C = "R104"'
    table = runner.invoke(app, ["query", text, str(tree)])
    assert table.exit_code == 0, table.output
    assert "sync_in_loop.py" in table.stdout and table.stdout.splitlines()[0].split() == ["C", "F", "L"]
    rows = json.loads(runner.invoke(app, ["query", text, str(tree), "--format", "json"]).stdout)
    assert {"C": "R104", "F": "sync_in_loop.py", "L": 12} in rows
    csv = runner.invoke(app, ["query", text, str(tree), "--format", "csv"]).stdout
    assert csv.splitlines()[0] == "C,F,L"
    negated = runner.invoke(app, ["query", 'site(C, N), !hot(N), loc(N, "sync_in_loop.py", L, _)', str(tree)])
    assert negated.exit_code == 0 and "R002" in negated.stdout

    bad = runner.invoke(app, ["query", 'fnding(C, F, L, _), C = "R104"', str(tree)])
    assert bad.exit_code == 2
    first, shown, caret = bad.stderr.splitlines()[:3]
    assert "undeclared relation 'fnding'" in first and "did you mean 'finding'" in first
    assert caret.index("^") == shown.index("fnding")
    syntax = runner.invoke(app, ["query", "finding(C, F,, L)", str(tree)])
    assert syntax.exit_code == 2 and "unexpected ','" in syntax.stderr
    err_line, shown, caret = syntax.stderr.splitlines()[:3]
    assert shown[caret.index("^")] == ","


def test_cli_query_relations_lists_columns_and_docs() -> None:
    out = runner.invoke(app, ["query", "--relations"])
    assert out.exit_code == 0
    site = next(line for line in out.stdout.splitlines() if line.startswith("site "))
    assert "code: symbol, n: number" in site and "The site a finding cites" in site


@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not installed")
def test_souffle_runs_the_exported_rules_on_exported_facts_with_the_same_findings(
    tmp_path: Path, examples: Assessment
) -> None:
    facts, out = tmp_path / "facts", tmp_path / "out"
    out.mkdir()
    exported = runner.invoke(app, ["facts", str(EXAMPLES), "--out", str(facts)])
    assert exported.exit_code == 0, exported.output
    rules = tmp_path / "all.dl"  # rules.dl's `*` include is cpq's own: Soufflé gets the export
    assert runner.invoke(app, ["rules", "--export", str(rules)]).exit_code == 0
    subprocess.run(["souffle", "-F", str(facts), "-D", str(out), str(rules)], check=True, timeout=600)
    lines = (out / "finding.csv").read_text().splitlines()
    souffle = {tuple(line.split("\t")) for line in lines if line}
    assert examples.db is not None
    cpq = {(c, f, str(ln), q) for c, f, ln, q in examples.db.rows("finding")}
    assert souffle == cpq


def test_a_rule_that_reads_an_inline_relation_says_so_in_its_proof(examples: Assessment) -> None:
    """`loc` is inline: the finding rule is shown as written, with where loc is defined, and
    the node and scope tuples its substituted body matched."""
    root = prove(examples, "finding", ("R104", "sync_in_loop.py", 12, "descend"))
    text = render_text(root)
    assert "loc(N, F, L, Q), !disabled(C, F).  (inline: loc at rules/locations.dl:" in text
    assert "  node(n" in text and "  scope(n" in text
