"""Types: base types, their SQL counterparts, and the signatures of built-in functors.

Typing is deliberately light: it only separates symbols from numbers, which is what turns a
would-be DuckDB conversion error at evaluation time into a positioned DatalogError.  Numeric
kinds (number/unsigned/float) mix freely, with float winning over unsigned over number.
"""

from __future__ import annotations

from dataclasses import dataclass

from .syntax import BASE_TYPES, NUMERIC_TYPES

SQL_TYPES = {"symbol": "VARCHAR", "number": "BIGINT", "unsigned": "UBIGINT", "float": "DOUBLE"}

# Placeholders in functor signatures.
NUMERIC = "numeric"  # any of number/unsigned/float
SAME = "same"  # result has the type of the arguments (min/max)


@dataclass(frozen=True, slots=True)
class Signature:
    params: tuple[str, ...]  # types of the fixed parameters
    result: str
    variadic: str | None = None  # type of extra arguments, if any
    min_args: int = 0


FUNCTORS: dict[str, Signature] = {
    "cat": Signature((), "symbol", variadic="symbol", min_args=1),
    "strlen": Signature(("symbol",), "number"),
    "substr": Signature(("symbol", "number", "number"), "symbol"),
    "ord": Signature(("symbol",), "number"),
    "to_number": Signature(("any",), "number"),
    "to_string": Signature((NUMERIC,), "symbol"),
    "to_float": Signature(("any",), "float"),
    "to_unsigned": Signature(("any",), "unsigned"),
    "min": Signature((), SAME, variadic=SAME, min_args=2),
    "max": Signature((), SAME, variadic=SAME, min_args=2),
}

# Functors that are literals rather than terms (they hold or not).
CONSTRAINT_FUNCTORS: dict[str, Signature] = {
    "contains": Signature(("symbol", "symbol"), "bool"),
    "match": Signature(("symbol", "symbol"), "bool"),
}


def kind(type_name: str | None) -> str | None:
    """'symbol' or 'numeric' (None when unknown)."""
    if type_name is None:
        return None
    return "numeric" if type_name in NUMERIC_TYPES else "symbol"


def compatible(a: str | None, b: str | None) -> bool:
    return a is None or b is None or kind(a) == kind(b)


def numeric_join(a: str | None, b: str | None) -> str | None:
    """Result type of arithmetic on a and b."""
    if a is None or b is None:
        return a or b
    if "float" in (a, b):
        return "float"
    if "unsigned" in (a, b):
        return "unsigned"
    return "number"


def resolve_base(name: str, aliases: dict[str, str]) -> str | None:
    """Follow `.type` aliases down to a base type; None if unknown or cyclic."""
    seen: set[str] = set()
    while name not in BASE_TYPES:
        if name in seen or name not in aliases:
            return None
        seen.add(name)
        name = aliases[name]
    return name
