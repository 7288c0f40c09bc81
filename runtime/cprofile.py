"""cProfile / pstats files (`python -m cProfile -o run.prof prog.py`, `pstats.Stats.dump_stats`).

The file is `marshal.dump(stats)`, stats a dict
`{(file, first line, function name): (primitive calls, total calls, own s, cumulative s, callers)}`
with callers a dict of the same keys (to 4-tuples, or to ints in old files). Built-in functions
have the key `("~", 0, "<built-in method builtins.len>")`. It is decoded by `marshal_reader`,
never by `marshal`/`pstats` (they can build code objects from a hostile file).

Each entry becomes a function row (file, line, name, total calls, own µs, cumulative µs); times
are rounded to integer microseconds. Entries whose paths differ only in spelling (`./a.py`,
`a.py`) are summed into one row. Callers are not used.
"""

from __future__ import annotations

from typing import TypeGuard

from . import marshal_reader
from .errors import FormatError, checked_path, checked_text, shown

FunctionRow = tuple[str, int, str, int, int, int]  # (file, line, name, calls, own µs, cum µs)

_NOT_PSTATS = "not a cProfile/pstats file or a speedscope JSON profile"
# Bounds that keep every number a 64-bit integer downstream; no real run comes near them.
_MAX_COUNT = (1 << 63) - 1
_MAX_LINE = (1 << 31) - 1
_MAX_SECONDS = 1e9  # about 32 years


def parse(data: bytes) -> tuple[int, tuple[FunctionRow, ...]]:
    """(total µs: the sum of own times, sorted function rows) of a pstats file; `FormatError` if
    it is not one."""
    try:
        stats = marshal_reader.loads(data)
    except FormatError as exc:
        raise FormatError(f"{_NOT_PSTATS} ({exc})") from None
    if not isinstance(stats, dict):
        raise FormatError(f"{_NOT_PSTATS} (holds a {type(stats).__name__}, not a dict of functions)")
    rows: dict[tuple[str, int, str], tuple[int, int, int]] = {}
    for number, (key, value) in enumerate(stats.items(), start=1):
        try:
            function, counts = _function(key), _counts(value)
        except FormatError as exc:
            raise FormatError(f"cProfile entry {number}: {exc}") from None
        calls, own, cum = rows.get(function, (0, 0, 0))
        rows[function] = (calls + counts[0], own + counts[1], cum + counts[2])
    functions: list[FunctionRow] = [(*key, *counts) for key, counts in rows.items()]
    functions.sort()
    return sum(row[4] for row in functions), tuple(functions)


def _function(key: object) -> tuple[str, int, str]:
    if not isinstance(key, tuple) or len(key) != 3:
        raise FormatError(f"the key is not a (file, line, name) tuple ({shown(key)})")
    file, line, name = key
    if not _is_int(line):
        raise FormatError(f"line is not a number ({shown(line)})")
    if not 0 <= line <= _MAX_LINE:
        raise FormatError(f"line {line} is out of range")
    return checked_path(file, "the file"), line, checked_text(name, "the function name")


def _counts(value: object) -> tuple[int, int, int]:
    """(total calls, own µs, cumulative µs) of a (primitive calls, calls, own s, cum s, callers) value."""
    if not isinstance(value, tuple) or len(value) != 5:
        raise FormatError(
            f"the value is not a (calls, calls, own, cumulative, callers) tuple ({shown(value)})"
        )
    primitive, calls, own, cum, callers = value
    for what, count in (("primitive calls", primitive), ("calls", calls)):
        if not _is_int(count) or not 0 <= count <= _MAX_COUNT:
            raise FormatError(f"{what} is not a count ({shown(count)})")
    if not isinstance(callers, dict):
        raise FormatError(f"callers is not a dict ({shown(callers)})")
    return calls, _microseconds(own, "own time"), _microseconds(cum, "cumulative time")


def _microseconds(seconds: object, what: str) -> int:
    if not (_is_int(seconds) or isinstance(seconds, float)):
        raise FormatError(f"{what} is not a number ({shown(seconds)})")
    # NaN and infinities fail the comparison too.
    if not 0 <= seconds <= _MAX_SECONDS:
        raise FormatError(f"{what} {shown(seconds)} s is out of range")
    return round(seconds * 1_000_000)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
