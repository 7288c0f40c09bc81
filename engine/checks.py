"""Static checks that turn a parsed text into validated relations, rules and facts.

Order matters for the quality of messages: declarations first (so that every later error can
name columns and types), then relation references and arities in textual order, then the
per-rule binding analysis (safety and typing, see plan.py).  Stratification runs last, in
program.py.

Design choice: a rule whose head is an `.input` relation is an *error* (facts are allowed).
Inputs are loaded from the outside world; deriving into them silently mixes the two.

A text may also extend a program already evaluated (`Base`: a query's own relations over the
results of an assessment, see extend.py): it reads the base's relations, types and inline
relations, and may neither declare them again nor add rules, facts or directives to them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .errors import DatalogError, error_at
from .inline import Expander, InlineRule, atoms_of
from .parser import ParsedText, RelDecl
from .plan import BodyPlan, Planner
from .syntax import (
    BASE_TYPES,
    Aggregate,
    Atom,
    BinOp,
    Call,
    Comparison,
    Constraint,
    Fact,
    Literal,
    Relation,
    Rule,
    Term,
    UnaryMinus,
    Var,
    Wildcard,
    subterms,
)
from .typesys import CONSTRAINT_FUNCTORS, compatible, kind, resolve_base

# Names that the evaluator adds to every table.
RESERVED_COLUMNS = frozenset({"_iter", "_rule"})
# Tables the evaluator creates for itself start with this prefix.
INTERNAL_TABLE_PREFIX = "__cpq"
UNSUPPORTED_QUALIFIERS = {"eqrel": "eqrel relations (equivalence closure) are not supported"}


@dataclass(frozen=True, slots=True)
class Base:
    """The program a text extends: what it may read, and where each relation is declared."""

    relations: dict[str, Relation]
    types: dict[str, str]
    inline: dict[str, list[InlineRule]]


@dataclass(slots=True)
class CheckedProgram:
    types: dict[str, str] = field(default_factory=dict)  # declared type -> base type
    relations: dict[str, Relation] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    plans: list[BodyPlan] = field(default_factory=list)  # aligned with rules
    facts: list[Fact] = field(default_factory=list)
    inline: dict[str, list[InlineRule]] = field(default_factory=dict)  # inline relation -> rules


def check_program(
    parsed: ParsedText,
    source: str,
    where_from: Callable[[int, int], str] | None = None,
    base: Base | None = None,
) -> CheckedProgram:
    """`where_from(line, other)` names a line in a message about line `other` ("line 3", or
    "rules/a.dl:3" in another file of the program; see include.SourceMap).  With `base`, the
    text extends that program: `relations` and `inline` hold the base's too, `rules`, `plans`
    and `facts` the text's only."""
    out = CheckedProgram()
    out.types = _check_types(parsed, source, base.types if base is not None else {})
    out.relations = _check_decls(
        parsed.decls,
        out.types,
        source,
        where_from or (lambda line, _other: f"line {line}"),
        base.relations if base is not None else {},
    )
    if base is not None:
        _check_leaves_base_alone(parsed, base, source)

    for io in parsed.io:
        rel = out.relations.get(io.relation)
        if rel is None:
            raise DatalogError(
                f"undeclared relation '{io.relation}' in .{io.kind}",
                source=source,
                line=io.line,
                column=io.column,
            )
        if io.kind == "input":
            rel.is_input = True
        else:
            rel.is_output = True

    for rel in out.relations.values():
        if rel.is_inline and (rel.is_input or rel.is_output):
            kind = "an .input" if rel.is_input else "an .output"
            raise error_at(rel, f"inline relation '{rel.name}' cannot be {kind} relation", source)
    out.inline = {name: [] for name, rel in out.relations.items() if rel.is_inline}
    if base is not None:  # the base's definitions, which the text's rules may use
        out.inline.update((name, list(rules)) for name, rules in base.inline.items())

    planner = Planner(out.relations, source)
    for clause in parsed.clauses:
        for head in clause.heads:
            check_atom(head, out.relations, source)
        for branch in clause.branches or []:
            check_literals(branch, out.relations, source)
        if clause.branches is None:
            for head in clause.heads:
                if head.relation in out.inline:
                    raise error_at(head, f"inline relation '{head.relation}' cannot have facts", source)
                _check_fact(head, out.relations, source)
                out.facts.append(Fact(head, clause.line, clause.column, clause.text))
            continue
        for head in clause.heads:
            rel = out.relations[head.relation]
            if rel.is_input:
                raise error_at(
                    head,
                    f"'{head.relation}' is an .input relation and cannot be the head of a rule "
                    "(facts are allowed)",
                    source,
                )
            if rel.is_inline:
                for branch in clause.branches:
                    planner.plan_rule(head, branch)  # checked where it is written
                    out.inline[head.relation].append(InlineRule(head, branch))

    expander = Expander(out.inline, source)
    expander.check_acyclic()
    for clause_index, clause in enumerate(parsed.clauses):
        for head in clause.heads:
            if clause.branches is None or head.relation in out.inline:
                continue
            for branch in clause.branches:
                inlined = sorted({atom.relation for atom in atoms_of(branch)} & set(out.inline))
                for body in expander.expand(branch) if inlined else [branch]:
                    plan = planner.plan_rule(head, body)
                    rule = Rule(
                        head=head,
                        body=body,
                        line=clause.line,
                        column=clause.column,
                        text=clause.text,
                        index=len(out.rules),
                        clause=clause_index,
                        inlined=tuple(inlined),
                    )
                    out.rules.append(rule)
                    out.plans.append(plan)
    return out


