"""Rows handed to DuckDB as list parameters rather than as a column batch.

`SELECT CAST(unnest(?) AS T) AS a, ...` with one Python list per column: DuckDB converts the
lists itself and no view is registered. Per value it costs more than a column batch (about
0.4 to 1 µs against a few tens of ns, see engine.arrow_export), so large batches go as those.
"""

from __future__ import annotations

from collections.abc import Sequence

# Up to this many values a batch goes as list parameters: below it, building and registering
# column batches costs more than DuckDB's conversion of the lists.
LIST_BATCH_VALUES = 20_000

# Python types a column of each base type accepts (checked for column batches too: DuckDB's
# own conversion would round 1.5 to 2 and read True as 1).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "symbol": (str,),
    "number": (int,),
    "unsigned": (int,),
    "float": (int, float),
}


def unnest_select(columns: Sequence[tuple[str, str]]) -> str:
    """The SELECT of the rows whose columns, (name, SQL type) each, come as list parameters
    in this order (lists of equal length)."""
    return "SELECT " + ", ".join(f"CAST(unnest(?) AS {sql_type}) AS {name}" for name, sql_type in columns)


def values_fit(values: Sequence[object], base_type: str) -> bool:
    """Every value is of the Python type a column of `base_type` takes (None never is)."""
    accepted = _PYTHON_TYPES[base_type]
    return all(type(value) in accepted for value in values)
