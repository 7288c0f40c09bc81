"""cuPyNumeric Doctor JSON reports, as written by nvidia-cupynumeric 26.6.1.

`CUPYNUMERIC_DOCTOR=1 CUPYNUMERIC_DOCTOR_FORMAT=json CUPYNUMERIC_DOCTOR_FILENAME=report.json`
makes the Doctor (module `cupynumeric/_array/doctor.py` of nvidia-cupynumeric 26.6.1) write,
at exit, a JSON array of its `Diagnostic`s followed by a newline: objects with the fields
`filename` (str), `lineno` (int), `traceback` (str, "" unless CUPYNUMERIC_DOCTOR_TRACEBACK),
`source` (str or null: the source line), `description` (str) and `reference` (str or null: a
URL). Without a file name the same line is printed to stdout, after the program's own output,
so a captured stdout is read too: the whole content is the array, or else its last non-blank
line is. The Doctor writes nothing at all when it found nothing; an empty array is read as a
clean run.

The report names no check: it is recovered from the description, which each Checkup
subclass fixes (`_CHECKS` below). A description not known (a newer Doctor) gives "unknown".
Extra fields are ignored; `traceback` is not used.
"""

from __future__ import annotations

import json

from .errors import FormatError, checked_path, checked_text, shown

# (file, line, check, description, source, reference): the fields of `DoctorDiagnostic`
DoctorRow = tuple[str, int, str, str, str, str]

_NOT_DOCTOR = "not a cuPyNumeric Doctor JSON report"
_MAX_LINE = (1 << 31) - 1

# The description of each Checkup subclass of cupynumeric/_array/doctor.py (26.6.1) -> check.
_CHECKS: dict[str, str] = {
    # RepeatedItemOps
    "multiple scalar item accesses repeated on the same line": "repeated-item-ops",
    # RepeatedSliceAccessCheck
    "repeated slice access on the same line (e.g. x[i,:] = ... in a loop); consider vectorizing instead": (
        "repeated-slice-access"
    ),
    # ArrayGatherCheck
    "entire cuPyNumeric array is being gathered into one memory, "
    "and blocking on related outstanding asynchronous work": "array-gather",
    # StackOpsCheck
    "hstack/vstack called repeatedly (likely in a loop); "
    "consider pre-allocating or collecting results and stacking once": "stack-ops",
    # NonzeroCheck
    "use of nonzero can be slow in cuPyNumeric": "nonzero",
    # AdvancedIndexingCheck
    "use of advanced indexing can be slow in cuPyNumeric": "advanced-indexing",
    # Mpi4pyCheck
    "mpi4py is imported in this application; using mpi4py with cuPyNumeric is not permitted "
    "because Legate manages its own communication layer": "mpi4py",
    # IterCheck
    "iterating over a cuPyNumeric array with __iter__ is slow; use vectorized operations instead": "iter",
}
# BuiltinReductionCheck names the built-ins it saw: "Python built-in min used with cuPyNumeric
# array; prefer: min -> np.min(arr) or arr.min()", "Python built-ins max, min used with ...".
_BUILTIN_REDUCTION_PREFIX = "Python built-in"
UNKNOWN_CHECK = "unknown"
# What `_json` returns for text that is not JSON (None is JSON's null).
_NOT_JSON = object()


def check_of(description: str) -> str:
    """The check that wrote `description`, "unknown" for one this table does not know."""
    if description in _CHECKS:
        return _CHECKS[description]
    if description.startswith(_BUILTIN_REDUCTION_PREFIX):
        return "builtin-reduction"
    return UNKNOWN_CHECK


# What to do about the report a clean run does not write.
CLEAN_RUN_HINT = "the Doctor writes no report when it finds nothing: for a clean run, give a file holding []"


def parse(data: bytes) -> tuple[DoctorRow, ...]:
    """The diagnostics of a Doctor JSON report (or of a captured stdout ending with one), sorted
    by (file, line, check, ...)."""
    entries = _entries(data)
    return tuple(sorted(_diagnostic(entry, number) for number, entry in enumerate(entries, start=1)))


def _entries(data: bytes) -> list[object]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FormatError(f"{_NOT_DOCTOR} (not UTF-8 text)") from None
    if not text.strip():
        raise FormatError(f"{_NOT_DOCTOR} (empty); {CLEAN_RUN_HINT}")
    whole = _json(text)
    if isinstance(whole, list):
        return whole
    if whole is not _NOT_JSON:
        raise FormatError(f"{_NOT_DOCTOR} (a JSON {_json_kind(whole)}, not an array)")
    # A captured stdout: the Doctor's line comes last, after the program's own output.
    last = [line for line in text.splitlines() if line.strip()][-1]
    tail = _json(last)
    if isinstance(tail, list):
        return tail
    raise FormatError(f"{_NOT_DOCTOR} (neither the file nor its last line is a JSON array)")


def _json(text: str) -> object:
    """The JSON value `text` holds, `_NOT_JSON` if it is not JSON."""
    try:
        value: object = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # not JSON, NaN/Infinity, too deep, too many digits
        return _NOT_JSON
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a number")


def _json_kind(value: object) -> str:
    return {dict: "object", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _diagnostic(entry: object, number: int) -> DoctorRow:
    where = f"Doctor entry {number}"
    if not isinstance(entry, dict):
        raise FormatError(f"{where} is not an object ({shown(entry)})")
    for field in ("filename", "lineno", "description"):
        if field not in entry:
            raise FormatError(f"{where}: no {field}")
    line = entry["lineno"]
    if not isinstance(line, int) or isinstance(line, bool):
        raise FormatError(f"{where}: lineno is not a number ({shown(line)})")
    if not 0 <= line <= _MAX_LINE:
        raise FormatError(f"{where}: lineno {line} is out of range")
    if not isinstance(entry.get("traceback", ""), str):
        raise FormatError(f"{where}: traceback is not a string ({shown(entry['traceback'])})")
    description = checked_text(entry["description"], f"{where}: description")
    return (
        checked_path(entry["filename"], f"{where}: filename"),
        line,
        check_of(description),
        description,
        _optional_text(entry.get("source"), f"{where}: source"),
        _optional_text(entry.get("reference"), f"{where}: reference"),
    )


def _optional_text(value: object, what: str) -> str:
    return "" if value is None else checked_text(value, what)