def _check_leaves_base_alone(parsed: ParsedText, base: Base, source: str) -> None:
    """A text extending `base` reads its relations: it adds no rule, fact or directive to one."""
    for io in parsed.io:
        if io.relation in base.relations:
            what = _of_known(base.relations[io.relation])
            raise error_at(io, f"'{io.relation}' is {what}: .{io.kind} cannot change it", source)
    for clause in parsed.clauses:
        for head in clause.heads:
            if head.relation in base.relations:
                what = "facts" if clause.branches is None else "rules"
                owner = _of_known(base.relations[head.relation])
                raise error_at(
                    head,
                    f"'{head.relation}' is {owner}, already evaluated: {what} "
                    "cannot be added to it; declare a relation of your own (.decl) and derive that",
                    source,
                )


def _check_types(parsed: ParsedText, source: str, known: dict[str, str]) -> dict[str, str]:
    """The declared types, those of `known` (a base program's, already resolved) included."""
    aliases: dict[str, str] = {}
    for decl in parsed.types:
        if decl.name in aliases or decl.name in BASE_TYPES or decl.name in known:
            raise error_at(decl, f"type '{decl.name}' is already declared", source)
        aliases[decl.name] = decl.base
    aliases.update(known)  # a base type resolves to itself's base, which resolve_base follows
    resolved: dict[str, str] = dict(known)
    for decl in parsed.types:
        base = resolve_base(decl.name, aliases)
        if base is None:
            raise error_at(
                decl,
                f"type '{decl.name}' does not resolve to symbol/number/unsigned/float",
                source,
            )
        resolved[decl.name] = base
    return resolved


