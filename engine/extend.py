"""Queries that define relations of their own, over a program already evaluated.

    .decl reach(a: number, b: number)
    reach(X, Y) :- call_edge(X, Y).
    reach(X, Z) :- reach(X, Y), call_edge(Y, Z).
    reach(X, Y)

The text is Soufflé: declarations, rules and facts (recursion and stratified negation
included), then the body to answer, as `compile_query` takes it (a final `.` is allowed).  Its
rules read the relations of the *base*, the program whose results are in the database, as they
are: they may neither declare those again nor add rules or facts to them (checks.Base).  So
only the text's own relations are evaluated, in temporary tables beside the base's
(`Storage.beside`), with the engine's stratification, SQL and semi-naive rounds; nothing of the
base is evaluated again or written.

Where the definitions end and the body begins is found from the text: after the last `.` that
ends a clause (outside strings, comments and brackets), past any declarations that follow it.
Both parts keep the positions they have in the whole text (the other part blanked out), so an
error in either points at its line and column there.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from .errors import DatalogError, error_at
from .include import SourceMap
from .program import Program
from .query import variable_warnings
from .syntax import INTERNAL_VAR_PREFIX, Var, literal_vars


@dataclass(frozen=True, slots=True)
class Extension:
    """A query's own relations and the body to answer over them."""

    program: Program  # the base's relations and the text's own; rules and facts: the text's
    own: list[str]  # the relations the text declares
    body: str  # the body, blanked to the positions it has in the text
    warnings: list[DatalogError]  # in the rules: variables used once, variables named like a code


def parse_extension(text: str, base: Program, source: str = "<query>") -> Extension | None:
    """The definitions of a query text checked against `base`, and its body; None when the
    text is a body alone (compile_query takes it as it is).  DatalogError at the first problem:
    a syntax error, a relation of the base declared again or given rules, an unknown relation,
    an arity, a rule that is unsafe or recursive through negation."""
    # Imported here, as in compile_query: the parser loads lark.
    from .checks import Base, check_program
    from .parser import ParsedText, parse_query_text, parse_text
    from .stratify import stratify

    split = _split(text)
    if split is None:
        return None
    parsed: ParsedText | None = None
    failures: list[tuple[int, int, int, DatalogError]] = []
    definitions = body = ""
    for start in split:
        # The definitions cut where the body would begin (an end of input there is where
        # it is); the body with the text before it blanked, its positions kept.
        head, tail = text[:start], _blank(text, 0, start)
        try:
            candidate = parse_text(head, source)
        except DatalogError as exc:
            failures.append((exc.line, exc.column, 0, exc))
            continue
        try:
            parse_query_text(tail, source)
        except DatalogError as exc:
            failures.append((exc.line, exc.column, 1, exc))
            continue
        parsed, definitions, body = candidate, head, tail
        break
    if parsed is None:
        _check_for_a_body(text, source)
        # The error that got furthest into the text (the body's, on a tie): where reading
        # it really went wrong, rather than where a split that was never meant cut it.
        raise max(failures, key=lambda failure: failure[:3])[3]
    for io in parsed.io:
        if io.kind == "input":
            raise error_at(io, "a query reads no files: .input is not allowed here", source)
    checked = check_program(parsed, source, base=Base(base.relations, base.types, base.inline))
    strata = stratify(checked.relations, checked.rules, source)
    source_map = SourceMap(source)
    own = [decl.name for decl in parsed.decls]
    for name in own:
        rel = checked.relations[name]
        rel.file = source_map.entry_name
    program = Program(
        source=source,
        text=definitions,
        relations=checked.relations,
        rules=[dataclasses.replace(rule, file=source_map.entry_name) for rule in checked.rules],
        facts=[dataclasses.replace(fact, file=source_map.entry_name) for fact in checked.facts],
        types=checked.types,
        stratification=strata,
        plans=checked.plans,
        inline=checked.inline,
        source_map=source_map,
    )
    return Extension(program, own, body, _rule_warnings(parsed, source))


