"""Saved results: whole evaluated databases, kept for `why` and `query`, for a re-run with
nothing changed, and as the starting point of an update after a few edits.

`results-<key>.duckdb` holds the evaluated database of the run whose results key (keys.py) is
<key>; its seal (trust.py) vouches for its bytes, its key, the update key it can be brought
up to date under, and when it was written.  It also holds its files' layout (LAYOUT_TABLE): per
file, what its facts were made from, its first node id and the number of ids it uses (or why it
could not be extracted).  A results file is
written under a temporary name, checkpointed, sealed and only then renamed into place, so no
run ever finds half of one; the newest KEEP_RESULTS are kept.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ...engine import Database
from ...engine.change_tables import GENERATION_TABLE
from ...engine.connect import foreign_objects
from ...engine.list_params import unnest_select
from ..run import FileLayout
from . import trust

if TYPE_CHECKING:
    from ...engine import Program

PREFIX = "results-"
SUFFIX = ".duckdb"
KEEP_RESULTS = 4
SEAL_KIND = "results"
LAYOUT_TABLE = "cpq_file_layout"
_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Saved:
    """A results file whose seal was checked, and its identity as checked."""

    path: Path
    key: str
    identity: trust.Identity


def path_for(directory: Path, key: str) -> Path:
    if not _KEY.fullmatch(key):
        raise ValueError(f"not a results key: {key!r}")
    return directory / f"{PREFIX}{key[:32]}{SUFFIX}"


def find(directory: Path, key: str) -> Saved | None:
    """The saved results of `key`, checked; None when there are none; Untrusted (saying why)
    when a file is there that cpq cannot prove it wrote for this key."""
    path = path_for(directory, key)
    kind = trust.kind_of(path)
    if kind == "missing":
        return None
    if kind != "file":
        raise trust.Untrusted(f"{path.name} is {kind}")
    return _checked(path, key)


def _checked(path: Path, key: str, copy_to: Path | None = None) -> Saved:
    if trust.kind_of(_wal(path)) != "missing":
        # DuckDB would replay a log beside the file on top of the bytes checked: none is ever left.
        raise trust.Untrusted(f"{path.name} has a write-ahead log beside it")
    meta, identity = trust.verify(path, SEAL_KIND, key, [path], copy_to=copy_to)
    if meta.get("key") != key:
        raise trust.Untrusted(f"{path.name} is sealed for other results")
    return Saved(path, key, identity)


def latest(directory: Path, update_key: str) -> list[tuple[Path, str]]:
    """The saved results that can be brought up to date under `update_key`, newest first, as
    (path, results key): what their seals say, checked only when one is used (`copy_checked`)."""
    found = []
    for seal in directory.glob(f"{PREFIX}*{SUFFIX}{trust.SEAL_SUFFIX}"):
        path = seal.with_name(seal.name.removesuffix(trust.SEAL_SUFFIX))
        try:
            meta = trust.read_seal(path)
            written = float(meta.get("written", ""))
        except (trust.Untrusted, ValueError):
            continue
        key = meta.get("key", "")
        if meta.get("update") == update_key and _KEY.fullmatch(key) and path == path_for(directory, key):
            found.append((written, path, key))
    found.sort(reverse=True)
    return [(path, key) for _, path, key in found]


def copy_checked(path: Path, key: str, target: Path) -> Saved:
    """Copy the results file `path` (of `key`) to `target`, checking its seal on the bytes
    copied; Untrusted when they do not match (no copy is then left)."""
    return _checked(path, key, copy_to=target)


def open_checked(program: Program, saved: Saved) -> Database:
    """The checked results, opened read-only: Untrusted when the file was changed or replaced
    since it was checked, or holds what cpq never puts in a results file."""
    db = Database.open(program, saved.path)
    try:
        ensure_same(saved.path, saved.identity)
        check_contents(db)
    except BaseException:
        db.close()
        raise
    return db


def ensure_same(path: Path, identity: trust.Identity) -> None:
    """DuckDB opens by name and follows links: the file open must be the one checked.  And it
    replays a log it finds beside the file (even read-only): none may have come meanwhile."""
    if trust.identity(path) != identity:
        raise trust.Untrusted(f"{path.name} changed after it was checked")
    if trust.kind_of(_wal(path)) != "missing":
        raise trust.Untrusted(f"{path.name} has a write-ahead log beside it")


def check_contents(db: Database, con: duckdb.DuckDBPyConnection | None = None) -> None:
    """Untrusted when the database holds what cpq never puts in a results file (read on `con`,
    a cursor of db's, when given)."""
    con = db.con if con is None else con
    foreign = foreign_objects(con, {*db.program.relations, LAYOUT_TABLE, GENERATION_TABLE})
    if foreign:
        raise trust.Untrusted("the saved results hold " + ", ".join(foreign[:3]))


def partial_path(directory: Path, key: str) -> Path:
    """Where a run evaluates before its results take their place: a name of this run's own,
    which nobody can have put a FIFO or a link at beforehand (DuckDB opens files by name)."""
    final = path_for(directory, key)
    return final.with_name(f"{final.name}.{os.getpid()}-{secrets.token_hex(8)}.partial")


def remove(path: Path) -> None:
    for part in (path, _wal(path), trust.seal_path(path)):
        trust.remove_file(part)


_LAYOUT_COLUMNS = [
    ("file", "VARCHAR"),
    ("sha", "VARCHAR"),
    ("deep", "BOOLEAN"),
    ("base", "BIGINT"),
    ("nodes", "BIGINT"),
    ("failed", "VARCHAR"),
]


def write_layout(db: Database, layout: dict[str, FileLayout]) -> None:
    entries = list(layout.values())
    db.con.execute(
        f"CREATE OR REPLACE TABLE {LAYOUT_TABLE} AS {unnest_select(_LAYOUT_COLUMNS)}",
        [
            list(layout),
            [e.sha for e in entries],
            [e.deep for e in entries],
            [e.base for e in entries],
            [e.nodes for e in entries],
            [e.failed for e in entries],
        ],
    )


def read_layout(db: Database) -> dict[str, FileLayout]:
    """The files' layout, read from a table of the database's own (an update reads it while
    the rest of the database is still being checked: a view of that name could read a file);
    Untrusted when there is none."""
    (tables,) = db.con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND table_name = ? AND NOT temporary",
        [LAYOUT_TABLE],
    ).fetchone() or (0,)
    if not tables:
        raise trust.Untrusted(f"the saved results hold no {LAYOUT_TABLE} table")
    names = ", ".join(name for name, _ in _LAYOUT_COLUMNS)
    rows = db.con.execute(f"SELECT {names} FROM {LAYOUT_TABLE}").fetchall()
    return {file: FileLayout(sha, deep, base, nodes, failed) for file, sha, deep, base, nodes, failed in rows}


