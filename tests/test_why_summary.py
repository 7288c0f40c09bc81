"""`cpq why` leads with a short summary in words; --full, --format tree and --expand show more.

The summary names source lines and values, never internal node ids; a finding's fits in about
twelve lines, the verdict's and each gate's in about sixty (on NumPy too, when the benchmark
tree is there).  Aggregates show just enough members, first-match rules say why the earlier
rules did not apply, and every step's handle expands into its whole proof.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cpq.cli.app import app
from cpq.rules.program import load_program

runner = CliRunner()
EXAMPLES = Path(__file__).parent / "examples"
NUMPY_TREE = Path(__file__).parent.parent / ".bench" / "trees" / "numpy"
# An internal node id as proofs print them (n3935293840268722226) or a bare large id.
INTERNAL_ID = re.compile(r"\bn-?\d{4,}\b|\b\d{12,}\b")
HANDLE = re.compile(r"#([0-9a-f]{7})\b")


def _why(*args: str) -> str:
    out = runner.invoke(app, ["why", *args])
    assert out.exit_code == 0, out.output
    return out.stdout


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The examples tree, assessed once into a cache outside it."""
    root = tmp_path_factory.mktemp("ex") / "examples"
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    cache = tmp_path_factory.mktemp("cache")
    out = runner.invoke(app, ["assess", str(root), "-f", "json", "--cache-dir", str(cache)])
    assert out.exit_code in (0, 1), out.output
    return root, cache


def _findings(root: Path, cache: Path) -> list[dict]:
    out = runner.invoke(app, ["assess", str(root), "-f", "json", "--cache-dir", str(cache)])
    return json.loads(out.stdout)["findings"]


def test_every_finding_summary_is_short_names_lines_and_hides_ids(examples: tuple[Path, Path]) -> None:
    root, cache = examples
    findings = _findings(root, cache)
    assert len(findings) > 40
    for finding in findings:
        where = finding.get("location") or f"{finding['file']}:{finding['line']}"
        text = _why(finding["code"], where, str(root), "--cache-dir", str(cache))
        lines = text.splitlines()
        assert lines[0].startswith(f"{finding['code']} at {where}"), lines[0]
        assert len(lines) <= 12, text
        assert not INTERNAL_ID.search(text), text
        steps = lines[1:-1]
        # Each step but the ones about values (sizes, counts) names a source line.
        assert any(re.match(r"\s+\S+\.py:\d+", step) for step in steps), text
        assert lines[-1].startswith("(the whole proof: `cpq why")


def test_r104_summary_reads_as_a_path(examples: tuple[Path, Path]) -> None:
    root, cache = examples
    text = _why("R104", "sync_in_loop.py:12", str(root), "--cache-dir", str(cache))
    first, *steps = text.splitlines()
    assert first == "R104 at sync_in_loop.py:12 in descend: host materialization in a hot loop (BLOCKS)"
    body = "\n".join(steps)
    assert "a call of numpy.dot" in body
    assert "converts an array to a host value" in body
    assert "inside the loop at :8 (for it in range(iters):)" in body or "inside the loop at :8" in body


def test_verdict_and_gates_summaries(examples: tuple[Path, Path]) -> None:
    root, cache = examples
    verdict = _why("verdict", str(root), "--cache-dir", str(cache))
    assert verdict.startswith("Verdict SIGNIFICANT REFACTOR, decided by rule 4")
    # First match: one line for each rule before the deciding one.
    for rule in ("verdict_rule(1,", "verdict_rule(2,", "verdict_rule(3,"):
        assert f"{rule}" in verdict
    assert "instead: Gate 2 Problem size: pass" in verdict
    # Rule 9 applies (numpy.interp, ✗, on a hot path) but changes nothing: the verdict keeps
    # rule 4 and says so.
    assert "rule 9 leaves SIGNIFICANT REFACTOR as it is" in verdict
    for gate in range(1, 7):
        text = _why("gate", str(gate), str(root), "--cache-dir", str(cache))
        assert text.startswith(f"Gate {gate} ")
        assert len(text.splitlines()) <= 60
        assert not INTERNAL_ID.search(text), text
    gate3 = _why("gate", "3", str(root), "--cache-dir", str(cache))
    # `N >= 3` needs three members: three are shown, the rest listed by place.
    members = [ln for ln in gate3.splitlines() if "— R1" in ln]
    assert len(members) == 3, gate3
    assert re.search(r"… and \d+ more: \S+\.py:\d+", gate3)


