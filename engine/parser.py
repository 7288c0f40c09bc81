"""Text -> abstract syntax: runs the Lark grammar and turns its tree into `syntax` nodes.

Besides the translation this module
* reports Lark's syntax errors as one-line DatalogErrors,
* tells atoms from functor calls and literal groups from parenthesised terms,
* expands `;` disjunctions into disjunctive normal form (one conjunctive body per branch),
* moves every aggregate into a literal of its own, ``$aggN = <aggregate>``, so that later passes
  only meet aggregates as the right-hand side of an `=` comparison.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

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
    Term,
    TypeDecl,
    UnaryMinus,
    Var,
    Wildcard,
)
from .typesys import CONSTRAINT_FUNCTORS, FUNCTORS

_NEGATED_COMPARISON = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "'": "'", "0": "\0"}

# Readable names for the terminals Lark lists in "expected ..." messages.
_TERMINAL_NAMES = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "IO_KIND": "'.input'/'.output'",
    "$END": "end of input",
}


# The trees Lark builds: rules' trees with tokens as leaves; and, where an optional part of a
# rule is left out, None (maybe_placeholders), which Lark's types do not say.
ParseTree = Tree[Token]


@cache
def _lark() -> Lark:
    grammar = (Path(__file__).parent / "datalog.lark").read_text(encoding="utf-8")
    return Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        start=["start", "query"],
        propagate_positions=True,
        maybe_placeholders=True,
    )


@dataclass(slots=True)
class DeclAttr:
    name: str
    type_name: str
    line: int
    column: int


@dataclass(slots=True)
class RelDecl:
    name: str
    attrs: list[DeclAttr]
    qualifiers: list[str]
    doc: str
    line: int
    column: int


@dataclass(slots=True)
class IoDirective:
    kind: str  # input / output / printsize
    relation: str
    line: int
    column: int


@dataclass(slots=True)
class Clause:
    """A fact (``branches is None``) or a rule with one or more heads and DNF body branches."""

    heads: list[Atom]
    branches: list[tuple[Literal, ...]] | None
    text: str
    line: int
    column: int


@dataclass(slots=True)
class ParsedText:
    types: list[TypeDecl] = field(default_factory=list)
    decls: list[RelDecl] = field(default_factory=list)
    io: list[IoDirective] = field(default_factory=list)
    clauses: list[Clause] = field(default_factory=list)


def parse_text(text: str, source: str) -> ParsedText:
    """Parse a whole program; raises DatalogError on syntax errors."""
    tree = _run_lark(text, source, "start")
    return _Builder(text, source).program(tree)


def parse_query_text(text: str, source: str) -> list[tuple[Literal, ...]]:
    """Parse a rule body used as a query; returns its DNF branches."""
    tree = _run_lark(text, source, "query")
    builder = _Builder(text, source)
    return builder.branches(_tree(tree.children[0]))


def _run_lark(text: str, source: str, start: str) -> ParseTree:
    try:
        return _lark().parse(text, start=start)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, source) from None


def _syntax_error(exc: UnexpectedInput, text: str, source: str) -> DatalogError:
    line = getattr(exc, "line", 0) or 0
    column = getattr(exc, "column", 0) or 0
    if isinstance(exc, UnexpectedCharacters):
        message = f"unexpected character {exc.char!r}"
    elif isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        message = "unexpected end of input"
        if line <= 0:
            lines = text.splitlines() or [""]
            line, column = len(lines), len(lines[-1]) + 1
    elif isinstance(exc, UnexpectedToken):
        message = f"unexpected {exc.token.value!r}"
    else:  # pragma: no cover - Lark has no other UnexpectedInput subclasses today
        message = "syntax error"
    expected = sorted(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    if expected:
        names = [_describe_terminal(name) for name in expected]
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        message += f"; expected {shown}"
    return DatalogError(message, source=source, line=line, column=column)


def _describe_terminal(name: str) -> str:
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    try:
        pattern = _lark().get_terminal(name).pattern
    except KeyError:
        return name
    if pattern.type == "str":
        return repr(pattern.value)
    return name


# -- intermediate formulas (before DNF) --------------------------------------------------------


@dataclass(slots=True)
class _And:
    items: list[_Formula]


@dataclass(slots=True)
class _Or:
    items: list[_Formula]


@dataclass(slots=True)
class _Not:
    item: _Formula
    line: int
    column: int


_Formula = _And | _Or | _Not | Atom | Comparison | Constraint | BoolLit


class _Builder:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.lines = text.splitlines()
        self.agg_counter = 0

    def fail(self, node: object, message: str) -> DatalogError:
        return error_at(node, message, self.source)

    # -- statements ------------------------------------------------------------------------

    def program(self, tree: ParseTree) -> ParsedText:
        out = ParsedText()
        for child in tree.children:
            stmt = _tree(child)
            kind = stmt.data
            if kind == "subtype_decl":
                name, base = _token(stmt.children[0]), stmt.children[1]
                out.types.append(TypeDecl(str(name), str(base), *_at(name)))
            elif kind == "union_type_decl":
                name, first = _token(stmt.children[0]), stmt.children[1]
                out.types.append(TypeDecl(str(name), str(first), *_at(name)))
            elif kind == "rel_decl":
                out.decls.append(self.rel_decl(stmt))
            elif kind == "io_decl":
                io_kind = str(stmt.children[0])[1:]
                for target in stmt.children[1:]:
                    name = _token(_tree(target).children[0])
                    out.io.append(IoDirective(io_kind, str(name), *_at(name)))
            elif kind == "clause":
                out.clauses.append(self.clause(stmt))
        return out

    def rel_decl(self, tree: ParseTree) -> RelDecl:
        name_tok = _token(tree.children[0])
        attrs: list[DeclAttr] = []
        qualifiers: list[str] = []
        for child in tree.children[1:]:
            if child is None:
                continue
            if isinstance(child, Tree):
                attr_name, type_name = child.children
                attrs.append(DeclAttr(str(attr_name), str(type_name), *_at(_token(attr_name))))
            else:
                qualifiers.append(str(child))
        line, column = _at(name_tok)
        return RelDecl(
            name=str(name_tok),
            attrs=attrs,
            qualifiers=qualifiers,
            doc=self.doc_above(tree.meta.line),
            line=line,
            column=column,
        )

    def doc_above(self, line: int) -> str:
        """The contiguous `//` comment lines directly above `line` (1-based)."""
        doc: list[str] = []
        index = line - 2
        while index >= 0 and self.lines[index].lstrip().startswith("//"):
            comment = self.lines[index].lstrip()[2:]
            doc.append(comment[1:] if comment.startswith(" ") else comment)
            index -= 1
        return "\n".join(reversed(doc)).strip("\n")

    def clause(self, tree: ParseTree) -> Clause:
        *head_trees, body = tree.children
        heads = [self.atom(_tree(head)) for head in head_trees]
        text = self.text[tree.meta.start_pos : tree.meta.end_pos]
        branches = None if body is None else self.branches(_tree(body))
        return Clause(heads, branches, text, tree.meta.line, tree.meta.column)

    def atom(self, tree: ParseTree) -> Atom:
        name = _token(tree.children[0])
        args = tuple(self.term(arg) for arg in tree.children[1:] if arg is not None)
        return Atom(str(name), args, False, *_at(name))

    # -- bodies ----------------------------------------------------------------------------

    def branches(self, disjunction: ParseTree) -> list[tuple[Literal, ...]]:
        """DNF branches of a body, with aggregates moved into literals of their own."""
        out = []
        for branch in self.dnf(self.formula(disjunction)):
            out.append(tuple(self.extract_aggregates(branch)))
        return out

    def formula(self, tree: ParseTree) -> _Formula:
        kind = tree.data
        if kind == "disjunction":
            items = [self.formula(_tree(child)) for child in tree.children]
            return items[0] if len(items) == 1 else _Or(items)
        if kind == "conjunction":
            items = [self.formula(_tree(child)) for child in tree.children]
            return items[0] if len(items) == 1 else _And(items)
        if kind == "negation":
            return _Not(self.formula(_tree(tree.children[0])), tree.meta.line, tree.meta.column)
        if kind == "comparison":
            left, op, right = tree.children
            op_tok = _tree(op).children[0]
            return Comparison(
                str(op_tok), self.term(left), self.term(right), tree.meta.line, tree.meta.column
            )
        if kind == "true_lit":
            return BoolLit(True, tree.meta.line, tree.meta.column)
        if kind == "false_lit":
            return BoolLit(False, tree.meta.line, tree.meta.column)
        if kind == "plain":
            return self.plain_literal(tree.children[0])
        raise self.fail(tree.meta, f"unexpected {kind}")  # pragma: no cover - grammar guarantees

    def plain_literal(self, expr: ParseTree | Token) -> _Formula:
        if isinstance(expr, Tree) and expr.data == "call":
            name = _token(expr.children[0])
            args = tuple(self.term(arg) for arg in expr.children[1:] if arg is not None)
            if str(name) in CONSTRAINT_FUNCTORS:
                return Constraint(str(name), args, False, *_at(name))
            return Atom(str(name), args, False, *_at(name))
        if isinstance(expr, Tree) and expr.data == "group":
            return self.formula(_tree(expr.children[0]))
        where = expr.meta if isinstance(expr, Tree) else expr
        raise self.fail(where, "expected a literal (an atom, a comparison or a constraint), found a term")

    def dnf(self, formula: _Formula) -> list[list[Literal]]:
        if isinstance(formula, _Or):
            return [branch for item in formula.items for branch in self.dnf(item)]
        if isinstance(formula, _And):
            parts = [self.dnf(item) for item in formula.items]
            return [[lit for branch in combo for lit in branch] for combo in itertools.product(*parts)]
        if isinstance(formula, _Not):
            return [[self.negate(formula)]]
        return [[formula]]

    def negate(self, neg: _Not) -> Literal:
        inner = neg.item
        if isinstance(inner, _Not):
            inner_neg = self.negate(inner)
            return self.negate(_Not(inner_neg, neg.line, neg.column))
        if isinstance(inner, Atom):
            return Atom(inner.relation, inner.args, not inner.negated, inner.line, inner.column)
        if isinstance(inner, Constraint):
            return Constraint(inner.name, inner.args, not inner.negated, inner.line, inner.column)
        if isinstance(inner, Comparison):
            op = _NEGATED_COMPARISON[inner.op]
            return Comparison(op, inner.left, inner.right, inner.line, inner.column)
        if isinstance(inner, BoolLit):
            return BoolLit(not inner.value, inner.line, inner.column)
        raise self.fail(neg, "only an atom, a comparison or a constraint can be negated")

    def extract_aggregates(self, body: list[Literal]) -> list[Literal]:
        """Give every aggregate a literal of its own: ``$aggN = aggregate``."""
        out: list[Literal] = []
        for lit in body:
            if isinstance(lit, Comparison) and lit.op == "=":
                # Keep the common `N = count : {...}` form as written (it reads better in proofs).
                if isinstance(lit.left, Var) and isinstance(lit.right, Aggregate):
                    out.append(Comparison("=", lit.left, self.nested(lit.right), lit.line, lit.column))
                    continue
                if isinstance(lit.right, Var) and isinstance(lit.left, Aggregate):
                    out.append(Comparison("=", lit.right, self.nested(lit.left), lit.line, lit.column))
                    continue
            out.append(self.lift_in_literal(lit, out))
        return out

    def nested(self, agg: Aggregate) -> Aggregate:
        """Lift aggregates nested in an aggregate (body or target) into that aggregate's body."""
        body = self.extract_aggregates(list(agg.body))
        target = None if agg.target is None else self.lift(agg.target, body)
        return Aggregate(agg.op, target, tuple(body), agg.line, agg.column)

    def lift_in_literal(self, lit: Literal, out: list[Literal]) -> Literal:
        if isinstance(lit, Atom):
            args = tuple(self.lift(arg, out) for arg in lit.args)
            return Atom(lit.relation, args, lit.negated, lit.line, lit.column)
        if isinstance(lit, Constraint):
            args = tuple(self.lift(arg, out) for arg in lit.args)
            return Constraint(lit.name, args, lit.negated, lit.line, lit.column)
        if isinstance(lit, Comparison):
            left, right = self.lift(lit.left, out), self.lift(lit.right, out)
            return Comparison(lit.op, left, right, lit.line, lit.column)
        return lit

    def lift(self, term: Term, out: list[Literal]) -> Term:
        """Replace aggregates inside `term` by fresh variables bound by new literals in `out`."""
        if isinstance(term, Aggregate):
            self.agg_counter += 1
            var = Var(f"{INTERNAL_VAR_PREFIX}agg{self.agg_counter}", term.line, term.column)
            out.append(Comparison("=", var, self.nested(term), term.line, term.column))
            return var
        if isinstance(term, BinOp):
            return BinOp(
                term.op,
                self.lift(term.left, out),
                self.lift(term.right, out),
                term.line,
                term.column,
            )
        if isinstance(term, UnaryMinus):
            return UnaryMinus(self.lift(term.operand, out), term.line, term.column)
        if isinstance(term, Call):
            args = tuple(self.lift(arg, out) for arg in term.args)
            return Call(term.name, args, term.line, term.column)
        return term

    # -- terms -----------------------------------------------------------------------------

    def term(self, tree: ParseTree | Token) -> Term:
        assert isinstance(tree, Tree)
        kind = tree.data
        if kind == "variable":
            tok = _token(tree.children[0])
            if str(tok) == "_":
                return Wildcard(*_at(tok))
            return Var(str(tok), *_at(tok))
        if kind == "number":
            return _number(_token(tree.children[0]))
        if kind == "string":
            tok = _token(tree.children[0])
            return Const(_unescape(str(tok)[1:-1]), "symbol", *_at(tok))
        if kind == "binop":
            left, op, right = tree.children
            op_tok = _token(_tree(op).children[0])
            return BinOp(str(op_tok), self.term(left), self.term(right), *_at(op_tok))
        if kind == "power":
            left, right = tree.children
            return BinOp("^", self.term(left), self.term(right), tree.meta.line, tree.meta.column)
        if kind == "negate":
            operand = self.term(tree.children[0])
            if (
                isinstance(operand, Const)
                and operand.type in ("number", "float")
                and isinstance(operand.value, int | float)  # as it always is for these types
            ):
                return Const(-operand.value, operand.type, tree.meta.line, tree.meta.column)
            return UnaryMinus(operand, tree.meta.line, tree.meta.column)
        if kind == "call":
            name = _token(tree.children[0])
            args = tuple(self.term(arg) for arg in tree.children[1:] if arg is not None)
            if str(name) in CONSTRAINT_FUNCTORS:
                raise self.fail(name, f"constraint '{name}' cannot be used as a term")
            if str(name) not in FUNCTORS:
                raise self.fail(name, f"unknown functor '{name}' (relations cannot be used as terms)")
            return Call(str(name), args, *_at(name))
        if kind == "minmax_call":
            op_tok = _token(_tree(tree.children[0]).children[0])
            if str(op_tok) not in ("min", "max"):
                raise self.fail(op_tok, f"'{op_tok}' is not a functor; did you mean an aggregate?")
            args = tuple(self.term(arg) for arg in tree.children[1:])
            return Call(str(op_tok), args, *_at(op_tok))
        if kind == "aggregate":
            return self.aggregate(tree)
        if kind == "group":
            inner = _single_plain_expr(_tree(tree.children[0]))
            if inner is not None:  # a parenthesised term
                return self.term(inner)
            formula = self.formula(_tree(tree.children[0]))
            raise self.fail(tree.meta, f"expected a term, found {_describe_formula(formula)}")
        raise self.fail(tree.meta, f"unexpected {kind}")  # pragma: no cover - grammar guarantees

    def aggregate(self, tree: ParseTree) -> Aggregate:
        op_tree, target_tree, body_child = tree.children
        op_tok = _token(_tree(op_tree).children[0])
        body_tree = _tree(body_child)
        op = str(op_tok)
        target = None if target_tree is None else self.term(target_tree)
        if op == "count" and target is not None:
            raise self.fail(op_tok, "count takes no target expression: use 'count : { ... }'")
        if op != "count" and target is None:
            raise self.fail(op_tok, f"{op} needs a target expression, e.g. '{op} X : {{ ... }}'")
        first = body_tree.children[0]
        if isinstance(first, Token):  # short form `count : r(X)`
            args = tuple(self.term(arg) for arg in body_tree.children[1:] if arg is not None)
            body: list[Literal] = [Atom(str(first), args, False, *_at(first))]
        else:
            branches = self.dnf(self.formula(first))
            if len(branches) != 1:
                raise self.fail(body_tree.meta, "disjunction inside an aggregate is not supported")
            body = branches[0]
        return Aggregate(op, target, tuple(body), *_at(op_tok))


