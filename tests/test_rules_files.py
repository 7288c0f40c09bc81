"""The shipped rules as files: rules.dl includes the topic files under rules/ and each R-code's
rules/codes/RXXX/rules.dl, rules/schema.dl is generated from facts/schema.py, and `cpq rules
--export` joins them into one program."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from cpq.cli.app import app
from cpq.engine import Program, parse_program
from cpq.facts.schema import ALL_INPUTS, SCHEMA_DL, schema_dl
from cpq.pipeline.assessment import assess
from cpq.rules.program import load_program, rules_text
from cpq.rules.registry import registry

PACKAGE = Path(__file__).resolve().parent.parent
runner = CliRunner()
CODE_FOLDERS = "rules/codes/*/rules.dl"  # the include of every R-code's folder


def test_the_committed_schema_is_the_generated_one() -> None:
    """`python3 -m cpq.rules.write_schema` writes rules/schema.dl; run it after changing the schema."""
    assert (PACKAGE / SCHEMA_DL).read_text(encoding="utf-8") == schema_dl()


def test_the_schema_declares_every_input_and_types_node_ids() -> None:
    program = load_program()
    inputs = {name for name, rel in program.relations.items() if rel.is_input}
    assert inputs == set(ALL_INPUTS)
    assert program.types["Node"] == "number"
    assert program.relations["node"].columns[:2] == [("n", "Node"), ("kind", "symbol")]
    assert all(rel.file == SCHEMA_DL for name, rel in program.relations.items() if name in ALL_INPUTS)


def test_rules_dl_includes_every_topic_file_and_every_code_folder_once() -> None:
    included = re.findall(r'^#include "([^"]+)"$', (PACKAGE / "rules.dl").read_text(), flags=re.M)
    assert CODE_FOLDERS in included and len(set(included)) == len(included)
    topics = sorted(p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "rules").glob("*.dl"))
    assert sorted(name for name in included if name != CODE_FOLDERS) == topics
    folders = [f"rules/codes/{code}/rules.dl" for code in registry()]
    everything = sorted(p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "rules").rglob("*.dl"))
    assert everything == sorted(topics + folders)
    expanded = [file for name in included for file in (folders if name == CODE_FOLDERS else [name])]
    assert load_program().source_map.files == ["rules.dl", *expanded]  # type: ignore[union-attr]


def test_every_rule_fact_and_relation_knows_its_file_and_line() -> None:
    program = load_program()
    texts = {
        file: (PACKAGE / file).read_text(encoding="utf-8").splitlines() for file in program.source_map.files
    }  # type: ignore[union-attr]
    for rule in program.rules:
        assert texts[rule.file][rule.line - 1].strip() in rule.text, rule.where
    for fact in program.facts:
        assert texts[fact.file][fact.line - 1].startswith(fact.text), fact.where
    for rel in program.relations.values():
        assert f".decl {rel.name}(" in texts[rel.file][rel.line - 1], rel.where
    site = program.rules_for("site")
    assert {rule.file for rule in site} == {f"rules/codes/{code}/rules.dl" for code in registry()}


def _declarations(program: Program) -> list[tuple]:
    relations = program.relations.values()
    return [(r.name, r.columns, r.doc, r.is_input, r.is_output, r.qualifiers) for r in relations]


def _same_program(a: Program, b: Program) -> None:
    assert _declarations(a) == _declarations(b)
    assert [(str(r), r.text) for r in a.rules] == [(str(r), r.text) for r in b.rules]
    assert [f.text for f in a.facts] == [f.text for f in b.facts]
    assert a.types == b.types and a.strata == b.strata
    assert {k: [str(x.head) for x in v] for k, v in a.inline.items()} == {
        k: [str(x.head) for x in v] for k, v in b.inline.items()
    }


def test_the_export_parses_into_the_same_program(tmp_path: Path) -> None:
    target = tmp_path / "all.dl"
    done = runner.invoke(app, ["rules", "--export", str(target)])
    assert done.exit_code == 0, done.output
    text = target.read_text(encoding="utf-8")
    assert "#include" not in text and "// ---- from rules/arrays.dl\n" in text
    exported = parse_program(text, source=str(target))
    _same_program(exported, load_program())
    assert {rule.file for rule in exported.rules} == {"all.dl"}  # one file now
    stdout = runner.invoke(app, ["rules", "--export", "-"])
    assert stdout.exit_code == 0 and stdout.stdout == text == rules_text()


def test_the_export_is_a_rules_file_cpq_runs_with_the_same_findings(tmp_path: Path) -> None:
    target = tmp_path / "all.dl"
    target.write_text(rules_text(), encoding="utf-8")
    path = EXAMPLES / "sync_in_loop.py"
    shipped, exported = assess(path), assess(path, rules_path=target)
    assert shipped.db is not None and exported.db is not None
    assert sorted(shipped.db.rows("finding")) == sorted(exported.db.rows("finding"))
    assert (shipped.decision.verdict, shipped.decision.verdict_rule) == (
        exported.decision.verdict,
        exported.decision.verdict_rule,
    )


@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not installed")
def test_souffle_runs_the_export_on_exported_facts_with_the_same_findings(tmp_path: Path) -> None:
    facts, out, program = tmp_path / "facts", tmp_path / "out", tmp_path / "all.dl"
    out.mkdir()
    assert runner.invoke(app, ["rules", "--export", str(program)]).exit_code == 0
    exported = runner.invoke(app, ["facts", str(EXAMPLES), "--out", str(facts)])
    assert exported.exit_code == 0, exported.output
    subprocess.run(["souffle", "-F", str(facts), "-D", str(out), str(program)], check=True, timeout=600)
    lines = (out / "finding.csv").read_text().splitlines()
    souffle = {tuple(line.split("\t")) for line in lines if line}
    examples = assess(EXAMPLES)
    assert examples.db is not None
    assert souffle == {(c, f, str(ln), q) for c, f, ln, q in examples.db.rows("finding")}


def test_a_rules_file_of_ones_own_can_include_the_export_and_more(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "all.dl").write_text(rules_text(), encoding="utf-8")
    (tmp_path / "extra.dl").write_text(
        "// Files longer than 20 lines.\n.decl long_file(f: symbol)\n.output long_file\n"
        "long_file(F) :- source_file(F, _, N), N > 20.\n"
    )
    main = tmp_path / "mine.dl"
    main.write_text('#include "base/all.dl"\n#include "extra.dl"\n')
    program = load_program(main)
    assert [rule.where for rule in program.rules_for("long_file")] == ["extra.dl:4"]
    assert program.rules_for("finding")[0].file == "base/all.dl"
    result = assess(EXAMPLES / "sync_in_loop.py", rules_path=main)
    assert result.db is not None and result.db.rows("long_file") == [("sync_in_loop.py",)]
    (tmp_path / "extra.dl").write_text(".decl long_file(f: symbol)\nlong_file(F) :- nope(F).\n")
    args = ["assess", str(EXAMPLES / "sync_in_loop.py"), "--rules", str(main), "--no-cache"]
    done = runner.invoke(app, args)
    assert done.exit_code == 2 and f"{tmp_path / 'extra.dl'}:2:" in done.output


def test_every_relation_has_a_doc_of_its_own() -> None:
    """`cpq query --relations` shows the `//` block right above each `.decl` as the relation's
    doc: every relation has one, and none is a section banner (`// ====`) or a header that a
    blank line keeps apart from the first relation of its section: a gate's (`// Gate 2 —
    Problem size ...`) or an R-code's description (`// R104 host materialization ...: ...`)."""
    program = load_program()
    missing = [f"{rel.where} {rel.name}" for rel in program.relations.values() if not rel.doc.strip()]
    assert missing == []
    banners = [
        f"{rel.where} {rel.name}"
        for rel in program.relations.values()
        if any(line.strip() and set(line.strip()) == {"="} for line in rel.doc.splitlines())
    ]
    assert banners == []
    headers = [
        f"{rel.where} {rel.name}"
        for rel in program.relations.values()
        if re.match(r"Gate \d —|R\d{3} ", rel.doc)
    ]
    assert headers == []
