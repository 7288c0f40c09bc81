"""One R-code, one place: each code's folder under rules/codes/ holds its Datalog too, so the
shipped program says nothing of a code outside that folder."""

from __future__ import annotations

from collections import defaultdict

from cpq.engine.syntax import Const
from cpq.rules.program import load_program
from cpq.rules.registry import registry


def _code_named(term: object) -> str:
    assert isinstance(term, Const) and term.type == "symbol", term
    return str(term.value)


def test_every_code_folder_has_rules_whose_code_info_is_its_own_code() -> None:
    written_in: dict[str, list[str]] = defaultdict(list)
    for fact in load_program().facts:
        if fact.atom.relation == "code_info":
            written_in[fact.file].append(_code_named(fact.atom.args[0]))
    assert written_in == {f"rules/codes/{code}/rules.dl": [code] for code in registry()}
    assert all((entry.folder / "rules.dl").is_file() for entry in registry().values())


def test_every_site_rule_lives_in_its_own_code_folder() -> None:
    site = load_program().rules_for("site")
    misplaced = [
        rule.where for rule in site if rule.file != f"rules/codes/{_code_named(rule.head.args[0])}/rules.dl"
    ]
    assert site and misplaced == []
    assert {_code_named(rule.head.args[0]) for rule in site} == set(registry())
