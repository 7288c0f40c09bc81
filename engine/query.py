"""Ad-hoc conjunctive queries: a rule body without a head, e.g. ``finding(C, F, L), C = "R1"``."""

from __future__ import annotations

from dataclasses import dataclass

from .compile_sql import SqlCompiler
from .errors import error_at
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
