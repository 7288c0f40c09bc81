"""Proof reconstruction: why a tuple holds, down to extracted facts.

For a derived tuple the evaluator stored the round it first appeared in (`_iter`) and the rule
that derived it then (`_rule`).  One query per tuple finds an instantiation of that rule's body,
with the head fixed to the tuple and every positive atom read from tuples of earlier rounds
only, preferring the one whose newest body tuple is oldest.  Recursion follows strictly
decreasing rounds, so it ends, and each step is the first (hence shortest) way the tuple arose.
Negated atoms become "absent" leaves, comparisons "check" leaves, and aggregates show their
value with the tuples that make it (all of them for count/sum/mean up to a limit, the witness
for min/max), each proved in turn.  A tuple proved once is referenced later, not re-proved.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..engine import Aggregate, Atom, Comparison, Const, Database, Literal, Program, Var
from ..engine.compile_sql import quote
from ..engine.plan import AggregatePlan, BodyPlan
from ..facts.schema import INPUT_RELATIONS
from .bodysql import BodyQuery, BodyRow, Value, literal
from .locations import Location, Locator, NodeLocation, const_values, node_variables
from .terms import bound_value, show_check, show_literal, show_term, show_tuple, show_value

if TYPE_CHECKING:
    from .spans import AssessedSources

# Input relations that do not come from the user's code, and what they are.
_INPUT_ORIGINS = {
    "context_number": "context",
    "context_symbol": "context",
    "suppressed": "suppression",
    "api_support": "API manifest",
    "api_alias": "API manifest",
}


# Hex digits of a step's handle: one proof has at most a few thousand steps, so two that
# differ share a handle with a chance well under one in a thousand.
HANDLE_LENGTH = 7


@dataclass(frozen=True, slots=True)
class RuleRef:
    index: int
    line: int
    text: str  # the clause as written, on one line
    source: str  # the program file it is in, for "[rules/arrays.dl:836]"

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


@dataclass(slots=True)
class ProofNode:
    """One line of a proof.

    kind: "derived" (a tuple and the rule that made it), "fact" (written in the rules file),
    "input" (extracted from the code, or context/manifest), "absent" (a negated atom),
    "check" (a comparison or constraint that held), "aggregate" (its value; children are the
    tuples behind it), "ref" (a tuple proved above), "more" (witnesses left out), "unmatched" (a
    rule an earlier match would have won with, and the literal it misses: first-match rules).

    `handle` names the step by what it holds (the tuple, the absent atom, the rule), so the
    same step has the same handle in the summary, in --full and in a later run over the same
    results: `cpq why ... --expand H` finds it again.  `id` numbers nodes within one proof.
    """

    id: int
    kind: str
    text: str
    relation: str | None = None
    values: tuple = ()
    iteration: int | None = None
    rule: RuleRef | None = None
    origin: str = ""  # for facts: "extracted fact", "fact, rules/codes/R104/rules.dl:2", "context", ...
    location: Location | None = None
    node_locations: tuple[NodeLocation, ...] = ()  # each node column's node, where it is
    value: Value | None = None  # aggregates
    ref: int | None = None  # "ref": id of the node that holds the proof
    truncated: bool = False  # --depth cut the proof below this node
    members: int = 0  # aggregates: how many tuples it ranges over (children show the first)
    op: str = ""  # aggregates: count, sum, min, ...
    member: bool = False  # the first literal of one member of an aggregate
    # "absent": the negated atom's relation and its values (None where a wildcard or unbound).
    pattern: tuple = ()
    children: list[ProofNode] = field(default_factory=list)

    @property
    def handle(self) -> str:
        if self.kind in ("derived", "fact", "input", "ref"):
            key: tuple = ("tuple", self.relation, self.values)
        elif self.kind in ("absent", "unmatched"):
            key = (self.kind, self.relation, self.pattern, self.rule.index if self.rule else None)
        else:
            key = (self.kind, self.text)
        digest = hashlib.blake2b(repr(key).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        return digest[:HANDLE_LENGTH]

    def walk(self) -> Iterator[ProofNode]:
        yield self
        for child in self.children:
            yield from child.walk()


class NotDerived(LookupError):
    """The tuple to prove is not in the database."""


class Prover:
    """Builds proofs against an evaluated Database; proofs built by one Prover share subproofs."""

    def __init__(
        self,
        db: Database,
        program: Program | None = None,
        *,
        source_line: Callable[[str, int], str] | None = None,
        max_depth: int | None = None,
        max_witnesses: int = 3,
        prove_members: bool = True,
        sources: AssessedSources | None = None,
    ) -> None:
        """`prove_members=False`: an aggregate's members are shown, not proved (what a
        summary needs: each is one line, with its own `cpq why`)."""
        self.db = db
        self.con = db.con
        self.program = program or db.program
        self.locator = Locator(self.con, self.program, source_line, sources)
        self.max_depth = max_depth
        self.max_witnesses = max_witnesses
        self.prove_members = prove_members
        self.queries = 0  # SQL statements run, for the benchmark
        self._ids = itertools.count(1)
        self._proved: dict[tuple[str, tuple], ProofNode] = {}
        self._plans: dict[int, BodyQuery] = {}
        self._facts: dict[tuple[str, tuple], str] | None = None  # a fact -> where it is written
        self._recursive: dict[str, frozenset[str]] | None = None

    # -- entry point -----------------------------------------------------------------------

    def prove(self, relation: str, values: tuple | list) -> ProofNode:
        """The proof tree of `relation(values)`; raises NotDerived when the tuple does not hold."""
        values = tuple(values)
        found = self.lookup(relation, values)
        if found is None:
            raise NotDerived(f"{show_tuple(relation, values)} does not hold")
        node = self._tuple(relation, values, found[0], found[1], depth=0, needs={})
        self._locate(node)
        return node

    def lookup(self, relation: str, values: tuple) -> tuple[int, int | None] | None:
        rel = self.program.relations[relation]
        conds = [
            f"{quote(name)} = {literal(value, base)}"
            for name, value, base in zip(rel.column_names, values, rel.base_types, strict=True)
        ]
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        self.queries += 1
        row = self.con.execute(f'SELECT "_iter", "_rule" FROM {quote(relation)}{where} LIMIT 1').fetchone()
        return None if row is None else (int(row[0]), row[1])

    # -- tuples ----------------------------------------------------------------------------

    def _tuple(
        self,
        relation: str,
        values: tuple,
        iteration: int,
        rule_index: int | None,
        depth: int,
        needs: dict[int, int],
        cut: bool = False,
    ) -> ProofNode:
        """`needs`: column -> how many members the aggregate making that column must show (the
        caller compares the column with a threshold: `N >= 3` needs 3)."""
        key = (relation, values)
        shown = self._proved.get(key)
        text = show_tuple(relation, values, self.locator.columns.get(relation, ()))
        if shown is not None:
            return ProofNode(next(self._ids), "ref", text, relation, values, iteration, ref=shown.id)
        node = ProofNode(next(self._ids), "derived", text, relation, values, iteration)
        if iteration == 0 or rule_index is None:
            node.kind, node.origin = self._fact_origin(relation, values)
            self._proved[key] = node
            return node
        rule = self.program.rules[int(rule_index)]
        text = " ".join(rule.text.split())
        if rule.inlined:  # the body below joins what these relations stand for
            text += (
                "  (inline: "
                + ", ".join(
                    f"{name} at {self.program.where(self.program.inline[name][0].head.line)}"
                    for name in rule.inlined
                    if self.program.inline.get(name)
                )
                + ")"
            )
        node.rule = RuleRef(rule.index, rule.line, text, rule.file)
        if cut or (self.max_depth is not None and depth >= self.max_depth):
            node.truncated = True
            return node  # not remembered: a shallower reference may still expand it
        self._proved[key] = node
        query = self._query(rule.index)
        rel = self.program.relations[relation]
        fixed = [
            (arg, value, base)
            for arg, value, base in zip(rule.head.args, values, rel.base_types, strict=True)
            if not isinstance(arg, Const)
        ]
        sql = query.sql(fixed_terms=fixed, before_iter=iteration, shortest_first=True, limit=1)
        self.queries += 1
        rows = query.rows(self.con, sql)
        if not rows:  # only if the database changed after evaluation
            node.children.append(
                ProofNode(next(self._ids), "check", "no body instantiation found (database changed?)")
            )
            return node
        nodes = node_variables(self.program, rule.body)
        wanted = {
            arg.name: count
            for column, count in needs.items()
            if isinstance(arg := rule.head.args[column], Var)
        }
        node.children = self._body(rule.body, query.plan, rows[0], depth + 1, nodes, wanted)
        return node

    def _fact_origin(self, relation: str, values: tuple) -> tuple[str, str]:
        if relation in INPUT_RELATIONS:
            return "input", "extracted fact"
        if self._facts is None:
            self._facts = {}
            for fact in self.program.facts:
                fact_values = const_values(fact.atom)
                if fact_values is not None:
                    self._facts.setdefault((fact.atom.relation, fact_values), fact.where)
        where = self._facts.get((relation, values))
        if where is not None:
            return "fact", f"fact, {where}"
        return "input", _INPUT_ORIGINS.get(relation, "input fact")

    def _query(self, rule_index: int) -> BodyQuery:
        query = self._plans.get(rule_index)
        if query is None:
            head = self.program.rules[rule_index].head.relation
            query = BodyQuery(self.program.relations, self.program.plans[rule_index], self._stratum_of(head))
            self._plans[rule_index] = query
        return query

    def _stratum_of(self, relation: str) -> frozenset[str]:
        """The relations of `relation`'s stratum when it is recursive (else none)."""
        if self._recursive is None:
            self._recursive = {
                name: frozenset(stratum.relations)
                for stratum in self.program.stratification
                if stratum.recursive
                for name in stratum.relations
            }
        return self._recursive.get(relation, frozenset())

    # -- bodies ----------------------------------------------------------------------------

    def _body(
        self,
        body: tuple[Literal, ...],
        plan: BodyPlan,
        row: BodyRow,
        depth: int,
        nodes: set[str],
        shown: dict[str, int] | None = None,
        cut: bool = False,
    ) -> list[ProofNode]:
        """`shown`: aggregate variable -> members to show (from the head's `needs`)."""
        # The planner lists positive atoms in body order, and the query exposes them that way.
        positive = iter(zip(plan.atoms, row.atoms, strict=True))
        thresholds = {**_thresholds(body, row.binding), **(shown or {})}
        out: list[ProofNode] = []
        for lit in body:
            if isinstance(lit, Atom) and not lit.negated:
                atom, (values, iteration, rule_index) = next(positive)
                needs = {
                    i: thresholds[arg.name]
                    for i, arg in enumerate(lit.args)
                    if isinstance(arg, Var) and arg.name in thresholds
                }
                out.append(self._tuple(atom.relation, values, iteration, rule_index, depth, needs, cut))
            elif isinstance(lit, Atom):
                plain = Atom(lit.relation, lit.args)
                text = "absent: " + show_literal(plain, row.binding, nodes)
                pattern = tuple(bound_value(arg, row.binding) for arg in lit.args)
                out.append(ProofNode(next(self._ids), "absent", text, lit.relation, pattern=pattern))
            elif isinstance(lit, Comparison) and isinstance(lit.right, Aggregate):
                assert isinstance(lit.left, Var)  # the parser gives every aggregate `V = agg`
                wanted = thresholds.get(lit.left.name)
                out.append(self._aggregate(lit.left, lit.right, plan, row.binding, depth, nodes, wanted))
            else:
                text = show_check(lit, row.binding, nodes)  # type: ignore[arg-type]
                out.append(ProofNode(next(self._ids), "check", text))
        return out

    def _aggregate(
        self,
        target: Var,
        agg: Aggregate,
        plan: BodyPlan,
        binding: dict[str, Value],
        depth: int,
        nodes: set[str],
        wanted: int | None = None,
    ) -> ProofNode:
        """The aggregate's value and the members behind it: the witness of a min/max (with, for
        a first-match min/max over rules, why each rule before it does not apply), else the
        first `wanted` members when a threshold is known (`N >= 3`: three), else a few."""
        agg_plan = next(
            value for _, value in plan.assigns if isinstance(value, AggregatePlan) and value.aggregate == agg
        )
        value = binding.get(target.name)
        outer_binding = {name: binding[name] for name in agg_plan.correlated if name in binding}
        shown = _show_aggregate(agg, outer_binding, nodes)
        prefix = "" if target.name.startswith("$") else f"{target.name} = "
        text = f"{prefix}{shown} = {show_value(value)}"
        node = ProofNode(next(self._ids), "aggregate", text, value=value, op=agg.op)
        if self.max_depth is not None and depth >= self.max_depth:
            node.truncated = True
            return node
        query = BodyQuery(self.program.relations, agg_plan.body)
        outer = {name: literal(v, plan.types.get(name)) for name, v in outer_binding.items()}
        fixed = []
        if agg.op in ("min", "max") and agg.target is not None and value is not None:
            fixed.append((agg.target, value, agg_plan.result_type or "number"))
        if fixed:
            limit = 1
        elif wanted is not None and 0 < wanted <= _MAX_WANTED:
            limit = wanted
        else:
            limit = self.max_witnesses
        # Members in the order of their values: the same after an update as after a fresh run.
        sql = query.sql(fixed_terms=fixed, outer=outer, by_values=True, limit=limit + _LISTED_MORE)
        self.queries += 1
        rows = query.rows(self.con, sql)
        inner_nodes = nodes | node_variables(self.program, agg.body)
        for row in rows[:limit]:
            row.binding.update(outer_binding)
            literals = self._body(
                agg.body, agg_plan.body, row, depth + 1, inner_nodes, cut=not self.prove_members
            )
            if literals:
                literals[0].member = True
            node.children.extend(literals)
        node.members = len(rows)
        if len(rows) > limit and not fixed:
            total = len(rows) if len(rows) < limit + _LISTED_MORE else self._count(query.sql(outer=outer))
            node.members = total
            node.children.append(self._more(rows[limit:], total - limit, agg_plan.body, rows[:limit]))
        if fixed and agg.op in ("min", "max") and value is not None:
            node.children.extend(self._unmatched(agg, value))
        return node

    def _more(self, rows: list[BodyRow], left_out: int, plan: BodyPlan, shown: list[BodyRow]) -> ProofNode:
        """One line for the members not shown: where the first of them are, and how many."""
        first = plan.atoms[0].relation if plan.atoms else ""
        seen = {str(self.locator.tuple_location(first, row.atoms[0][0])) for row in shown if row.atoms}
        places: list[str] = []
        for row in rows:
            if not row.atoms:
                continue
            loc = self.locator.tuple_location(first, row.atoms[0][0])
            if loc is not None:
                place = str(loc)
                if place not in places and place not in seen:
                    places.append(place)
        listed = f": {', '.join(places)}{', …' if left_out > len(places) else ''}" if places else ""
        return ProofNode(next(self._ids), "more", f"… and {left_out:,} more{listed}", members=left_out)

    def _unmatched(self, agg: Aggregate, winner: Value) -> list[ProofNode]:
        """For `R = min X : { r(X, ...) }` where r's rules have constant X (first-match rules,
        like the verdict's), why each rule that would have come first does not apply."""
        if len(agg.body) != 1 or not isinstance(agg.body[0], Atom) or not isinstance(agg.target, Var):
            return []
        atom = agg.body[0]
        position = next(
            (i for i, arg in enumerate(atom.args) if isinstance(arg, Var) and arg.name == agg.target.name),
            None,
        )
        if position is None or not isinstance(winner, int | float):
            return []
        earlier = []
        for rule in self.program.rules_for(atom.relation):
            arg = rule.head.args[position]
            if isinstance(arg, Const) and isinstance(arg.value, int | float):
                before = arg.value < winner if agg.op == "min" else arg.value > winner
                if before:
                    earlier.append(rule)
        if not earlier:
            return []
        from .whynot import WhyNotAnalyzer  # whynot imports this module

        analyzer = WhyNotAnalyzer(self.db, self.program, locator=self.locator, max_depth=0)
        out = []
        for rule in earlier:
            failure = analyzer.rule_failure(rule, {})
            self.queries += analyzer.queries
            analyzer.queries = 0
            head = show_literal(rule.head, {}, set())
            missing = failure.failing or "?"
            text = f"{head} does not apply: needs {missing}"
            if failure.instead:
                text += f"; instead {failure.instead}"
            node = ProofNode(next(self._ids), "unmatched", text, rule.head.relation)
            node.rule = RuleRef(rule.index, rule.line, " ".join(rule.text.split()), rule.file)
            node.pattern = (failure.failing_relation, failure.instead_values)
            out.append(node)
        return out

    def _count(self, sql: str) -> int:
        self.queries += 1
        row = self.con.execute(f"SELECT count(*) FROM ({sql})").fetchone()
        return int(row[0]) if row else 0

    # -- locations -------------------------------------------------------------------------

    def _locate(self, root: ProofNode) -> None:
        tuples = [
            n for n in root.walk() if n.relation is not None and n.kind in ("derived", "fact", "input", "ref")
        ]
        ids: list[int] = []
        for n in tuples:
            cols = self.locator.columns.get(n.relation or "", ())
            ids.extend(n.values[i] for i in cols)
        self.locator.prefetch(ids)  # one query for the whole tree
        for n in tuples:
            if n.location is None:
                n.location = self.locator.tuple_location(n.relation or "", n.values)
                n.node_locations = self.locator.node_locations(n.relation or "", n.values)


