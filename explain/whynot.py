"""Why a tuple does not hold: for each rule that could derive it, the first literal that fails.

A rule body is read left to right (a literal is taken as soon as it can be evaluated, atoms that
share a bound variable first, so the order is the one a reader follows), and the longest prefix
that some binding satisfies is found with one query per literal.  The next literal is the one
"no fact satisfies": reported instantiated with a binding of the prefix, with the relation's doc
line, and, for a derived atom, recursively why *it* does not hold (to a small depth).

For a finding, the rules are those of `site` that derive the code, and the place is every node
on the line: `why not R104 x.py:52` asks, for each of those nodes, how far each rule gets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..engine import (
    Aggregate,
    Atom,
    BoolLit,
    Comparison,
    Const,
    Constraint,
    Database,
    DatalogError,
    Literal,
    Program,
    Rule,
    Var,
)
from ..engine.compile_sql import quote
from ..engine.plan import Planner
from ..engine.syntax import INTERNAL_VAR_PREFIX, literal_vars, term_vars
from ..facts.schema import INPUT_RELATIONS, NO_NODE
from .bodysql import BodyQuery, Value, literal
from .locations import Location, Locator, node_variables
from .terms import bound_value, first_sentence, show_literal, show_tuple, show_value

if TYPE_CHECKING:
    from .spans import AssessedSources


@dataclass(slots=True)
class RuleFailure:
    rule_index: int
    rule_where: str  # "rules/arrays.dl:836"
    rule_text: str
    message: str  # what fails and why, possibly several lines
    failing: str | None = None  # the failing literal, instantiated; None when the rule holds
    satisfied: list[str] = field(default_factory=list)  # the literals before it, instantiated
    binding: dict[str, Value] = field(default_factory=dict)
    causes: list[RuleFailure] = field(default_factory=list)  # why a failing derived atom fails
    # What holds in the failing atom's place (the nearest tuple: its bound values kept, the
    # rule's constants given up from the right), or, for a negated atom, the tuple that blocks.
    failing_relation: str | None = None
    instead_values: tuple | None = None
    instead: str = ""

    @property
    def holds(self) -> bool:
        return self.failing is None


@dataclass(slots=True)
class WhyNot:
    summary: str
    location: Location | None = None
    candidates: str = ""
    failures: list[RuleFailure] = field(default_factory=list)
    exists: bool = False  # the tuple does hold after all


# Why-not follows a failing derived atom into its rules only when it has at most this many.
MAX_CAUSE_RULES = 4
# Solutions of a rule prefix read to tell determined variables from open ones.
SAMPLE = 50
# A node shown by its code is cut to this many characters.
CODE_WIDTH = 40


def _type_of(value: Value) -> str:
    return "symbol" if isinstance(value, str) else "float" if isinstance(value, float) else "number"


class WhyNotAnalyzer:
    def __init__(
        self,
        db: Database,
        program: Program | None = None,
        *,
        source_line: Callable[[str, int], str] | None = None,
        max_depth: int = 3,
        locator: Locator | None = None,
        sources: AssessedSources | None = None,
    ) -> None:
        """`locator`: one a Prover already holds (its locations are looked up once).  With
        `sources` (the text each file was assessed from), nodes are shown by their code, with
        their column, and notebook lines by cell."""
        self.con = db.con
        self.program = program or db.program
        self.locator = locator or Locator(self.con, self.program, source_line, sources)
        self.max_depth = max_depth
        self.queries = 0  # SQL statements run, for the benchmark
        self._line_nodes: set[Value] = set()  # the nodes on the line a finding was expected at

    def _name(self, node_id: int) -> str | None:
        """A node by its code, `abs(lam - lam_old)`, where its text is known (else its id)."""
        loc = self.locator.node(node_id)
        if loc is None or not loc.code:
            return None
        code = " ".join(loc.code.split())
        return f"`{code if len(code) <= CODE_WIDTH else code[: CODE_WIDTH - 1] + '…'}`"

    # -- one rule --------------------------------------------------------------------------

    def rule_failure(
        self, rule: Rule, bindings: Mapping[str, Sequence[Value]], depth: int = 0
    ) -> RuleFailure:
        """How far `rule` gets with head variables bound to these values (any of them)."""
        order = self._order(rule, set(bindings))
        nodes = node_variables(self.program, rule.body)
        result = RuleFailure(rule.index, rule.where, " ".join(rule.text.split()), "")
        known: dict[str, list[Value]] = {name: list(values) for name, values in bindings.items()}
        capped = False
        for k in range(1, len(order) + 1):
            rows = self._solutions(rule, order[:k], bindings)
            if rows is None:
                continue  # this prefix cannot be evaluated on its own; the next one can
            if rows:
                known, capped = _values_per_variable(rows), len(rows) >= SAMPLE
                continue
            failing = order[k - 1]
            # Only values every solution of the prefix agrees on are written into the literal.
            determined = {name: values[0] for name, values in known.items() if len(values) == 1}
            result.satisfied = [show_literal(lit, determined, nodes, self._name) for lit in order[: k - 1]]
            result.binding = determined
            result.failing = show_literal(failing, determined, nodes, self._name)
            first = k == 1
            result.message = self._explain(failing, determined, known, nodes, first, capped)
            self._instead(result, failing, determined, nodes)
            if depth < self.max_depth and isinstance(failing, Atom) and not failing.negated:
                result.causes = self.atom_failures(failing, known, depth + 1)
            return result
        determined = {name: values[0] for name, values in known.items() if len(values) == 1}
        result.binding = determined
        result.message = f"holds: {show_literal(rule.head, determined, nodes, self._name)}"
        return result

    def _instead(
        self, result: RuleFailure, failing: Literal, binding: dict[str, Value], nodes: set[str]
    ) -> None:
        """What holds where the failing atom does not: `gate(2, _, "fail", _)` is missing, but
        `gate(2, "Problem size", "pass", ...)` holds; for `!x(...)`, the x tuple that blocks."""
        if not isinstance(failing, Atom):
            return
        rel = self.program.relations[failing.relation]
        result.failing_relation = failing.relation
        if failing.negated:
            found = self._blocker(failing, binding)
        else:
            values = [bound_value(arg, binding) for arg in failing.args]
            fixed = {i: v for i, v in enumerate(values) if v is not None}
            constants = [i for i, arg in enumerate(failing.args) if isinstance(arg, Const)]
            found = None
            while constants and found is None:
                fixed.pop(constants.pop())  # give up the rule's constants, the last first
                found = self._first_row(failing.relation, fixed)
        if found is not None:
            result.instead_values = found
            result.instead = show_tuple(
                failing.relation, found, self.locator.columns.get(rel.name, ()), self._name
            )

    def _first_row(self, relation: str, fixed: Mapping[int, Value]) -> tuple | None:
        rel = self.program.relations[relation]
        conds = [f"{quote(rel.column_names[i])} = {literal(v, rel.base_types[i])}" for i, v in fixed.items()]
        cols = ", ".join(quote(name) for name in rel.column_names) or "1"
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        order = f" ORDER BY {cols}" if rel.column_names else ""
        self.queries += 1
        row = self.con.execute(f"SELECT {cols} FROM {quote(relation)}{where}{order} LIMIT 1").fetchone()
        return None if row is None or not rel.column_names else tuple(row)

    def atom_failures(
        self, atom: Atom, known: Mapping[str, Sequence[Value]], depth: int
    ) -> list[RuleFailure]:
        """Why `atom` is not derived with its variables among `known` values, rule by rule."""
        rel = self.program.relations[atom.relation]
        if rel.is_input:
            return []
        pattern = [_values_of(arg, known) for arg in atom.args]
        applicable = []
        for rule in self.program.rules_for(atom.relation):
            head_binding = _unify(rule.head, pattern)
            if head_binding is not None:  # else it derives other constants than those asked for
                applicable.append((rule, head_binding))
        if len(applicable) > MAX_CAUSE_RULES:
            return []  # a relation with many alternatives (array_expr) would bury the answer
        return [self.rule_failure(rule, bound, depth) for rule, bound in applicable]

    # -- evaluation order and prefix queries -----------------------------------------------

    def _order(self, rule: Rule, bound: set[str]) -> list[Literal]:
        remaining = list(rule.body)
        bound = set(bound)
        order: list[Literal] = []
        while remaining:
            pick = next((lit for lit in remaining if _ready(lit, bound, connected=True)), None)
            if pick is None:
                pick = next((lit for lit in remaining if _ready(lit, bound, connected=False)), remaining[0])
            remaining.remove(pick)
            order.append(pick)
            bound |= {v.name for v in literal_vars(pick, into_aggregates=False)}
        return order

    def _solutions(
        self, rule: Rule, prefix: list[Literal], bindings: Mapping[str, Sequence[Value]]
    ) -> list[dict[str, Value]] | None:
        """Up to SAMPLE bindings satisfying `prefix`; None when the prefix cannot be planned."""
        types = {name: _type_of(values[0]) for name, values in bindings.items() if values}
        scope = {v.name for lit in rule.body for v in literal_vars(lit, into_aggregates=False)}
        scope |= {v.name for arg in rule.head.args for v in term_vars(arg)}
        try:
            plan = Planner(self.program.relations, self.program.source).plan_body(
                prefix, bound=dict(types), scope=scope
            )
        except DatalogError:
            return None
        outer: dict[str, str] = {}
        extra_from: list[str] = []
        for i, (name, values) in enumerate(bindings.items()):
            if len(values) == 1:
                outer[name] = literal(values[0], types[name])
            else:
                rows = ", ".join(f"({literal(v, types[name])})" for v in values)
                extra_from.append(f'(VALUES {rows}) AS "__cand{i}"("v")')
                outer[name] = f'"__cand{i}"."v"'
        query = BodyQuery(self.program.relations, plan)
        sql = query.sql(outer=outer, extra_from=extra_from, limit=SAMPLE)
        self.queries += 1
        return [row.binding for row in query.rows(self.con, sql)]

    # -- messages --------------------------------------------------------------------------

    def _explain(
        self,
        lit: Literal,
        binding: dict[str, Value],
        known: Mapping[str, Sequence[Value]],
        nodes: set[str],
        first: bool,
        capped: bool,
    ) -> str:
        shown = show_literal(lit, binding, nodes, self._name)
        open_vars = [
            v.name for v in literal_vars(lit, into_aggregates=False) if len(known.get(v.name, ())) > 1
        ]
        open_vars = list(dict.fromkeys(open_vars))
        lines: list[str] = []
        if isinstance(lit, Atom) and not lit.negated:
            rel = self.program.relations[lit.relation]
            line_wide = [name for name in open_vars if set(known[name]) == self._line_nodes]
            if first and line_wide:
                reason = "no node on that line matches it"
                open_vars = [name for name in open_vars if name not in line_wide]  # listed above
            elif rel.is_input and lit.relation in INPUT_RELATIONS:
                reason = "no extracted fact matches it"
            elif not self.program.rules_for(lit.relation):
                reason = "no such fact"
            else:
                reason = "not derived"
            lines.append(f"needs {shown}: {reason}{self._where(lit, binding, nodes)}")
            doc = first_sentence(rel.doc)
            if doc:
                lines.append(f"{lit.relation}: {doc}")
        elif isinstance(lit, Atom):
            blocker = self._blocker(lit, binding)
            text = f"needs absent: {show_literal(Atom(lit.relation, lit.args), binding, nodes, self._name)}"
            if blocker is not None:
                cols = self.locator.columns.get(lit.relation, ())
                loc = self.locator.tuple_location(lit.relation, blocker)
                where = f" — {loc}  {loc.source}".rstrip() if loc else ""
                text += f", but {show_tuple(lit.relation, blocker, cols, self._name)} holds{where}"
            lines.append(text)
        elif isinstance(lit, Comparison) and isinstance(lit.right, Aggregate):
            lines.append(f"needs {shown}: the aggregate has another value here")
        elif isinstance(lit, Comparison | Constraint | BoolLit):
            lines.append(f"needs {show_literal(lit, {})}, but {shown} is false")
        for name in open_vars:
            values = sorted(known[name])  # type: ignore[type-var]
            listed = ", ".join(show_value(v, name in nodes, self._name) for v in values[:6])
            count = f"{len(values)}{'+' if capped else ''}"
            more = f", … ({count} values)" if len(values) > 6 or capped else ""
            lines.append(f"where {name} is any of {listed}{more}")
        return "\n".join(lines)

    def _where(self, lit: Atom, binding: Mapping[str, Value], nodes: set[str]) -> str:
        for arg in lit.args:
            if isinstance(arg, Var) and arg.name in nodes and arg.name in binding:
                value = binding[arg.name]
                if isinstance(value, int) and value != NO_NODE:
                    loc = self.locator.node(value)
                    if loc is not None:
                        kind = f" ({loc.kind})" if loc.kind else ""
                        shown = show_value(value, True, self._name)
                        return f" — {shown}{kind} at {loc.position}  {loc.source}".rstrip()
        return ""

    def _blocker(self, lit: Atom, binding: Mapping[str, Value]) -> tuple | None:
        rel = self.program.relations[lit.relation]
        conds = []
        for name, base, arg in zip(rel.column_names, rel.base_types, lit.args, strict=True):
            value = bound_value(arg, binding)
            if value is not None:
                conds.append(f"{quote(name)} = {literal(value, base)}")
        cols = ", ".join(quote(name) for name in rel.column_names) or "1"
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        row = self.con.execute(f"SELECT {cols} FROM {quote(lit.relation)}{where} LIMIT 1").fetchone()
        return None if row is None else tuple(row)

    # -- findings --------------------------------------------------------------------------

    def _candidate(self, node_id: int, kind: str) -> str:
        """A node of the line: `abs(lam - lam_old)` (call, column 12), or n812 call."""
        named = self._name(node_id)
        if named is None:
            return f"{show_value(node_id, True)} {kind}"
        loc = self.locator.node(node_id)
        column = f", column {loc.column}" if loc is not None and loc.column is not None else ""
        return f"{named} ({kind}{column})"

    def finding(self, code: str, file: str, line: int) -> WhyNot:
        """Why there is no finding `code` at file:line."""
        exists = self.con.execute(
            'SELECT count(*) FROM "finding" WHERE "code" = ? AND "file" = ? AND "line" = ?',
            [code, file, line],
        ).fetchone()
        location = self.locator.at(file, line)
        if exists and exists[0]:
            return WhyNot(
                f"{code} at {location} is a finding; `cpq why {code} {location}` shows its proof",
                location,
                exists=True,
            )
        candidates = self.con.execute(
            'SELECT n."n", n."kind" FROM "node" n JOIN "scope" s ON s."s" = n."scope" '
            'WHERE s."file" = ? AND n."line" = ? ORDER BY n."n"',
            [file, line],
        ).fetchall()
        answer = WhyNot(f"no {code} finding at {location}", location)
        if not candidates:
            answer.summary += ": no statement or expression starts on that line"
            return answer
        self.locator.prefetch(n for n, _ in candidates[:12])
        shown = ", ".join(self._candidate(n, kind) for n, kind in candidates[:12])
        answer.candidates = shown + (f", … ({len(candidates)} in all)" if len(candidates) > 12 else "")
        ids = [n for n, _ in candidates]
        self._line_nodes = set(ids)
        holds = False
        for rule in self.program.rules_for("site"):
            code_arg, node_arg = rule.head.args
            if bound_value(code_arg, {}) != code or not isinstance(node_arg, Var):
                continue
            failure = self.rule_failure(rule, {node_arg.name: ids})
            failure.message = f"{code} {failure.message}" if not failure.holds else failure.message
            answer.failures.append(failure)
            holds = holds or failure.holds
        if holds:
            # The site is there; the finding rules (say, one line per function for SCALES) are not.
            pattern: list[list[Value] | None] = [[code], [file], [line], None]
            for rule in self.program.rules_for("finding"):
                head_binding = _unify(rule.head, pattern)
                if head_binding is not None:
                    answer.failures.append(self.rule_failure(rule, head_binding))
        return answer


def _ready(lit: Literal, bound: set[str], *, connected: bool) -> bool:
    """Whether `lit` can be evaluated now; with `connected`, positive atoms must share a binding."""
    if isinstance(lit, Atom) and not lit.negated:
        if not connected:
            return True
        return any(v.name in bound for v in literal_vars(lit)) or not literal_vars(lit)
    if isinstance(lit, Comparison) and lit.op == "=":
        for target, value in ((lit.left, lit.right), (lit.right, lit.left)):
            if isinstance(target, Var) and target.name not in bound:
                free = [v.name for v in term_vars(value, into_aggregates=False)]
                if all(name in bound for name in free):
                    return True
    names = [v.name for v in literal_vars(lit, into_aggregates=False)]
    return all(name in bound or name.startswith(INTERNAL_VAR_PREFIX) for name in names)


def _values_per_variable(rows: list[dict[str, Value]]) -> dict[str, list[Value]]:
    out: dict[str, list[Value]] = {}
    for row in rows:
        for name, value in row.items():
            values = out.setdefault(name, [])
            if value not in values:
                values.append(value)
    return out


def _values_of(term: object, known: Mapping[str, Sequence[Value]]) -> list[Value] | None:
    if isinstance(term, Const):
        return [term.value]
    if isinstance(term, Var) and term.name in known:
        return list(known[term.name])
    return None


def _unify(head: Atom, pattern: Sequence[list[Value] | None]) -> dict[str, list[Value]] | None:
    """Head variables bound by the known positions of `pattern` (each a list of allowed values);
    None when a constant of the head is not allowed."""
    out: dict[str, list[Value]] = {}
    for arg, allowed in zip(head.args, pattern, strict=True):
        if allowed is None:
            continue
        const = bound_value(arg, {})
        if const is not None:
            if const not in allowed:
                return None
        elif isinstance(arg, Var):
            merged = [v for v in out[arg.name] if v in allowed] if arg.name in out else list(allowed)
            if not merged:
                return None
            out[arg.name] = merged
    return out


def why_not_finding(
    db: Database,
    program: Program | None,
    code: str,
    file: str,
    line: int,
    *,
    source_line: Callable[[str, int], str] | None = None,
    max_depth: int = 3,
) -> WhyNot:
    analyzer = WhyNotAnalyzer(db, program, source_line=source_line, max_depth=max_depth)
    return analyzer.finding(code, file, line)
