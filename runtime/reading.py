"""Read runtime evidence: a profile (cProfile/pstats or speedscope JSON) or a cuPyNumeric Doctor report.

What the readers return, and what they share: the file read with a size cap, the one-line
`EvidenceError`, the normalised paths and text checks. The format parsers (`cprofile`,
`speedscope`, `doctor`) are imported when a file is read, which keeps `import cpq.runtime`
free of json and of the decoders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import EvidenceError, FormatError, one_line, shown

# Larger than any profile or report of a real run; the JSON of a 1 GiB file already takes
# several GiB of memory once parsed.
MAX_FILE_BYTES = 1 << 30

# A path or name holding these is not one a program wrote: control characters would break
# lines in a report, a lone surrogate (JSON can escape one) is not text.
_BAD_TEXT = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\ud800-\udfff]")

FunctionRow = tuple[str, int, str, int, int, int]  # (file, line, name, calls, own, cum)
LineRow = tuple[str, int, int, int]  # (file, line, own, cum)


@dataclass(frozen=True, slots=True)
class Profile:
    """A run's profile: per function (cProfile, deterministic) or per executed line (speedscope, sampled)."""

    kind: str  # "cprofile" (deterministic, function-level) | "speedscope" (sampled, line-level)
    unit: str  # "us" (integer microseconds) | "samples" (speedscope unit "none": sample counts/weights)
    total: int  # the whole run in `unit`
    functions: tuple[FunctionRow, ...]  # (file, line, name, calls, own, cum), sorted
    lines: tuple[LineRow, ...]  # (file, line, own, cum), sorted


@dataclass(frozen=True, slots=True)
class DoctorDiagnostic:
    """One diagnostic of a cuPyNumeric Doctor run; `check` is derived from the description."""

    file: str
    line: int
    check: str
    description: str
    source: str
    reference: str


def read_profile(path: Path) -> Profile:
    """The profile in `path`, cProfile/pstats or speedscope JSON (sniffed); `EvidenceError` if unreadable."""
    data = _read(path)
    try:
        return _parse_profile(data)
    except FormatError as exc:
        raise _error(path, str(exc)) from None


def read_doctor(path: Path) -> tuple[DoctorDiagnostic, ...]:
    """The diagnostics of the Doctor report in `path`, sorted; `EvidenceError` if unreadable."""
    from . import doctor  # deferred: keeps `import cpq.runtime` light

    data = _read(path)
    try:
        return doctor.parse(data)
    except FormatError as exc:
        raise _error(path, str(exc)) from None


def _parse_profile(data: bytes) -> Profile:
    """Sniff the format by its first bytes: a marshal dict starts with '{' (0x7b, or 0xfb with
    marshal's ref flag) followed by a type code; JSON starts with blanks, '{' followed by a blank,
    '"' or '}' (none of which is a marshal type code), or '['."""
    from . import cprofile, speedscope  # deferred: keeps `import cpq.runtime` light

    why = "not a cProfile/pstats file or a speedscope JSON profile"
    if not data:
        raise FormatError(f"{why} (empty file)")
    if _looks_like_json(data):
        return speedscope.parse(data)
    if data[0] in (0x7B, 0xFB):
        return cprofile.parse(data)
    raise FormatError(f"{why} (starts with byte 0x{data[0]:02x})")


def _looks_like_json(data: bytes) -> bool:
    if data.startswith(b"\xef\xbb\xbf") or data[0] in b" \t\r\n[":
        return True
    return data[0] == 0x7B and (len(data) == 1 or data[1] in b' \t\r\n"}')


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            # One byte more than the cap tells a file over it (st_size is 0 for a pipe or device).
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise _error(path, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise _error(path, f"larger than {MAX_FILE_BYTES >> 30} GiB, not read")
    return data


def _error(path: Path, why: str) -> EvidenceError:
    return EvidenceError(one_line(f"{path}: {why}"))


def normalized_path(value: object, what: str) -> str:
    """A file path as the profile or report gives it, with `/` separators and no leading `./`."""
    path = checked_text(value, what).replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def checked_text(value: object, what: str) -> str:
    """`value` if it is a string of one line of text; `FormatError` naming `what` otherwise."""
    if not isinstance(value, str):
        raise FormatError(f"{what} is not a string ({shown(value)})")
    if _BAD_TEXT.search(value):
        raise FormatError(f"{what} holds a control character or a lone surrogate ({shown(value)})")
    return value
