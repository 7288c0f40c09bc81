"""What cpq keeps across trees, in `$XDG_CACHE_HOME/cpq` (`~/.cache/cpq`): parsed rules files
and, for small trees, a template database with a program's tables and facts.

Whoever can write that folder (a shared cache, a CI cache restored from another branch) must not
be able to change an answer or run code: a parsed program is kept as a MAC (trust.py) followed
by its pickle, and is unpickled only once the MAC matches; a template is sealed and copied out
checked.  The folder keeps the KEEP most recently used entries of each kind.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import secrets
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from . import trust

if TYPE_CHECKING:
    from ...engine import Program

KEEP = 8
PROGRAM_KIND = "parsed program"
TEMPLATE_KIND = "tables template"
_MAC_BYTES = 32
_MAX_PROGRAM_BYTES = 64 * 1024 * 1024


def folder() -> Path | None:
    """The user cache folder (made when missing); None when it is not a folder of the user's
    own (a link, another user's) or cannot be made."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "cpq"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    except (OSError, RuntimeError):
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        return None
    return path


def load_program(key: str) -> Program | None:
    """The program parsed under `key` by an earlier run, if its MAC proves cpq wrote it."""
    from ...engine import Program

    where = folder()
    if where is None:
        return None
    path = where / f"program-{key[:32]}.pickle"
    try:
        fd = trust.open_regular(path)
    except (FileNotFoundError, trust.Untrusted):
        return None
    with os.fdopen(fd, "rb") as file:
        data = file.read(_MAX_PROGRAM_BYTES + 1)
    if len(data) > _MAX_PROGRAM_BYTES:
        return None
    try:
        if not trust.signed_matches(PROGRAM_KIND, key, data[_MAC_BYTES:], data[:_MAC_BYTES]):
            return None
        program = pickle.loads(data[_MAC_BYTES:])
    except (trust.Untrusted, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        return None
    if not isinstance(program, Program):
        return None
    _mark_used(path)
    return program


def save_program(key: str, program: Program) -> None:
    where = folder()
    if where is None:
        return
    with contextlib.suppress(OSError, trust.Untrusted):
        data = pickle.dumps(program)
        trust.write_file(where / f"program-{key[:32]}.pickle", trust.sign(PROGRAM_KIND, key, data) + data)
        _prune(where, "program-*.pickle")


def copy_template(key: str, target: Path) -> bool:
    """Copy the template of `key` to `target`, checked; whether there was a good one."""
    where = folder()
    if where is None:
        return False
    path = where / f"tables-{key[:32]}.duckdb"
    try:
        trust.verify(path, TEMPLATE_KIND, key, [path], copy_to=target)
    except (trust.Untrusted, OSError):
        return False
    _mark_used(path)
    return True


def template_target(key: str) -> Path | None:
    """Where a new template of `key` is made, before `keep_template` puts it in place."""
    where = folder()
    if where is None:
        return None
    # A name of this run's own (DuckDB opens files by name, following links).
    return where / f"tables-{key[:32]}.duckdb.{os.getpid()}-{secrets.token_hex(8)}.partial"


def keep_template(key: str, partial: Path) -> None:
    """Seal the template made at `partial` (closed) and put it in place."""
    target = partial.with_name(f"tables-{key[:32]}.duckdb")
    try:
        trust.write_seal(partial, TEMPLATE_KIND, key, [partial], {})
        os.replace(partial, target)
        os.replace(trust.seal_path(partial), trust.seal_path(target))
        _prune(partial.parent, "tables-*.duckdb")
    except (OSError, trust.Untrusted):
        discard_template(partial)


def discard_template(partial: Path) -> None:
    for leftover in (partial, trust.seal_path(partial), partial.with_name(partial.name + ".wal")):
        trust.remove_file(leftover)


def _mark_used(entry: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(entry, follow_symlinks=False)


def _prune(where: Path, pattern: str) -> None:
    """Remove all but the KEEP most recently used entries matching `pattern` (and their seals),
    and what a killed run left (an hour is far longer than making an entry takes)."""
    cutoff = time.time() - 3600
    for stale in where.glob(f"{pattern}.*partial*"):
        with contextlib.suppress(OSError):
            if os.lstat(stale).st_mtime < cutoff:
                trust.remove_file(stale)
    found = []
    for path in where.glob(pattern):
        with contextlib.suppress(OSError):
            found.append((os.lstat(path).st_mtime, path))
    found.sort(reverse=True)
    for _, old in found[KEEP:]:
        trust.remove_file(old)
        trust.remove_file(trust.seal_path(old))
