"""Soufflé's `inline` relations: a use in a rule body is replaced by the bodies of the
relation's rules, so the relation itself is never stored.

`loc(N, F, L, Q) :- node(N, _, S, L, _), scope(S, _, Q, F, _, _).` names every node's location:
stored, it is the largest derived relation (three million tuples on SciPy + Astropy) for the
few hundred findings that read it.  Declared `inline`, each rule that reads it joins node and
scope itself.

Uses must be positive atoms outside aggregates, and inline relations may not be recursive,
input, output or have facts: the subset both cpq and Soufflé evaluate the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import count

from .errors import error_at
from .stratify import aggregate_atoms
from .syntax import (
    INTERNAL_VAR_PREFIX,
    Aggregate,
    Atom,
    BinOp,
    BoolLit,
    Call,
    Comparison,
    Constraint,
    Literal,
    PickledByFields,
    Term,
    UnaryMinus,
    Var,
    Wildcard,
    literal_vars,
)


@dataclass(frozen=True, slots=True)
class InlineRule(PickledByFields):
    """One rule of an inline relation: what a use of the relation stands for."""

    head: Atom
    body: tuple[Literal, ...]


Definitions = Mapping[str, list[InlineRule]]


@dataclass(slots=True)
class Expander:
    """Replaces uses of inline relations in rule bodies and queries."""

    definitions: Definitions
    source: str
    _fresh: Iterator[int] = field(default_factory=lambda: count(1))

    def check_acyclic(self) -> None:
        state: dict[str, int] = {}  # 1: being expanded, 2: done

        def visit(name: str, user: InlineRule | None) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                where = user.head if user else None
                raise error_at(where, f"inline relation '{name}' is recursive", self.source)
            state[name] = 1
            for definition in self.definitions[name]:
                for atom in atoms_of(definition.body):
                    if atom.relation in self.definitions:
                        visit(atom.relation, definition)
            state[name] = 2

        for name in self.definitions:
            visit(name, None)

    def expand(self, body: Iterable[Literal]) -> list[tuple[Literal, ...]]:
        """The bodies equivalent to `body` without inline relations (none when one has no rule)."""
        bodies: list[tuple[Literal, ...]] = [()]
        for lit in body:
            self._check_not_hidden(lit)
            if isinstance(lit, Atom) and lit.relation in self.definitions:
                if lit.negated:
                    raise error_at(lit, f"inline relation '{lit.relation}' cannot be negated", self.source)
                choices = [
                    expanded
                    for definition in self.definitions[lit.relation]
                    for expanded in self.expand(self._instantiate(definition, lit))
                ]
                bodies = [done + choice for done in bodies for choice in choices]
            else:
                bodies = [done + (lit,) for done in bodies]
        return bodies

    def _check_not_hidden(self, lit: Literal) -> None:
        """An inline relation inside an aggregate would need a union inside it: refused."""
        for atom in aggregate_atoms(lit):
            if atom.relation in self.definitions:
                raise error_at(
                    atom,
                    f"inline relation '{atom.relation}' cannot be used inside an aggregate",
                    self.source,
                )

    def _instantiate(self, definition: InlineRule, use: Atom) -> tuple[Literal, ...]:
        """The definition's body with its head unified with `use`: head variables become the
        use's arguments, every other variable a fresh one."""
        n = next(self._fresh)
        relation = definition.head.relation
        names: dict[str, Term] = {}

        def fresh(var: Var) -> Var:
            return Var(f"{INTERNAL_VAR_PREFIX}{relation}{n}_{var.name}", var.line, var.column)

        equalities: list[tuple[Term, Term]] = []
        for head_arg, use_arg in zip(definition.head.args, use.args, strict=True):
            if isinstance(head_arg, Var) and head_arg.name not in names:
                names[head_arg.name] = fresh(head_arg) if isinstance(use_arg, Wildcard) else use_arg
            elif not isinstance(use_arg, Wildcard):
                # A repeated variable or a constant in the definition's head.
                equalities.append((head_arg, use_arg))
        for lit in definition.body:
            for var in literal_vars(lit):
                if var.name not in names:
                    names[var.name] = fresh(var)
        substitute = _Substitution(names)
        body = tuple(substitute.literal(lit) for lit in definition.body)
        checks = tuple(
            Comparison("=", use_arg, substitute.term(head_arg), use.line, use.column)
            for head_arg, use_arg in equalities
        )
        return body + checks


@dataclass(slots=True)
class _Substitution:
    names: dict[str, Term]

    def term(self, term: Term) -> Term:
        if isinstance(term, Var):
            return self.names.get(term.name, term)
        if isinstance(term, BinOp):
            return BinOp(term.op, self.term(term.left), self.term(term.right), term.line, term.column)
        if isinstance(term, UnaryMinus):
            return UnaryMinus(self.term(term.operand), term.line, term.column)
        if isinstance(term, Call):
            return Call(term.name, tuple(map(self.term, term.args)), term.line, term.column)
        if isinstance(term, Aggregate):
            target = self.term(term.target) if term.target is not None else None
            body = tuple(map(self.literal, term.body))
            return Aggregate(term.op, target, body, term.line, term.column)
        return term  # Const, Wildcard

    def literal(self, lit: Literal) -> Literal:
        if isinstance(lit, Atom):
            args = tuple(map(self.term, lit.args))
            return Atom(lit.relation, args, lit.negated, lit.line, lit.column)
        if isinstance(lit, Comparison):
            return Comparison(lit.op, self.term(lit.left), self.term(lit.right), lit.line, lit.column)
        if isinstance(lit, Constraint):
            args = tuple(map(self.term, lit.args))
            return Constraint(lit.name, args, lit.negated, lit.line, lit.column)
        assert isinstance(lit, BoolLit)
        return lit


def atoms_of(body: Iterable[Literal]) -> Iterator[Atom]:
    """Every atom of a body, those inside aggregates included."""
    for lit in body:
        if isinstance(lit, Atom):
            yield lit
        yield from aggregate_atoms(lit)