def test_a_failing_size_gate_leads_the_verdict(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    shutil.copy(EXAMPLES / "wave_equation.py", root)
    text = _why("verdict", str(root), "--elements", "1000", "--no-cache")
    lines = text.splitlines()
    assert lines[0] == "Verdict NOT RECOMMENDED, decided by rule 3"
    assert len(lines) <= 15
    assert any("Gate 2 Problem size: fail (below-floor)" in ln for ln in lines[:6]), text
    assert any("verdict_rule(1, " in ln and "does not apply" in ln for ln in lines), text


def test_full_and_tree(examples: tuple[Path, Path]) -> None:
    root, cache = examples
    args = ["R104", "sync_in_loop.py:12", str(root), "--cache-dir", str(cache)]
    summary = _why(*args)
    full = _why(*args, "--full")
    tree = _why(*args, "--format", "tree")
    assert full.startswith(summary.splitlines()[0])
    assert tree.startswith('finding("R104", "sync_in_loop.py", 12, "descend")')
    assert "[rules/codes/R104/rules.dl:" in full and "[rules/codes/R104/rules.dl:" in tree
    assert "[rules/" not in summary
    # Handles name the same steps in the summary and in the whole proof.
    assert set(HANDLE.findall(summary)) <= set(HANDLE.findall(tree))


def test_expand_a_step_an_absent_atom_and_an_unmatched_rule(examples: tuple[Path, Path]) -> None:
    root, cache = examples
    base = ["verdict", str(root), "--cache-dir", str(cache)]
    summary = _why(*base)
    step = next(ln for ln in summary.splitlines() if "mpi4py is used beside the array code" in ln)
    (handle,) = HANDLE.findall(step)
    expanded = _why(*base, "--expand", handle)
    assert expanded.startswith("has_r108()")
    assert "[rules/codes/R108/rules.dl:" in expanded

    rule = next(ln for ln in summary.splitlines() if 'verdict_rule(2, "NOT RECOMMENDED")' in ln)
    (handle,) = HANDLE.findall(rule)
    why_not = _why(*base, "--expand", f"#{handle}")
    assert why_not.startswith('why verdict_rule(2, "NOT RECOMMENDED") does not apply')
    assert "gate4_failed" in why_not

    tree = _why(*base, "--format", "tree")
    absent = next(ln for ln in tree.splitlines() if "absent: host_numpy_call(" in ln)
    (handle,) = HANDLE.findall(absent)
    answer = _why(*base, "--expand", handle)
    assert answer.startswith("why host_numpy_call(")
    assert "device_module_file" in answer

    bad = runner.invoke(app, ["why", *base, "--expand", "0000000"])
    assert bad.exit_code == 2
    assert "no step #0000000" in bad.stderr


def test_why_not_depth_is_honoured(examples: tuple[Path, Path]) -> None:
    root, cache = examples
    args = ["not", "R104", "sync_in_loop.py:10", str(root), "--cache-dir", str(cache)]
    deep = _why(*args)
    shallow = _why(*args, "--depth", "0")
    assert len(shallow.splitlines()) < len(deep.splitlines())


def test_says_names_real_relations_and_columns() -> None:
    program = load_program(None)
    for fact in program.facts:
        if fact.atom.relation != "says":
            continue
        relation, words = (arg.value for arg in fact.atom.args)  # type: ignore[union-attr]
        assert relation in program.relations, relation
        columns = program.relations[relation].column_names
        for name in re.findall(r"\{(\w+)\}", str(words)):
            assert name in columns, (relation, name)


def test_a_custom_relation_without_words_folds_into_its_step(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "m.py").write_text(
        textwrap.dedent(
            """\
            import numpy as np


            def f(n):
                a = np.ones(n)
                for i in range(10):
                    s = float(a.sum())
                return s
            """
        )
    )
    text = _why("R104", "m.py:7", str(root), "--no-cache")
    assert text.splitlines()[0] == "R104 at m.py:7 in f: host materialization in a hot loop (BLOCKS)"
    assert not INTERNAL_ID.search(text)


@pytest.mark.skipif(not NUMPY_TREE.is_dir(), reason="the NumPy benchmark tree is not downloaded")
def test_numpy_verdict_and_gates_fit_in_sixty_lines(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for question in (["verdict"], *(["gate", str(g)] for g in range(1, 7))):
        text = _why(*question, str(NUMPY_TREE), "--cache-dir", str(cache))
        assert len(text.splitlines()) <= 60, text
        assert not INTERNAL_ID.search(text), text
