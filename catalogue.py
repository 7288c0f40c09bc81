"""The R-code catalogue as rules.dl states it: code_info facts and the rules per code."""

from __future__ import annotations

from .engine import Const
from .program import load_program


def catalogue_rows() -> list[tuple[str, str, str, str]]:
    program = load_program()
    rows = []
    for fact in program.facts:
        if fact.atom.relation == "code_info":
            code, kind, title, recipe = (str(arg.value) for arg in fact.atom.args if isinstance(arg, Const))
            rows.append((code, kind, title, recipe))
    return sorted(rows)


def rule_texts(code: str) -> list[tuple[int, str]]:
    """The clauses of rules.dl that derive `site(code, ...)`, with their line numbers."""
    program = load_program()
    seen: set[int] = set()
    out = []
    for rule in program.rules:
        if rule.head.relation != "site" or rule.line in seen:
            continue
        first = rule.head.args[0]
        if isinstance(first, Const) and first.value == code:
            seen.add(rule.line)
            out.append((rule.line, rule.text))
    return out
