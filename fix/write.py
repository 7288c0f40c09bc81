"""Writing fixed files back: inside PATH only, each file in its own encoding and line endings,
through a temporary file renamed over it, so a file is either as it was or wholly fixed.

The fixes were made on the text as assessed (line endings read as "\\n"); they are carried over
to the file's own text by line and column, which the two share, since no edit breaks or joins
lines.  A file that changed since it was read, a symbolic link, or a file reached through one
from outside PATH is left alone with the reason.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import io
import os
import re
import tempfile
import tokenize
from collections.abc import Iterable
from pathlib import Path

from ..facts.discover import decode_source
from .edits import Edit, apply_edits

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class NotWritten(Exception):
    """A file left as it was, with the reason."""


def target_path(root: Path, relpath: str) -> Path:
    """The file `relpath` of a run on `root`, refused when writing it could reach outside root."""
    target = root if not root.is_dir() else root / relpath
    if target.is_symlink():
        raise NotWritten("a symbolic link: not rewritten")
    top = root.resolve() if root.is_dir() else target.resolve().parent
    if not target.resolve().is_relative_to(top):
        raise NotWritten("outside PATH (through a symbolic link)")
    return target


def write_fixed(target: Path, sha: str, assessed: str, edits: Iterable[Edit]) -> None:
    """Make `edits` (offsets in `assessed`, the text the run read) in the file `target`, whose
    bytes must still hash to `sha`."""
    try:
        data = target.read_bytes()
        mode = target.stat().st_mode & 0o7777
    except OSError as exc:
        raise NotWritten(f"unreadable: {exc.strerror or exc}") from None
    if hashlib.sha256(data).hexdigest() != sha:
        raise NotWritten("changed since it was read")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        raw = data.decode(encoding)  # "utf-8-sig" with a BOM: decoding drops it, encoding puts it back
    except (SyntaxError, LookupError, UnicodeDecodeError):
        raise NotWritten("its encoding is not one cpq can write back") from None
    if _LINE_BREAK.sub("\n", raw) != assessed:
        raise NotWritten(f"its text in {encoding} is not the text assessed")
    new_data = apply_edits(raw, _onto(raw, assessed, edits)).encode(encoding)
    expected = apply_edits(assessed, edits)
    if decode_source(new_data) != expected:
        raise NotWritten("the fixed bytes would not read back as the fixed text")
    _replace(target, new_data, mode)


def _onto(raw: str, assessed: str, edits: Iterable[Edit]) -> list[Edit]:
    """The edits moved from the assessed text onto the file's own, by line and column."""
    raw_starts = [0] + [m.end() for m in _LINE_BREAK.finditer(raw)]
    starts = [0] + [m.end() for m in re.finditer("\n", assessed)]

    def move(offset: int) -> int:
        line = bisect.bisect_right(starts, offset) - 1
        return raw_starts[line] + offset - starts[line]

    return [Edit(move(e.start), move(e.end), e.text) for e in edits]


def _replace(target: Path, data: bytes, mode: int) -> None:
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".cpq-fix")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise NotWritten(f"cannot write: {exc.strerror or exc}") from None
