"""Rendering values, tuples and literals in Soufflé syntax, with variables replaced by values.

Node ids print as `n812` so that they read as references, not as quantities; -1 (absent) stays.
Where the code of each node is known (`cpq why not`), a `NodeNamer` prints it instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping

from ..engine import (
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
    UnaryMinus,
    Var,
    Wildcard,
)
from ..facts.schema import NO_NODE
from .bodysql import Value

# How a node id is shown (e.g. by its code, `abs(lam - lam_old)`); None when it cannot be.
NodeNamer = Callable[[int], str | None]


def show_value(value: object, is_node: bool = False, name_node: NodeNamer | None = None) -> str:
    if value is None:
        return "_"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return str(int(value))
    if is_node and isinstance(value, int) and value != NO_NODE:
        named = name_node(value) if name_node is not None else None
        return named or f"n{value}"
    return repr(value) if isinstance(value, float) else str(value)


def bound_value(term: object, binding: Mapping[str, Value]) -> Value | None:
    """A constant's value, or a variable's in `binding` (None when unbound or neither)."""
    if isinstance(term, Const):
        return term.value
    if isinstance(term, Var):
        return binding.get(term.name)
    return None


def show_tuple(
    relation: str, values: tuple, node_columns: Collection[int] = (), name_node: NodeNamer | None = None
) -> str:
    args = ", ".join(show_value(v, i in node_columns, name_node) for i, v in enumerate(values))
    return f"{relation}({args})"


def show_term(
    term: Term, binding: Mapping[str, Value], nodes: Collection[str] = (), name_node: NodeNamer | None = None
) -> str:
    """A term with bound variables replaced by their values; unbound ones keep their name."""
    match term:
        case Var(name=name):
            if name in binding:
                return show_value(binding[name], name in nodes, name_node)
            return "_" if name.startswith("$") else name
        case Wildcard():
            return "_"
        case Const():
            return str(term)
        case BinOp(op=op, left=left, right=right):
            shown = (show_term(left, binding, nodes, name_node), show_term(right, binding, nodes, name_node))
            return f"({shown[0]} {op} {shown[1]})"
        case UnaryMinus(operand=operand):
            return f"-{show_term(operand, binding, nodes, name_node)}"
        case Call(name=name, args=args):
            return f"{name}({', '.join(show_term(a, binding, nodes, name_node) for a in args)})"
        case Aggregate():
            return str(term)  # its variables are local to it
    return str(term)


def show_literal(
    lit: Literal,
    binding: Mapping[str, Value],
    nodes: Collection[str] = (),
    name_node: NodeNamer | None = None,
) -> str:
    match lit:
        case Atom(relation=relation, args=args, negated=negated):
            bang = "!" if negated else ""
            return f"{bang}{relation}({', '.join(show_term(a, binding, nodes, name_node) for a in args)})"
        case Constraint(name=name, args=args, negated=negated):
            bang = "!" if negated else ""
            return f"{bang}{name}({', '.join(show_term(a, binding, nodes, name_node) for a in args)})"
        case Comparison(op=op, left=left, right=right):
            shown = (show_term(left, binding, nodes, name_node), show_term(right, binding, nodes, name_node))
            return f"{shown[0]} {op} {shown[1]}"
        case BoolLit():
            return str(lit)
    return str(lit)


def show_check(
    lit: Comparison | Constraint | BoolLit, binding: Mapping[str, Value], nodes: Collection[str] = ()
) -> str:
    """A comparison or constraint as it held: `"BLOCKS" != "SCALES"`, `A = "numpy.x" ← cat(...)`."""
    if isinstance(lit, Comparison) and lit.op == "=":
        for target, value in ((lit.left, lit.right), (lit.right, lit.left)):
            if isinstance(target, Var) and target.name in binding and not isinstance(value, Var | Const):
                # An assignment: the computed value reads better than the expression it came from.
                shown = show_value(binding[target.name], target.name in nodes)
                return f"{target.name} = {shown}  ← {show_term(value, binding, nodes)}"
    return show_literal(lit, binding, nodes)


def one_line(text: str) -> str:
    """A clause's source text on one line (rules.dl wraps long bodies)."""
    return " ".join(text.split())


def first_sentence(doc: str) -> str:
    """A relation's doc comment cut to one line: its first sentence, or its start."""
    text = " ".join(doc.split())
    cut = text.find(". ")
    if 0 < cut < 160:
        return text[: cut + 1]
    return text if len(text) <= 160 else text[:159] + "…"