def _describe_formula(formula: _Formula) -> str:
    if isinstance(formula, Atom):
        return f"atom '{formula.relation}(...)'"
    return "a literal"


def _number(tok: Token) -> Const:
    text = str(tok)
    line, column = _at(tok)
    if text.startswith(("0x", "0X")):
        return Const(int(text, 16), "number", line, column)
    if text.startswith(("0b", "0B")):
        return Const(int(text, 2), "number", line, column)
    if "." in text:
        return Const(float(text), "float", line, column)
    if text.endswith("u"):
        return Const(int(text[:-1]), "unsigned", line, column)
    return Const(int(text), "number", line, column)


def _unescape(body: str) -> str:
    """Resolve the usual backslash escapes; unknown ones (`\\d`, `\\.`) keep their backslash so that
    regular expressions written for `match` behave as expected."""
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
            else:
                out.append("\\" + nxt)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _single_plain_expr(disjunction: ParseTree) -> ParseTree | Token | None:
    """The expression of `( expr )`, or None when the parentheses hold literals."""
    if len(disjunction.children) != 1:
        return None
    conjunction = _tree(disjunction.children[0])
    if len(conjunction.children) != 1:
        return None
    literal = _tree(conjunction.children[0])
    if literal.data != "plain":
        return None
    expr = literal.children[0]
    if isinstance(expr, Tree) and expr.data in ("call", "group"):
        return None  # `(r(X))` in a term position is still an atom, not a term
    return expr


def _tree(node: ParseTree | Token) -> ParseTree:
    """A child that the grammar makes a rule's tree."""
    assert isinstance(node, Tree)
    return node


def _token(node: ParseTree | Token) -> Token:
    """A child that the grammar makes a token."""
    assert isinstance(node, Token)
    return node


def _at(token: Token) -> tuple[int, int]:
    """The line and column of a token: every token the lexer makes has both (Lark's types
    leave them optional, for tokens made by hand)."""
    assert token.line is not None and token.column is not None
    return token.line, token.column
