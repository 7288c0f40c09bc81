"""Ad-hoc conjunctive queries: a rule body without a head, e.g. ``finding(C, F, L), C = "R1"``."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .compile_sql import SqlCompiler
from .errors import DatalogError, error_at
from .inline import Definitions, Expander
from .plan import Planner
from .syntax import INTERNAL_VAR_PREFIX, Relation, Var, literal_vars


@dataclass(frozen=True, slots=True)
class CompiledQuery:
    columns: list[str]  # named variables, in order of first appearance
    sql: str  # SELECT DISTINCT ... ORDER BY all columns


def compile_query(
    text: str,
    relations: dict[str, Relation],
    source: str = "<query>",
    inline: Definitions | None = None,
) -> CompiledQuery:
    """Parse, check and compile a query; raises DatalogError with positions inside `text`.
    `inline`: the rules of the program's inline relations, which the query may use."""
    # Imported here: the parser loads lark, which a run that only evaluates does not need.
    from .checks import check_literals
    from .parser import parse_query_text

    branches = parse_query_text(text, source)
    columns: list[str] = []
    first_seen: dict[str, Var] = {}
    for branch in branches:
        for lit in branch:
            for var in literal_vars(lit, into_aggregates=False):
                if var.name.startswith(INTERNAL_VAR_PREFIX) or var.name in first_seen:
                    continue
                first_seen[var.name] = var
                columns.append(var.name)
    # Branches come out of DNF in textual order except after distribution; sort by position.
    columns.sort(key=lambda name: (first_seen[name].line, first_seen[name].column))

    planner = Planner(relations, source)
    compiler = SqlCompiler(relations)
    selects = []
    for branch in branches:
        check_literals(branch, relations, source)
        names, plan = planner.plan_query(branch)
        for name in columns:
            if name not in names:
                raise error_at(
                    first_seen[name],
                    f"variable '{name}' does not occur in every alternative of the query",
                    source,
                )
        bodies = Expander(inline, source).expand(branch) if inline else [branch]
        if bodies == [branch] or not bodies:
            # Nothing inline, or an inline relation without rules, whose empty table it reads.
            selects.append(compiler.select_query(columns, plan))
            continue
        for body in bodies:
            selects.append(compiler.select_query(columns, planner.plan_query(body)[1]))
    sql = " UNION ".join(f"({select})" for select in selects) if len(selects) > 1 else selects[0]
    if columns:
        sql += " ORDER BY " + ", ".join(str(i + 1) for i in range(len(columns)))
    return CompiledQuery(columns, sql)


# An upper-case word reads as a variable: `C = R104` binds C to anything, not to the code R104.
_LOOKS_LIKE_A_CODE = re.compile(r"R\d{3}")


def code_like_warning(var: Var, source: str) -> DatalogError | None:
    """A warning for a variable named like an R-code, which matches anything; else None."""
    if not _LOOKS_LIKE_A_CODE.fullmatch(var.name):
        return None
    return error_at(
        var, f'{var.name} is a variable here (it matches anything); write "{var.name}" for the code', source
    )


def query_warnings(text: str, source: str = "<query>") -> list[DatalogError]:
    """What in a query parses but is likely a slip: a variable named like an R-code (unquoted,
    it matches anything), and a variable used once whose name is like another's (a typo).

    Soufflé warns about every variable used once in a rule; in a query every named variable is
    a column of the answer, so a variable used once is the ordinary way to show a column, and
    only one spelled like another variable is worth a warning."""
    import difflib  # only a query pays for it, not every run that imports the engine

    from .parser import parse_query_text  # lark, as in compile_query

    uses: dict[str, list[Var]] = {}
    for branch in parse_query_text(text, source):
        for lit in branch:
            for var in literal_vars(lit):
                if var.name != "_" and not var.name.startswith(INTERNAL_VAR_PREFIX):
                    uses.setdefault(var.name, []).append(var)

    def typo(name: str, first: Var) -> DatalogError | None:
        others = [other for other, seen in uses.items() if other != name and len(seen) > 1]
        alike = [other for other in others if other.lower() == name.lower()]
        if not alike and len(name) > 2:
            long_names = [other for other in others if len(other) > 2]
            alike = difflib.get_close_matches(name, long_names, n=1, cutoff=0.8)
        if not alike:
            return None
        return error_at(
            first,
            f"variable '{name}' is used only once (did you mean '{alike[0]}'?); "
            "write _ for a column you do not need",
            source,
        )

    return variable_warnings(uses, source, typo)


def variable_warnings(
    uses: dict[str, list[Var]], source: str, singleton: Callable[[str, Var], DatalogError | None]
) -> list[DatalogError]:
    """For each variable (its occurrences): the warning for a name like a code, else, for one
    used once, what `singleton` says of it; sorted by position."""
    warnings = []
    for name, occurrences in uses.items():
        first = min(occurrences, key=lambda v: (v.line, v.column))
        code_like = code_like_warning(first, source)
        if code_like is not None:
            warnings.append(code_like)
        elif len(occurrences) == 1:
            found = singleton(name, first)
            if found is not None:
                warnings.append(found)
    return sorted(warnings, key=lambda w: (w.line, w.column))
