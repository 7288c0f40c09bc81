"""The R-code catalogue as rules.dl states it: code_info facts and the rules per code (of the
shipped rules, or of a user's --rules file with its own codes)."""

from __future__ import annotations

from pathlib import Path

from ..engine import Const, Program
from .program import load_program


def catalogue_rows(rules_path: Path | None = None) -> list[tuple[str, str, str, str]]:
    return program_codes(load_program(rules_path))


def code_names(program: Program) -> list[str]:
    """The codes of `program`'s code_info facts (R104, ..., a --rules file's T001)."""
    return [code for code, _, _, _ in program_codes(program)]


def program_codes(program: Program) -> list[tuple[str, str, str, str]]:
    """The (code, kind, title, recipe) of each code_info fact of `program`: the shipped
    catalogue, with a --rules file's own codes (T001, ...) when it adds some."""
    rows = []
    for fact in program.facts:
        if fact.atom.relation == "code_info":
            code, kind, title, recipe = (str(arg.value) for arg in fact.atom.args if isinstance(arg, Const))
            rows.append((code, kind, title, recipe))
    return sorted(rows)


def rule_texts(code: str, rules_path: Path | None = None) -> list[tuple[str, str]]:
    """The clauses of the rules that derive `site(code, ...)`, with where they are written
    ("rules/arrays.dl:123")."""
    program = load_program(rules_path)
    seen: set[str] = set()
    out = []
    for rule in program.rules:
        if rule.head.relation != "site" or rule.where in seen:
            continue
        first = rule.head.args[0]
        if isinstance(first, Const) and first.value == code:
            seen.add(rule.where)
            out.append((rule.where, rule.text))
    return out
