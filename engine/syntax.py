"""Abstract syntax of Datalog programs: terms, literals, declarations, rules.

Nodes are immutable and carry the 1-based line/column of their first token; positions do not
take part in equality so that structurally equal terms compare equal.  ``str()`` of a term or
literal renders it back in Soufflé syntax (used in messages and, later, in proofs).

Positions are in the program's joined text (its includes expanded, see include.py), except
that a Relation, Rule or Fact, what messages and proofs point at, also knows its `file` and
has its `line` there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, fields

# Soufflé's primitive types; `.type` declarations alias one of these.
BASE_TYPES = ("symbol", "number", "unsigned", "float")
NUMERIC_TYPES = frozenset({"number", "unsigned", "float"})

# Aggregate results are bound to variables with this prefix; a `$` cannot start a user name,
# so these never clash with (or show up as) user variables.
INTERNAL_VAR_PREFIX = "$"


class PickledByFields:
    """Pickled as a call of the class with its fields. The cached program holds some 7,000
    of these nodes, and the per-field `__setstate__` that dataclasses give frozen slotted
    classes made loading it twice as slow (14 against 6.5 ms)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type[PickledByFields], tuple[object, ...]]:
        # The subclasses are dataclasses, which this base is not: mypy cannot know it.
        return type(self), tuple(getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]


def _pos() -> int:
    return field(default=0, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Var(PickledByFields):
    name: str
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Wildcard(PickledByFields):
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        return "_"


@dataclass(frozen=True, slots=True)
class Const(PickledByFields):
    value: str | int | float
    type: str  # one of BASE_TYPES
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        if self.type == "symbol":
            return json.dumps(self.value, ensure_ascii=False)
        if self.type == "unsigned":
            return f"{self.value}u"
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class BinOp(PickledByFields):
    op: str  # + - * / % ^
    left: Term
    right: Term
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True, slots=True)
class UnaryMinus(PickledByFields):
    operand: Term
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        return f"-{self.operand}"


@dataclass(frozen=True, slots=True)
class Call(PickledByFields):
    """A functor application such as ``cat(A, B)`` or ``strlen(S)``."""

    name: str
    args: tuple[Term, ...]
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"


@dataclass(frozen=True, slots=True)
class Aggregate(PickledByFields):
    """``op target : { body }``; ``target`` is None for ``count``."""

    op: str  # count sum min max mean
    target: Term | None
    body: tuple[Literal, ...]
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        target = f" {self.target}" if self.target is not None else ""
        return f"{self.op}{target} : {{ {', '.join(map(str, self.body))} }}"


Term = Var | Wildcard | Const | BinOp | UnaryMinus | Call | Aggregate


@dataclass(frozen=True, slots=True)
class Atom(PickledByFields):
    relation: str
    args: tuple[Term, ...]
    negated: bool = False
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        bang = "!" if self.negated else ""
        return f"{bang}{self.relation}({', '.join(map(str, self.args))})"


@dataclass(frozen=True, slots=True)
class Comparison(PickledByFields):
    op: str  # = != < <= > >=
    left: Term
    right: Term
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True, slots=True)
class Constraint(PickledByFields):
    """A constraint functor used as a literal: ``contains(sub, s)`` or ``match(re, s)``."""

    name: str
    args: tuple[Term, ...]
    negated: bool = False
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        bang = "!" if self.negated else ""
        return f"{bang}{self.name}({', '.join(map(str, self.args))})"


@dataclass(frozen=True, slots=True)
class BoolLit(PickledByFields):
    value: bool
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        return "true" if self.value else "false"


Literal = Atom | Comparison | Constraint | BoolLit


@dataclass(slots=True)
class Relation(PickledByFields):
    name: str
    columns: list[tuple[str, str]]  # (column name, declared type name)
    base_types: list[str]  # the BASE_TYPES entry behind each declared type
    doc: str = ""
    line: int = 0
    column: int = 0
    is_input: bool = False
    is_output: bool = False
    qualifiers: tuple[str, ...] = ()
    file: str = ""  # the program file that declares it ("rules/arrays.dl"); `line` is there

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def arity(self) -> int:
        return len(self.columns)

    @property
    def is_inline(self) -> bool:
        """Declared `inline`: never stored, its uses are replaced by its rules' bodies."""
        return "inline" in self.qualifiers

    @property
    def column_names(self) -> list[str]:
        return [name for name, _ in self.columns]


@dataclass(frozen=True, slots=True)
class TypeDecl(PickledByFields):
    name: str
    base: str
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True, slots=True)
class Rule(PickledByFields):
    """One conjunctive rule: a source clause yields one Rule per head and per DNF branch."""

    head: Atom
    body: tuple[Literal, ...]
    line: int
    column: int
    text: str  # the exact source text of the whole clause
    index: int  # position in Program.rules; stored in the `_rule` column of derived tuples
    clause: int = 0  # index of the source clause this rule comes from
    inlined: tuple[str, ...] = ()  # inline relations of the clause, replaced in `body`
    file: str = ""  # the program file it is written in ("rules/arrays.dl"); `line` is there

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        return f"{self.head} :- {', '.join(map(str, self.body))}."


@dataclass(frozen=True, slots=True)
class Fact(PickledByFields):
    atom: Atom
    line: int
    column: int
    text: str
    file: str = ""  # the program file it is written in; `line` is there

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        return f"{self.atom}."


def subterms(term: Term) -> Iterator[Term]:
    """The term and all terms inside it, not descending into aggregate bodies."""
    yield term
    if isinstance(term, BinOp):
        yield from subterms(term.left)
        yield from subterms(term.right)
    elif isinstance(term, UnaryMinus):
        yield from subterms(term.operand)
    elif isinstance(term, Call):
        for arg in term.args:
            yield from subterms(arg)


def term_vars(term: Term, *, into_aggregates: bool = True) -> list[Var]:
    """Variables of a term in textual order (with repetitions)."""
    out: list[Var] = []
    _collect_term(term, out, into_aggregates)
    return out


def literal_vars(lit: Literal, *, into_aggregates: bool = True) -> list[Var]:
    """Variables of a literal in textual order (with repetitions)."""
    out: list[Var] = []
    match lit:
        case Atom(args=args) | Constraint(args=args):
            for arg in args:
                _collect_term(arg, out, into_aggregates)
        case Comparison(left=left, right=right):
            _collect_term(left, out, into_aggregates)
            _collect_term(right, out, into_aggregates)
    return out


def _collect_term(term: Term, out: list[Var], into_aggregates: bool) -> None:
    match term:
        case Var():
            out.append(term)
        case BinOp(left=left, right=right):
            _collect_term(left, out, into_aggregates)
            _collect_term(right, out, into_aggregates)
        case UnaryMinus(operand=operand):
            _collect_term(operand, out, into_aggregates)
        case Call(args=args):
            for arg in args:
                _collect_term(arg, out, into_aggregates)
        case Aggregate(target=target, body=body) if into_aggregates:
            if target is not None:
                _collect_term(target, out, into_aggregates)
            for lit in body:
                out.extend(literal_vars(lit, into_aggregates=True))
