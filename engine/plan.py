"""Binding analysis of a conjunctive body: safety, variable types and evaluation order.

The plan says which positive atoms bind which variables, in which order assignments
(``X = expr``) and aggregates can be computed, and which literals remain filters.  The SQL
compiler follows the plan literally, so whatever the planner accepts compiles, and everything
unsafe is rejected here with the position of the offending variable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .errors import DatalogError, error_at
from .syntax import (
    INTERNAL_VAR_PREFIX,
    Aggregate,
    Atom,
    BinOp,
    BoolLit,
    Call,
    Comparison,
    Const,
    Constraint,
    Literal,
    PickledByFields,
    Relation,
    Term,
    UnaryMinus,
    Var,
    Wildcard,
    literal_vars,
    subterms,
    term_vars,
)
from .typesys import (
    CONSTRAINT_FUNCTORS,
    FUNCTORS,
    NUMERIC,
    SAME,
    Signature,
    compatible,
    kind,
    numeric_join,
)


@dataclass(frozen=True, slots=True)
class AtomArgFilter(PickledByFields):
    """A positive atom argument that is an expression: ``column = expr`` once expr is bound."""

    atom_index: int
    column_index: int
    term: Term


@dataclass(frozen=True, slots=True)
class ExistsIn:
    """A filter of incremental maintenance: the atom's tuple is in `table` (a negated atom
    turned into a test against the tuples its relation gained or lost)."""

    atom: Atom
    table: str


Filter = Comparison | Constraint | Atom | BoolLit | AtomArgFilter | ExistsIn


@dataclass(slots=True)
class AggregatePlan(PickledByFields):
    aggregate: Aggregate
    correlated: list[str]  # variables bound outside and used inside
    body: BodyPlan
    result_type: str | None


@dataclass(slots=True)
class BodyPlan(PickledByFields):
    atoms: list[Atom] = field(default_factory=list)  # positive atoms, in body order
    # `var := value` in a computable order; value is a term or a planned aggregate.
    assigns: list[tuple[str, Term | AggregatePlan]] = field(default_factory=list)
    filters: list[Filter] = field(default_factory=list)  # negations, comparisons, constraints
    types: dict[str, str | None] = field(default_factory=dict)


class Planner:
    def __init__(self, relations: dict[str, Relation], source: str) -> None:
        self.relations = relations
        self.source = source
        self.fresh = 0

    def fail(self, node: object, message: str) -> DatalogError:
        return error_at(node, message, self.source)

    # -- entry points ----------------------------------------------------------------------

    def plan_rule(self, head: Atom, body: Sequence[Literal]) -> BodyPlan:
        """Plan a rule body and check the head against it."""
        scope = {v.name for v in _vars_outside_aggregates(body)}
        scope |= {v.name for arg in head.args for v in term_vars(arg)}
        plan = self.plan_body(body, bound={}, scope=scope)
        rel = self.relations[head.relation]
        for arg, col_type in zip(head.args, rel.base_types, strict=True):
            self.check_head_arg(arg, plan.types, "head")
            arg_type = self.term_type(arg, plan.types)
            if not compatible(arg_type, col_type):
                raise self.fail(
                    arg,
                    f"type mismatch in head of '{head.relation}': {arg} is {kind(arg_type)}, "
                    f"column expects {col_type}",
                )
        return plan

    def plan_query(self, body: Sequence[Literal]) -> tuple[list[str], BodyPlan]:
        """Plan an ad-hoc query; its columns are the named variables in order of appearance."""
        names: list[str] = []
        for var in _vars_outside_aggregates(body):
            if var.name not in names and not var.name.startswith(INTERNAL_VAR_PREFIX):
                names.append(var.name)
        plan = self.plan_body(body, bound={}, scope=set(names))
        return names, plan

    def check_head_arg(self, arg: Term, types: dict[str, str | None], what: str) -> None:
        for sub in subterms(arg):
            if isinstance(sub, Wildcard):
                raise self.fail(sub, f"'_' is not allowed in a {what}")
            if isinstance(sub, Aggregate):
                raise self.fail(sub, f"aggregates are not allowed in a {what}")
            if isinstance(sub, Var) and sub.name not in types:
                raise self.fail(sub, f"variable '{sub.name}' in the head is not bound by a positive atom")

    # -- bodies ----------------------------------------------------------------------------

    def plan_body(
        self, body: Sequence[Literal], *, bound: dict[str, str | None], scope: set[str]
    ) -> BodyPlan:
        plan = BodyPlan(types=dict(bound))
        pending: list[Literal | AtomArgFilter] = []
        for lit in body:
            if isinstance(lit, Atom) and not lit.negated:
                self.bind_atom(lit, plan, pending)
            else:
                pending.append(lit)

        # Assignments may depend on each other; iterate until nothing more becomes computable.
        progress = True
        while progress and pending:
            progress = False
            for item in list(pending):
                if self.try_assign(item, plan, scope) or self.try_filter(item, plan, scope):
                    pending.remove(item)
                    progress = True
        if pending:
            raise self.unbound_error(pending[0], plan, scope)
        return plan

    def bind_atom(self, atom: Atom, plan: BodyPlan, pending: list[Literal | AtomArgFilter]) -> None:
        rel = self.relations[atom.relation]
        index = len(plan.atoms)
        plan.atoms.append(atom)
        for col, (arg, col_type) in enumerate(zip(atom.args, rel.base_types, strict=True)):
            if isinstance(arg, Var):
                known = plan.types.get(arg.name)
                if arg.name not in plan.types:
                    plan.types[arg.name] = col_type
                elif not compatible(known, col_type):
                    raise self.fail(
                        arg,
                        f"variable '{arg.name}' is {kind(known)} but column "
                        f"'{rel.columns[col][0]}' of '{rel.name}' is {col_type}",
                    )
            elif isinstance(arg, Const):
                self.check_arg_type(arg, arg.type, rel, col)
            elif not isinstance(arg, Wildcard):
                pending.append(AtomArgFilter(index, col, arg))

    def check_arg_type(self, arg: Term, arg_type: str | None, rel: Relation, col: int) -> None:
        if not compatible(arg_type, rel.base_types[col]):
            raise self.fail(
                arg,
                f"type mismatch: {arg} is {kind(arg_type)} but column '{rel.columns[col][0]}' "
                f"of '{rel.name}' is {rel.base_types[col]}",
            )

    def try_assign(self, item: Literal | AtomArgFilter, plan: BodyPlan, scope: set[str]) -> bool:
        if not (isinstance(item, Comparison) and item.op == "="):
            return False
        for target, value in ((item.left, item.right), (item.right, item.left)):
            if not isinstance(target, Var) or target.name in plan.types:
                continue
            if not self.computable(value, plan, scope):
                continue
            if isinstance(value, Aggregate):
                agg = self.plan_aggregate(value, plan, scope)
                plan.assigns.append((target.name, agg))
                plan.types[target.name] = agg.result_type
            else:
                plan.types[target.name] = self.term_type(value, plan.types)
                plan.assigns.append((target.name, value))
            return True
        return False

    def try_filter(self, item: Literal | AtomArgFilter, plan: BodyPlan, scope: set[str]) -> bool:
        terms = _item_terms(item)
        if not all(self.computable(term, plan, scope) for term in terms):
            return False
        if isinstance(item, Comparison):
            left, right = item.left, item.right
            # `N = agg` with N already bound: compute the aggregate into a fresh variable.
            if isinstance(right, Aggregate) or isinstance(left, Aggregate):
                agg_term, other = (right, left) if isinstance(right, Aggregate) else (left, right)
                assert isinstance(agg_term, Aggregate)
                agg = self.plan_aggregate(agg_term, plan, scope)
                self.fresh += 1
                name = f"{INTERNAL_VAR_PREFIX}cmp{self.fresh}"
                plan.assigns.append((name, agg))
                plan.types[name] = agg.result_type
                tmp = Var(name, agg_term.line, agg_term.column)
                item = Comparison(item.op, other, tmp, item.line, item.column)
                left, right = item.left, item.right
            lt, rt = self.term_type(left, plan.types), self.term_type(right, plan.types)
            if not compatible(lt, rt):
                raise self.fail(item, f"cannot compare {kind(lt)} {left} with {kind(rt)} {right}")
        elif isinstance(item, Constraint):
            self.check_call(item.name, item.args, CONSTRAINT_FUNCTORS[item.name], plan.types, item)
        elif isinstance(item, Atom):
            rel = self.relations[item.relation]
            for col, arg in enumerate(item.args):
                if not isinstance(arg, Wildcard):
                    self.check_arg_type(arg, self.term_type(arg, plan.types), rel, col)
        elif isinstance(item, AtomArgFilter):
            atom = plan.atoms[item.atom_index]
            rel = self.relations[atom.relation]
            self.check_arg_type(item.term, self.term_type(item.term, plan.types), rel, item.column_index)
        plan.filters.append(item)
        return True

    def computable(self, term: Term, plan: BodyPlan, scope: set[str]) -> bool:
        if isinstance(term, Aggregate):
            return all(name in plan.types for name in self.correlated(term, scope))
        if isinstance(term, Wildcard):
            return True
        return all(v.name in plan.types for v in term_vars(term))

    def correlated(self, agg: Aggregate, scope: set[str]) -> list[str]:
        names: list[str] = []
        for var in term_vars(agg):
            if var.name in scope and var.name not in names:
                names.append(var.name)
        return names

    def plan_aggregate(self, agg: Aggregate, outer: BodyPlan, scope: set[str]) -> AggregatePlan:
        correlated = self.correlated(agg, scope)
        inner_scope = set(scope) | {v.name for v in _vars_outside_aggregates(agg.body)}
        if agg.target is not None:
            inner_scope |= {v.name for v in term_vars(agg.target, into_aggregates=False)}
        body = self.plan_body(
            agg.body, bound={name: outer.types[name] for name in correlated}, scope=inner_scope
        )
        result: str | None = "number"
        if agg.target is not None:
            for var in term_vars(agg.target):
                if var.name not in body.types:
                    raise self.fail(
                        var,
                        f"variable '{var.name}' of the {agg.op} target is not bound inside the aggregate",
                    )
            target_type = self.term_type(agg.target, body.types)
            if agg.op in ("sum", "mean") and kind(target_type) == "symbol":
                raise self.fail(agg.target, f"{agg.op} needs a numeric target")
            result = "float" if agg.op == "mean" else target_type
        return AggregatePlan(agg, correlated, body, result)

    # -- errors ----------------------------------------------------------------------------

    def unbound_error(self, item: Literal | AtomArgFilter, plan: BodyPlan, scope: set[str]) -> DatalogError:
        # Report an aggregate's missing outer binding before the variable it would bind.
        terms = sorted(_item_terms(item), key=lambda t: not isinstance(t, Aggregate))
        for term in terms:
            if isinstance(term, Aggregate):
                for name in self.correlated(term, scope):
                    if name not in plan.types:
                        var = next(v for v in term_vars(term) if v.name == name)
                        return self.fail(
                            var,
                            f"variable '{name}' is shared with the {term.op} aggregate but not "
                            "bound by a positive atom outside it",
                        )
                continue
            for var in term_vars(term):
                if var.name in plan.types:
                    continue
                if isinstance(item, Atom):
                    return self.fail(
                        var,
                        f"variable '{var.name}' in negated atom '{item.relation}' is not bound "
                        "by a positive atom (use '_' for positions that do not matter)",
                    )
                return self.fail(
                    var,
                    f"variable '{var.name}' in '{_describe(item)}' is not bound by a positive atom",
                )
        return self.fail(item, "literal cannot be evaluated")  # pragma: no cover

    # -- typing ----------------------------------------------------------------------------

    def term_type(self, term: Term, types: dict[str, str | None]) -> str | None:
        if isinstance(term, Var):
            return types.get(term.name)
        if isinstance(term, Const):
            return term.type
        if isinstance(term, Wildcard):
            return None
        if isinstance(term, UnaryMinus):
            operand = self.term_type(term.operand, types)
            if kind(operand) == "symbol":
                raise self.fail(term, f"arithmetic on a symbol: {term}")
            return operand
        if isinstance(term, BinOp):
            left = self.term_type(term.left, types)
            right = self.term_type(term.right, types)
            for side, side_type in ((term.left, left), (term.right, right)):
                if kind(side_type) == "symbol":
                    raise self.fail(side, f"arithmetic on a symbol: {side} in {term} (use cat() for strings)")
            return numeric_join(left, right)
        if isinstance(term, Call):
            return self.check_call(term.name, term.args, FUNCTORS[term.name], types, term)
        if isinstance(term, Aggregate):  # pragma: no cover - aggregates are planned, not typed
            return None
        return None  # pragma: no cover

    def check_call(
        self,
        name: str,
        args: Sequence[Term],
        sig: Signature,
        types: dict[str, str | None],
        node: object,
    ) -> str | None:
        n_fixed = len(sig.params)
        if sig.variadic is None and len(args) != n_fixed:
            raise self.fail(node, f"{name} takes {n_fixed} argument(s), got {len(args)}")
        if len(args) < max(n_fixed, sig.min_args):
            raise self.fail(node, f"{name} takes at least {max(n_fixed, sig.min_args)} argument(s)")
        arg_types = [self.term_type(arg, types) for arg in args]
        expected = list(sig.params) + [sig.variadic or ""] * (len(args) - n_fixed)
        same: str | None = None
        for arg, arg_type, want in zip(args, arg_types, expected, strict=True):
            if want == SAME:
                if not compatible(same, arg_type):
                    raise self.fail(arg, f"arguments of {name} mix symbols and numbers")
                same = arg_type if same is None else numeric_join_or_symbol(same, arg_type)
            elif want == NUMERIC:
                if kind(arg_type) == "symbol":
                    raise self.fail(arg, f"{name} expects a number, got symbol {arg}")
            elif want in ("symbol", "number") and not compatible(arg_type, want):
                raise self.fail(arg, f"{name} expects a {want}, got {kind(arg_type)} {arg}")
        return same if sig.result == SAME else sig.result


def numeric_join_or_symbol(a: str | None, b: str | None) -> str | None:
    if kind(a) == "symbol" or kind(b) == "symbol":
        return "symbol"
    return numeric_join(a, b)


def _item_terms(item: Literal | AtomArgFilter) -> list[Term]:
    if isinstance(item, AtomArgFilter):
        return [item.term]
    if isinstance(item, Atom | Constraint):
        return list(item.args)
    if isinstance(item, Comparison):
        return [item.left, item.right]
    return []


def _vars_outside_aggregates(body: Iterable[Literal]) -> list[Var]:
    out: list[Var] = []
    for lit in body:
        out.extend(literal_vars(lit, into_aggregates=False))
    return out


def _describe(item: Literal | AtomArgFilter) -> str:
    if isinstance(item, AtomArgFilter):
        return str(item.term)
    return str(item)