def _check_decls(
    decls: list[RelDecl],
    types: dict[str, str],
    source: str,
    where_from: Callable[[int, int], str],
    known: dict[str, Relation],
) -> dict[str, Relation]:
    """The relations declared, after those of `known` (a base program's)."""
    relations: dict[str, Relation] = dict(known)
    folded: dict[str, Relation] = {name.lower(): rel for name, rel in known.items()}
    for decl in decls:
        if decl.name in known:
            raise error_at(
                decl,
                f"relation '{decl.name}' is already declared: it is {_of_known(known[decl.name])} "
                "(a query reads it as it is); give yours another name",
                source,
            )
        if decl.name in relations:
            first = relations[decl.name]
            raise error_at(
                decl,
                f"relation '{decl.name}' is already declared at {where_from(first.line, decl.line)}",
                source,
            )
        # DuckDB identifiers are case-insensitive, so `Edge` and `edge` would share a table.
        if decl.name.lower() in folded:
            other = folded[decl.name.lower()]
            where = other.where if other.name in known else where_from(other.line, decl.line)
            raise error_at(
                decl,
                f"relation '{decl.name}' differs from '{other.name}' ({where}) only "
                "in case, which is not supported",
                source,
            )
        if decl.name.startswith(INTERNAL_TABLE_PREFIX):
            raise error_at(decl, f"relation names may not start with '{INTERNAL_TABLE_PREFIX}'", source)
        if decl.name in CONSTRAINT_FUNCTORS:
            raise error_at(decl, f"'{decl.name}' is a built-in constraint, not a relation name", source)
        for qualifier in decl.qualifiers:
            if qualifier in UNSUPPORTED_QUALIFIERS:
                raise error_at(decl, UNSUPPORTED_QUALIFIERS[qualifier], source)
        columns: list[tuple[str, str]] = []
        bases: list[str] = []
        seen: set[str] = set()
        for attr in decl.attrs:
            if attr.name.lower() in RESERVED_COLUMNS:
                raise error_at(attr, f"column name '{attr.name}' is reserved", source)
            if attr.name.lower() in seen:
                raise error_at(attr, f"duplicate column '{attr.name}' in '{decl.name}'", source)
            seen.add(attr.name.lower())
            base = attr.type_name if attr.type_name in BASE_TYPES else types.get(attr.type_name)
            if base is None:
                raise error_at(attr, f"unknown type '{attr.type_name}'", source)
            columns.append((attr.name, attr.type_name))
            bases.append(base)
        rel = Relation(
            name=decl.name,
            columns=columns,
            base_types=bases,
            doc=decl.doc,
            line=decl.line,
            column=decl.column,
            qualifiers=tuple(decl.qualifiers),
            is_input="input" in decl.qualifiers,
            is_output=bool({"output", "printsize"} & set(decl.qualifiers)),
        )
        relations[decl.name] = rel
        folded[decl.name.lower()] = rel
    return relations


def _of_known(rel: Relation) -> str:
    return f"a relation of the rules ({rel.where})" if rel.file else "a relation of the rules"


def check_atom(atom: Atom, relations: dict[str, Relation], source: str) -> None:
    """The relation is declared and the arity matches; wildcards only as atom arguments."""
    rel = relations.get(atom.relation)
    if rel is None:
        raise error_at(atom, f"undeclared relation '{atom.relation}'", source)
    if len(atom.args) != rel.arity:
        raise error_at(
            atom,
            f"arity mismatch: '{atom.relation}' has {rel.arity} column(s), "
            f"used with {len(atom.args)} argument(s)",
            source,
        )
    for arg in atom.args:
        if not isinstance(arg, Wildcard):
            _check_term(arg, relations, source)


def check_literals(body: Iterable[Literal], relations: dict[str, Relation], source: str) -> None:
    for lit in body:
        if isinstance(lit, Atom):
            check_atom(lit, relations, source)
        elif isinstance(lit, Constraint):
            for arg in lit.args:
                _check_term(arg, relations, source)
        elif isinstance(lit, Comparison):
            _check_term(lit.left, relations, source)
            _check_term(lit.right, relations, source)


def _check_term(term: Term, relations: dict[str, Relation], source: str) -> None:
    if isinstance(term, Wildcard):
        raise error_at(term, "'_' can only be an argument of an atom", source)
    if isinstance(term, BinOp):
        _check_term(term.left, relations, source)
        _check_term(term.right, relations, source)
    elif isinstance(term, UnaryMinus):
        _check_term(term.operand, relations, source)
    elif isinstance(term, Call):
        for arg in term.args:
            _check_term(arg, relations, source)
    elif isinstance(term, Aggregate):
        if term.target is not None:
            _check_term(term.target, relations, source)
        check_literals(term.body, relations, source)


def _check_fact(atom: Atom, relations: dict[str, Relation], source: str) -> None:
    rel = relations[atom.relation]
    planner = Planner(relations, source)
    for col, arg in enumerate(atom.args):
        for sub in subterms(arg):
            if isinstance(sub, Var):
                raise error_at(sub, f"facts must be ground: variable '{sub.name}'", source)
            if isinstance(sub, Wildcard):
                raise error_at(sub, "'_' is not allowed in a fact", source)
            if isinstance(sub, Aggregate):
                raise error_at(sub, "aggregates are not allowed in a fact", source)
        arg_type = planner.term_type(arg, {})
        if not compatible(arg_type, rel.base_types[col]):
            raise error_at(
                arg,
                f"type mismatch: {arg} is {kind(arg_type)} but column '{rel.columns[col][0]}' "
                f"of '{rel.name}' is {rel.base_types[col]}",
                source,
            )