def _check_for_a_body(text: str, source: str) -> None:
    """A DatalogError when the whole text is definitions, with no body to answer after them."""
    from .parser import parse_text

    try:
        parsed = parse_text(text, source)
    except DatalogError:
        return
    example = "r(X)"
    if parsed.decls:
        last = parsed.decls[-1]
        example = f"{last.name}({', '.join(attr.name.capitalize() for attr in last.attrs)})"
    lines = text.rstrip().split("\n")
    raise DatalogError(
        f"no body to answer after the definitions: end the query with one, e.g. {example}",
        source=source,
        line=len(lines),
        column=len(lines[-1]) + 1,
    )


# -- where the body begins ---------------------------------------------------------------------

_WORD_START = re.compile(r"[A-Za-z_!(]")
_NAME_CHAR = re.compile(r"[A-Za-z0-9_]")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def _split(text: str) -> list[int] | None:
    """Where the body may begin, in the order to try: just after the last `.` that ends a
    clause, then each word after it (past declarations); None for a text without definitions."""
    ends: list[int] = []  # offsets just past a clause's final `.`
    words: list[int] = []  # offsets of words (and `!`, `(`) outside brackets
    directive = False
    depth = 0
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            i = _string_end(text, i)
            continue
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        if text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
            continue
        if char in "([{":
            if depth == 0 and char == "(" and not _after_name(text, i):
                words.append(i)
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char == ".":
            following = text[i + 1 : i + 2]
            if following.isalpha():
                directive = True  # `.decl`, `.type`, `.output`, ...
            elif not (following.isdigit() and text[i - 1 : i].isdigit()) and depth == 0:
                ends.append(i + 1)  # not the point of a decimal number
        elif depth == 0 and _WORD_START.match(char) and not _after_name(text, i):
            words.append(i)
        i += 1
    # A `.` with nothing after it ends the body (a query may end with one), not a clause.
    if ends and not _COMMENTS.sub("", text[ends[-1] :]).strip():
        ends.pop()
    if not ends and not directive:
        return None
    start = ends[-1] if ends else 0
    return [start, *(word for word in words if word >= start)]


def _string_end(text: str, start: int) -> int:
    """The offset just past the string literal opening at `start` (or the end of its line)."""
    i = start + 1
    while i < len(text) and text[i] not in '"\n':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _after_name(text: str, i: int) -> bool:
    """Whether `text[i]` continues a name (`r(` of an atom, `X1`), or a directive (`.decl`)."""
    return i > 0 and (bool(_NAME_CHAR.match(text[i - 1])) or text[i - 1] == ".")


def _blank(text: str, start: int, stop: int) -> str:
    """`text` with `start:stop` turned to spaces, its line breaks kept (positions stay)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:stop]) + text[stop:]


# -- warnings ----------------------------------------------------------------------------------


def _rule_warnings(parsed: object, source: str) -> list[DatalogError]:
    """As Soufflé warns: a variable a clause uses once (write `_`), and one named like a code
    (`C = R104` matches anything)."""
    from .parser import ParsedText

    assert isinstance(parsed, ParsedText)
    warnings: list[DatalogError] = []
    for clause in parsed.clauses:
        # A literal copied into several branches (DNF) is one occurrence: count by position.
        seen: dict[tuple[int, int], Var] = {}
        for head in clause.heads:
            for var in literal_vars(head):
                seen[(var.line, var.column)] = var
        for branch in clause.branches or []:
            for lit in branch:
                for var in literal_vars(lit):
                    seen[(var.line, var.column)] = var
        uses: dict[str, list[Var]] = {}
        for var in seen.values():
            if var.name.startswith(("_", INTERNAL_VAR_PREFIX)):
                continue
            uses.setdefault(var.name, []).append(var)
        warnings.extend(
            variable_warnings(
                uses,
                source,
                lambda name, first: error_at(
                    first, f"variable '{name}' is used only once in this clause; write _", source
                ),
            )
        )
    return sorted(warnings, key=lambda w: (w.line, w.column))
