"""cProfile / pstats files (`python -m cProfile -o run.prof prog.py`, `pstats.Stats.dump_stats`).

The file is `marshal.dump(stats)`, stats a dict
`{(file, first line, function name): (primitive calls, total calls, own s, cumulative s, callers)}`
with callers a dict of the same keys (to 4-tuples, or to ints in old files). Built-in functions
have the key `("~", 0, "<built-in method builtins.len>")`. It is decoded by `marshal_reader`,
never by `marshal`/`pstats` (they can build code objects from a hostile file).

Each entry becomes a function row (file, line, name, total calls, own µs, cumulative µs), and
each of its callers a call row (file, line, name, caller's file, line, name, calls, own µs,
cumulative µs: the callee's times for the calls from that caller), which lets the rules tell
the workload from the imports; times are rounded to integer microseconds. Entries whose paths
differ only in spelling (`./a.py`, `a.py`) are summed into one row. Old files whose callers hold
bare counts give no call rows.
"""

from __future__ import annotations

from typing import TypeGuard

from . import marshal_reader
from .errors import FormatError, checked_path, checked_text, shown

FunctionRow = tuple[str, int, str, int, int, int]  # (file, line, name, calls, own µs, cum µs)
# (file, line, name, caller's file, line, name, calls from it, own µs, cum µs of those calls)
CallRow = tuple[str, int, str, str, int, str, int, int, int]

_NOT_PSTATS = "not a cProfile/pstats file or a speedscope JSON profile"
# Bounds that keep every number a 64-bit integer downstream; no real run comes near them.
_MAX_COUNT = (1 << 63) - 1
_MAX_LINE = (1 << 31) - 1
_MAX_SECONDS = 1e9  # about 32 years


def parse(data: bytes) -> tuple[int, tuple[FunctionRow, ...], tuple[CallRow, ...]]:
    """(total µs: the sum of own times, sorted function rows, sorted call rows) of a pstats file;
    `FormatError` if it is not one."""
    try:
        stats = marshal_reader.loads(data)
    except FormatError as exc:
        raise FormatError(f"{_NOT_PSTATS} ({exc})") from None
    if not isinstance(stats, dict):
        raise FormatError(f"{_NOT_PSTATS} (holds a {type(stats).__name__}, not a dict of functions)")
    rows: dict[tuple[str, int, str], tuple[int, int, int]] = {}
    edges: dict[tuple[str, int, str, str, int, str], tuple[int, int, int]] = {}
    for number, (key, value) in enumerate(stats.items(), start=1):
        try:
            function, counts = _function(key), _counts(value)
            callers = _callers(value)
        except FormatError as exc:
            raise FormatError(f"cProfile entry {number}: {exc}") from None
        calls, own, cum = rows.get(function, (0, 0, 0))
        rows[function] = (calls + counts[0], own + counts[1], cum + counts[2])
        for caller, caller_counts in callers:
            edge = (*function, *caller)
            calls, own, cum = edges.get(edge, (0, 0, 0))
            edges[edge] = (calls + caller_counts[0], own + caller_counts[1], cum + caller_counts[2])
    functions: list[FunctionRow] = [(*key, *counts) for key, counts in rows.items()]
    functions.sort()
    calls_rows: list[CallRow] = [(*edge, *counts) for edge, counts in edges.items()]
    calls_rows.sort()
    return sum(row[4] for row in functions), tuple(functions), tuple(calls_rows)


def _callers(value: object) -> list[tuple[tuple[str, int, str], tuple[int, int, int]]]:
    """The callers of an entry (its checked value) with (calls, own µs, cum µs) of their calls;
    none from an old file whose callers map to bare counts."""
    assert isinstance(value, tuple) and isinstance(value[4], dict)  # _counts checked it
    callers: dict[object, object] = value[4]
    out = []
    for key, counts in callers.items():
        caller = _function(key)
        if _is_int(counts):
            return []
        if not isinstance(counts, tuple) or len(counts) != 4:
            raise FormatError(f"a caller's counts are not a (calls, calls, own, cum) tuple ({shown(counts)})")
        _, calls, own, cum = counts
        if not _is_int(calls) or not 0 <= calls <= _MAX_COUNT:
            raise FormatError(f"a caller's calls is not a count ({shown(calls)})")
        out.append((caller, (calls, _microseconds(own, "own time"), _microseconds(cum, "cumulative time"))))
    return out


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