# An aggregate shows at most this many members for a threshold (`N >= 3` shows 3), and lists
# where this many more are.
_MAX_WANTED = 10
_LISTED_MORE = 4


def _thresholds(body: tuple[Literal, ...], binding: dict[str, Value]) -> dict[str, int]:
    """Variables the body compares with a number from below (`N >= T`, `N > T`, `T <= N`): how
    many members an aggregate behind them needs to show so that the comparison still holds."""
    out: dict[str, int] = {}
    capped: set[str] = set()  # compared from above too: the count itself matters, not a few
    for lit in body:
        if not isinstance(lit, Comparison) or isinstance(lit.right, Aggregate):
            continue
        pairs: list[tuple[object, str, object]] = [(lit.left, lit.op, lit.right)]
        flipped = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}.get(lit.op)
        if flipped is not None:
            pairs.append((lit.right, flipped, lit.left))
        for var, op, bound in pairs:
            if not isinstance(var, Var):
                continue
            if op in ("<", "<=", "="):
                capped.add(var.name)
                continue
            value = bound_value(bound, binding)
            if op in (">=", ">") and isinstance(value, int) and not isinstance(value, bool):
                out[var.name] = value + (1 if op == ">" else 0)
    return {name: count for name, count in out.items() if name not in capped}


def _show_aggregate(agg: Aggregate, outer: dict[str, Value], nodes: set[str]) -> str:
    """The aggregate as written, with the variables it shares with the rule replaced by values."""
    body = ", ".join(show_literal(lit, outer, nodes) for lit in agg.body)
    target = "" if agg.target is None else " " + show_term(agg.target, outer, nodes)
    return f"{agg.op}{target} : {{ {body} }}"


def prove(
    db: Database,
    program: Program | None,
    relation: str,
    values: tuple | list,
    *,
    source_line: Callable[[str, int], str] | None = None,
    max_depth: int | None = None,
    sources: AssessedSources | None = None,
) -> ProofNode:
    """The proof tree of one tuple (see Prover for proofs that share subproofs)."""
    prover = Prover(db, program, source_line=source_line, max_depth=max_depth, sources=sources)
    return prover.prove(relation, values)
