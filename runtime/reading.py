"""Read runtime evidence: a profile (cProfile/pstats or speedscope JSON) or a cuPyNumeric Doctor report.

What the readers return, the file read with a size cap, the format sniffed, and the one-line
`EvidenceError`. The format parsers (`cprofile`, `speedscope`, `doctor`) return plain rows and
are imported when a file is read, which keeps `import cpq.runtime` free of json and of the
decoders.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import EvidenceError, FormatError, one_line

# Larger than any profile or report of a real run; the JSON of a 1 GiB file already takes
# several GiB of memory once parsed.
MAX_FILE_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class Profile:
    """A run's profile: per function (cProfile, deterministic) or per executed line (speedscope, sampled)."""

    kind: str  # "cprofile" (deterministic, function-level) | "speedscope" (sampled, line-level)
    unit: str  # "us" (integer microseconds) | "samples" (speedscope unit "none": sample counts/weights)
    total: int  # the whole run in `unit`
    # The types spelled out (not the parsers' row aliases): resolvable without importing a parser.
    functions: tuple[tuple[str, int, str, int, int, int], ...]  # (file, line, name, calls, own, cum), sorted
    lines: tuple[tuple[str, int, int, int], ...]  # (file, line, own, cum), sorted
    # Who called whom (cProfile): (file, line, name, caller file, line, name, calls, own, cum), sorted.
    calls: tuple[tuple[str, int, str, str, int, str, int, int, int], ...] = ()


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

    if not path.exists() and not path.is_symlink():
        # The usual way to get here: a clean run, for which the Doctor writes no file.
        raise _error(path, f"no such file; {doctor.CLEAN_RUN_HINT}")
    data = _read(path)
    try:
        rows = doctor.parse(data)
    except FormatError as exc:
        raise _error(path, str(exc)) from None
    return tuple(DoctorDiagnostic(*row) for row in rows)


def _parse_profile(data: bytes) -> Profile:
    """Sniff the format by its first bytes: a marshal dict starts with '{' (0x7b, or 0xfb with
    marshal's ref flag) followed by a type code; JSON starts with blanks, '{' followed by a blank,
    '"' or '}' (none of which is a marshal type code), or '['."""
    from . import cprofile, speedscope  # deferred: keeps `import cpq.runtime` light

    why = "not a cProfile/pstats file or a speedscope JSON profile"
    if not data:
        raise FormatError(f"{why} (empty file)")
    if _looks_like_json(data):
        unit, total, lines = speedscope.parse(data)
        return Profile(kind="speedscope", unit=unit, total=total, functions=(), lines=lines)
    if data[0] in (0x7B, 0xFB):
        total, functions, calls = cprofile.parse(data)
        return Profile(kind="cprofile", unit="us", total=total, functions=functions, lines=(), calls=calls)
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
