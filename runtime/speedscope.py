"""speedscope JSON profiles, as py-spy writes them (`py-spy record --format speedscope`).

Why this line-level format: py-spy is the usual sampling profiler for Python programs (no
code changes, it attaches to MPI and legate launches), and its frames carry the line being
*executed*; pyinstrument's JSON keys frames by a function's first line only.

The format (https://www.speedscope.app/file-format-schema.json):
`{"shared": {"frames": [{"name", "file"?, "line"?, "col"?}]}, "profiles": [...]}` with
sampled profiles `{"type": "sampled", "unit", "samples": [[frame index, outermost first]],
"weights": [number]}` (py-spy: one per thread, unit "seconds", weight 1/rate; or "none" and
sample counts) and evented ones `{"type": "evented", "unit", "startValue", "endValue",
"events": [{"type": "O"|"C", "frame", "at"}]}`.

Per (file, line): own time is the weight of the samples whose innermost frame with a file and
a line is that line; cumulative time is the weight of the samples with the line anywhere on
the stack (once per sample, however often recursion repeats it). Frames without a file or a
line (line 0: unknown) are skipped. Times are integer microseconds; unit "none" gives sample
counts (Profile.unit "samples"). `functions` stays empty: a frame's line is the executing
line, not the function's definition. A sample taken while Python's import system ran (a frame
of `<frozen importlib._bootstrap...>` on its stack) is left out of a sampled profile: loading
modules is not the workload (rules/runtime.dl leaves imports out of a cProfile run likewise).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import TypeGuard

from .errors import FormatError, checked_path, checked_text, shown

LineRow = tuple[str, int, int, int]  # (file, line, own, cum)

_NOT_SPEEDSCOPE = "not a cProfile/pstats file or a speedscope JSON profile"
# Microseconds per unit; "none" counts samples.
_TIME_UNITS = {"nanoseconds": 1e-3, "microseconds": 1.0, "milliseconds": 1e3, "seconds": 1e6}
_MAX_LINE = (1 << 31) - 1
# Far beyond a real run (about 32 years in µs, or in ns for a raw value), within a 64-bit
# integer after rounding, and small enough that no arithmetic on them overflows a float.
_MAX_TOTAL = 1e15
_MAX_VALUE = 1e18

Key = tuple[str, int]


def parse(data: bytes) -> tuple[str, int, tuple[LineRow, ...]]:
    """(unit: "us" or "samples", total, sorted line rows) of a speedscope JSON file; `FormatError`
    if it is not one."""
    document = _load_json(data)
    if isinstance(document, list):
        raise FormatError(f"{_NOT_SPEEDSCOPE} (a JSON array: is it a cuPyNumeric Doctor report?)")
    if not isinstance(document, dict) or "profiles" not in document or "shared" not in document:
        raise FormatError(f'{_NOT_SPEEDSCOPE} (JSON without speedscope\'s "shared" and "profiles")')
    shared = document["shared"]
    if not isinstance(shared, dict):
        raise FormatError(f"shared is not an object ({shown(shared)})")
    keys = _frame_keys(shared.get("frames"))
    profiles = document["profiles"]
    if not isinstance(profiles, list):
        raise FormatError(f"profiles is not a list ({shown(profiles)})")
    totals = _Totals()
    counts_samples: bool | None = None  # unit "none" in every profile, or a time unit in every one
    for index, profile in enumerate(profiles):
        where = f"profiles[{index}]"
        if not isinstance(profile, dict):
            raise FormatError(f"{where} is not an object ({shown(profile)})")
        scale = _scale(profile.get("unit"), where)
        if counts_samples is not None and counts_samples != (scale is None):
            raise FormatError(f'{where}: profiles mix sample counts (unit "none") and times')
        kind = profile.get("type")
        if kind == "sampled":
            _sampled(profile, keys, scale or 1.0, totals, where)
        elif kind == "evented":
            _evented(profile, keys, scale or 1.0, totals, where)
        else:
            raise FormatError(f'{where}.type is not "sampled" or "evented" ({shown(kind)})')
        counts_samples = scale is None
    return "us" if counts_samples is False else "samples", round(totals.total), totals.lines()


def _load_json(data: bytes) -> object:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FormatError(f"{_NOT_SPEEDSCOPE} (JSON that is not UTF-8)") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise FormatError(f"{_NOT_SPEEDSCOPE} (JSON nested too deeply)") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, an integer of too many digits
        raise FormatError(f"{_NOT_SPEEDSCOPE} (invalid JSON: {str(exc).splitlines()[0]})") from None


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a number")


# The frames of Python's import system, as profilers name their file.
IMPORT_SYSTEM = "<frozen importlib"


def _importing(key: Key | None) -> bool:
    return key is not None and key[0].startswith(IMPORT_SYSTEM)


def _frame_keys(frames: object) -> list[Key | None]:
    """The (file, line) of each shared frame, None for a frame without both."""
    if not isinstance(frames, list):
        raise FormatError(f"shared.frames is not a list ({shown(frames)})")
    keys: list[Key | None] = []
    for index, frame in enumerate(frames):
        where = f"shared.frames[{index}]"
        if not isinstance(frame, dict):
            raise FormatError(f"{where} is not an object ({shown(frame)})")
        checked_text(frame.get("name"), f"{where}.name")
        file, line = frame.get("file"), frame.get("line")
        if line is not None and not (_is_int(line) and 0 <= line <= _MAX_LINE):
            raise FormatError(f"{where}.line is not a line number ({shown(line)})")
        if file is None or line is None or line == 0:
            keys.append(None)
        else:
            keys.append((checked_path(file, f"{where}.file"), line))
    return keys


def _scale(unit: object, where: str) -> float | None:
    """Microseconds per unit, None for sample counts ("none")."""
    if unit == "none":
        return None
    if isinstance(unit, str) and unit in _TIME_UNITS:
        return _TIME_UNITS[unit]
    raise FormatError(f'{where}.unit is not a time unit or "none" ({shown(unit)})')


class _Totals:
    """Own and cumulative weight per line, and the weight of the whole run, in µs or samples."""

    def __init__(self) -> None:
        self.own: defaultdict[Key, float] = defaultdict(float)
        self.cum: defaultdict[Key, float] = defaultdict(float)
        self.total = 0.0

    def add_total(self, amount: float, where: str) -> None:
        self.total += amount
        if not self.total <= _MAX_TOTAL:
            raise FormatError(f"{where}: the weights add up to more than {_MAX_TOTAL:.0e}")

    def lines(self) -> tuple[LineRow, ...]:
        rows: list[LineRow] = [
            (*key, round(self.own.get(key, 0.0)), round(cum)) for key, cum in self.cum.items()
        ]
        rows.sort()
        return tuple(rows)


def _sampled(
    profile: dict[str, object], keys: list[Key | None], scale: float, totals: _Totals, where: str
) -> None:
    samples, weights = profile.get("samples"), profile.get("weights")
    if not isinstance(samples, list) or not isinstance(weights, list):
        raise FormatError(f"{where}: samples and weights are not lists")
    if len(samples) != len(weights):
        raise FormatError(f"{where}: {len(samples)} samples but {len(weights)} weights")
    # Samples repeat the same stacks: each distinct stack is walked once.
    by_stack: defaultdict[tuple[int, ...], float] = defaultdict(float)
    for index, (stack, weight) in enumerate(zip(samples, weights, strict=True)):
        if not _is_number(weight) or weight < 0:
            raise FormatError(f"{where}.weights[{index}] is not a weight ({shown(weight)})")
        # `type(...) is int` rather than isinstance: it also refuses bools, and is the fast path
        # for the millions of indices of a long recording.
        if not isinstance(stack, list) or not all(type(frame) is int for frame in stack):
            raise FormatError(f"{where}.samples[{index}] is not a list of frame indices ({shown(stack)})")
        frames = tuple(stack)
        if frames and frames not in by_stack and not 0 <= min(frames) <= max(frames) < len(keys):
            bad = next(frame for frame in frames if not 0 <= frame < len(keys))
            raise FormatError(
                f"{where}.samples[{index}]: frame index {bad} is out of range ({len(keys)} frames)"
            )
        by_stack[frames] += weight * scale
    for frames, weight in by_stack.items():
        if any(_importing(keys[frame]) for frame in frames):
            continue  # loading modules is not the workload
        totals.add_total(weight, where)
        present = [key for key in (keys[frame] for frame in frames) if key is not None]
        for key in set(present):
            totals.cum[key] += weight
        if present:
            totals.own[present[-1]] += weight


def _evented(
    profile: dict[str, object], keys: list[Key | None], scale: float, totals: _Totals, where: str
) -> None:
    """Open/close events: the time between two events goes to the stack open in between.

    Cumulative time is added when a line leaves the stack (the time since it entered), so
    each event costs O(1) however deep the stack is."""
    start, end, events = profile.get("startValue"), profile.get("endValue"), profile.get("events")
    if not _is_number(start) or not _is_number(end) or not start <= end:
        raise FormatError(
            f"{where}: startValue and endValue are not an interval ({shown(start)}, {shown(end)})"
        )
    if not isinstance(events, list):
        raise FormatError(f"{where}.events is not a list ({shown(events)})")
    totals.add_total((end - start) * scale, where)
    stack: list[int] = []
    keyed: list[Key] = []  # the keys of the frames on `stack` that have one, innermost last
    depth: Counter[Key] = Counter()
    entered: dict[Key, float] = {}
    now = start

    def advance(to: float) -> None:
        if keyed:
            totals.own[keyed[-1]] += (to - now) * scale

    def leave(key: Key | None, at: float) -> None:
        if key is None:
            return
        keyed.pop()
        depth[key] -= 1
        if depth[key] == 0:
            totals.cum[key] += (at - entered.pop(key)) * scale

    for index, event in enumerate(events):
        here = f"{where}.events[{index}]"
        if not isinstance(event, dict):
            raise FormatError(f"{here} is not an object ({shown(event)})")
        kind, frame, at = event.get("type"), event.get("frame"), event.get("at")
        if not _is_number(at) or not now <= at <= end:
            raise FormatError(
                f"{here}.at is not a time between the previous event and endValue ({shown(at)})"
            )
        if not _is_int(frame):
            raise FormatError(f"{here}.frame is not a frame index ({shown(frame)})")
        key = _key(keys, frame, here)
        advance(at)
        now = at
        if kind == "O":
            stack.append(frame)
            if key is not None:
                keyed.append(key)
                depth[key] += 1
                entered.setdefault(key, at)
                totals.cum[key] += 0.0  # a line that ran for no time is still listed
        elif kind == "C":
            if not stack or stack[-1] != frame:
                open_frame = stack[-1] if stack else None
                raise FormatError(f"{here} closes frame {frame} but the open frame is {open_frame}")
            stack.pop()
            leave(key, at)
        else:
            raise FormatError(f'{here}.type is not "O" or "C" ({shown(kind)})')
    # Frames still open at the end run until endValue.
    advance(end)
    while stack:
        leave(keys[stack.pop()], end)


def _key(keys: list[Key | None], frame: int, where: str) -> Key | None:
    if not 0 <= frame < len(keys):
        raise FormatError(f"{where}: frame index {frame} is out of range ({len(keys)} frames)")
    return keys[frame]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    """A finite JSON number within ±_MAX_VALUE (NaN fails the comparison)."""
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and -_MAX_VALUE <= value <= _MAX_VALUE
    )