def save(
    db: Database,
    partial: Path,
    directory: Path,
    key: str,
    update_key: str,
    layout: dict[str, FileLayout] | None = None,
) -> tuple[Path, trust.Identity]:
    """Make the evaluated file `partial` (db is closed here) the saved results of `key`, with
    the files' `layout` written first unless it is None (written already); returns where they
    are and their identity.  OSError, Untrusted or a DuckDB error when that fails (the partial
    file is then removed)."""
    target = path_for(directory, key)
    try:
        if layout is not None:
            write_layout(db, layout)
        db.con.execute("CHECKPOINT")
        db.close()
        meta = {"key": key, "update": update_key, "written": f"{time.time():.6f}"}
        identity = trust.write_seal(partial, SEAL_KIND, key, [partial], meta)
        # A log beside the target (left by a killed run, or planted) would be replayed onto
        # these results whenever they are opened: it goes first.  A link or a FIFO at the
        # target's name is renamed over (a rename replaces it, never what it points to).
        wal = _wal(target)
        if trust.kind_of(wal) not in ("missing", "a folder"):
            os.unlink(wal)
        for blocking in (target, wal):
            if trust.kind_of(blocking) == "a folder":
                raise trust.Untrusted(f"{blocking.name} is a folder")
        os.replace(partial, target)
        os.replace(trust.seal_path(partial), trust.seal_path(target))
        # A rename changes the file's ctime, nothing else: the identity to check from now on.
        moved = trust.identity(target)
        if (
            moved is None
            or moved.changed_ns < identity.changed_ns
            or identity != replace(moved, changed_ns=identity.changed_ns)
        ):
            raise trust.Untrusted(f"{target.name} changed while it was saved")
        identity = moved
    except BaseException:
        with contextlib.suppress(Exception):
            db.close()
        remove(partial)
        raise
    prune(directory)
    return target, identity


def prune(directory: Path) -> None:
    """Keep the KEEP_RESULTS newest results; remove what a killed run left (an hour is far
    longer than any run, so an older partial file belongs to no running assessment)."""
    found = []
    for path in directory.glob(f"{PREFIX}*{SUFFIX}"):
        with contextlib.suppress(OSError):
            found.append((os.lstat(path).st_mtime, path))
    found.sort(reverse=True)
    for _, old in found[KEEP_RESULTS:]:
        remove(old)
    remove_partials(directory, older_than=3600)
    for seal in directory.glob(f"{PREFIX}*{SUFFIX}{trust.SEAL_SUFFIX}"):
        if trust.kind_of(seal.with_name(seal.name.removesuffix(trust.SEAL_SUFFIX))) == "missing":
            trust.remove_file(seal)


def remove_partials(directory: Path, older_than: float | None = None) -> None:
    """Remove what runs killed while evaluating left: partial results files, their logs, seals
    and spill folders (only those older than `older_than` seconds, when given: the caller
    holds no lock that tells them from those of a running assessment)."""
    cutoff = time.time() - older_than if older_than is not None else None
    for stale in directory.glob(f"{PREFIX}*.partial*"):
        with contextlib.suppress(OSError):
            info = os.lstat(stale)
            if cutoff is not None and info.st_mtime >= cutoff:
                continue
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(stale)  # never follows a link inside
            else:
                trust.remove_file(stale)


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")
