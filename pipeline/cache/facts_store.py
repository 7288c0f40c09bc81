"""Each file's extracted facts, kept so that an unchanged file is never parsed again.

`facts.duckdb` in the store's folder holds one entry per file: its path, its entry key (content
hash and extraction depth, see keys.entry_key), the extractor's stamp and the packed facts (or
why the file could not be extracted: a syntax error is found again only when the file changes).
The whole file (and its write-ahead log) is sealed when the store closes (trust.py) and checked
before DuckDB opens it: a store that fails is removed and made anew.  One run at a time uses
it (a lock file); a concurrent run assesses without it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import duckdb

from ...engine.connect import Limits, connect, foreign_objects
from ...engine.list_params import unnest_select
from ...facts.packing import compress_packed
from . import trust
from .keys import entry_key

if TYPE_CHECKING:
    from ...facts import SourceText

FACTS_FILE = "facts.duckdb"
LOCK_FILE = "lock"
SEAL_KIND = "fact store"
# New entries are held in memory, uncompressed (as the workers hand them over), up to this
# many bytes before they are compressed and written; the rest are compressed while the loaded
# facts are written to the results file (write_pending_soon) and written once the results are
# saved.  NumPy's facts take 76 MB, SciPy's and Astropy's 280 MB.
PENDING_BYTES = 320 * 1024 * 1024
# From this many bytes of entries, they are compressed on several cores.
PARALLEL_COMPRESS_BYTES = 8 * 1024 * 1024
# Up to this many bytes of entries go to DuckDB as lists (a column batch costs more for a few).
LIST_BATCH_BYTES = 1024 * 1024
# Below this much write-ahead log, closing the store leaves it to be replayed by the next open
# (a few ms per MB) instead of checkpointing: a checkpoint rewrites the table's row group with
# every file's facts in it (65 ms on NumPy) for one edited file's entry.
WAL_KEPT_BYTES = 4 * 1024 * 1024
# No entry is read beyond this size: the facts of the largest file cpq reads are far smaller.
MAX_ENTRY_BYTES = 256 * 1024 * 1024

_COLUMNS = [("path", "VARCHAR"), ("key", "VARCHAR"), ("stamp", "VARCHAR"), ("data", "BLOB")]
_TABLE = "file_facts"


# An entry that starts with this byte holds why the file could not be extracted (packed facts
# start with their codec's letter).
_FAILED = b"!"


def _decoded(entry: bytes) -> bytes | str:
    if entry.startswith(_FAILED):
        return entry[len(_FAILED) :].decode("utf-8", "surrogatepass")
    return entry


class StoreUnusable(Exception):
    """The store cannot be used for this run; the message says why."""


@dataclass
class FactStore:
    """Packed facts by (path, entry key), under one extractor stamp."""

    directory: Path
    con: duckdb.DuckDBPyConnection
    stamp: str
    lock: int  # the descriptor holding the store's lock
    hits: int = 0
    _pending: list[tuple[str, str, bytes]] = field(default_factory=list)
    _pending_bytes: int = 0
    _writing: threading.Thread | None = None  # write_pending_soon's
    broken: str | None = None  # why a write failed: the store is then left alone and not sealed

    def get_many(self, files: list[tuple[SourceText, bool]]) -> dict[str, bytes | str]:
        """What is kept for these (file, extracted in depth) pairs, in one query: packed facts,
        or why the file could not be extracted."""
        self._join_writer()
        if not files or self.broken:
            return {}
        self.write_pending()  # what this run extracted so far is found too
        keys = [(source.relpath, entry_key(source, deep)) for source, deep in files]
        wanted = unnest_select([("path", "VARCHAR"), ("key", "VARCHAR")])
        try:
            rows = self.con.execute(
                f"SELECT f.path, f.data FROM {_TABLE} f JOIN ({wanted}) w "
                "ON f.path = w.path AND f.key = w.key WHERE f.stamp = ? AND octet_length(f.data) <= ?",
                [[p for p, _ in keys], [k for _, k in keys], self.stamp, MAX_ENTRY_BYTES],
            ).fetchall()
        except duckdb.Error as exc:
            self.broken = f"cannot read it ({exc.__class__.__name__})"
            return {}
        found = {path: _decoded(bytes(data)) for path, data in rows}
        self.hits += len(found)
        return found

    def put(self, source: SourceText, deep: bool, data: bytes | str) -> None:
        self._join_writer()
        entry = data if isinstance(data, bytes) else _FAILED + data.encode("utf-8", "surrogatepass")
        self._pending.append((source.relpath, entry_key(source, deep), entry))
        self._pending_bytes += len(entry)
        if self._pending_bytes >= PENDING_BYTES:
            self.write_pending()

    def write_pending_soon(self) -> None:
        """Compress and write the entries put so far in a thread of its own (lz4 and DuckDB
        let other threads run): called while the main thread uses one core (DuckDB writing the
        loaded facts to the results file, or the report being made after an update).  A cold
        run's entries (SciPy's and Astropy's 64 MB of lz4) were written when the store closed,
        after the results were saved: half a second on one core at the end of the run.  Every
        other use of the store waits for that thread first."""
        if not self._pending or self._writing is not None or self.broken:
            return
        pending = self._take_pending()

        def write() -> None:
            with contextlib.suppress(Exception):  # a cache: what is not written is extracted again
                self._insert(*self._compressed(pending))
                self._checkpoint_if_large()

        self._writing = threading.Thread(target=write, name="cpq-store-write")
        self._writing.start()

    def write_pending(self) -> None:
        """Write the entries put so far (each replaces the file's previous entry), compressed."""
        self._join_writer()
        if self._pending:
            self._insert(*self._compressed(self._take_pending()))

    def _checkpoint_if_large(self) -> None:
        """Checkpoint when the write-ahead log has grown past WAL_KEPT_BYTES (else the next
        open replays it)."""
        if _size(_wal(self.directory / FACTS_FILE)) >= WAL_KEPT_BYTES:
            self.con.execute("CHECKPOINT")

    def _join_writer(self) -> None:
        if self._writing is not None:
            self._writing.join()
            self._writing = None

    def _take_pending(self) -> list[tuple[str, str, bytes | None]]:
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        return cast("list[tuple[str, str, bytes | None]]", pending)

    def _insert(self, paths: list[str], keys: list[str], data: list[bytes]) -> None:
        """Write these entries, each in place of the file's previous one."""
        stamps = [self.stamp] * len(paths)
        delete = (f"DELETE FROM {_TABLE} WHERE path IN (SELECT unnest(?))", [paths])
        if sum(map(len, data)) <= LIST_BATCH_BYTES:
            columns: list[list[str] | list[bytes]] = [paths, keys, stamps, data]
            self._transaction([delete, (f"INSERT INTO {_TABLE} {unnest_select(_COLUMNS)}", columns)])
        else:
            # Many bytes: DuckDB reads a column batch's binary column without a copy per
            # value, three times faster than a list of bytes objects.
            from ...engine.arrow_export import ColumnBatch, binary_column, symbol_column

            names = [name for name, _ in _COLUMNS]
            batch = ColumnBatch(names, [*map(symbol_column, (paths, keys, stamps)), binary_column(data)])
            self._transaction(
                [delete, (f"INSERT INTO {_TABLE} SELECT {', '.join(names)} FROM pending_facts", [])],
                {"pending_facts": batch},
            )

    @staticmethod
    def _compressed(
        pending: list[tuple[str, str, bytes | None]],
    ) -> tuple[list[str], list[str], list[bytes]]:
        """The paths, entry keys and compressed data of `pending`, each entry's uncompressed
        bytes let go as soon as it is compressed (SciPy's and Astropy's 239 MB are not held
        beside their 64 MB of lz4); on every core when they are many bytes (lz4 and zlib let
        other threads run)."""
        paths = [path for path, _, _ in pending]
        keys = [key for _, key, _ in pending]
        total = sum(len(entry or b"") for _, _, entry in pending)

        def compress(index: int) -> bytes:
            path, key, entry = pending[index]
            assert entry is not None
            pending[index] = (path, key, None)
            return compress_packed(entry)

        indexes = range(len(pending))
        if total < PARALLEL_COMPRESS_BYTES or len(pending) < 2:
            return paths, keys, [compress(index) for index in indexes]
        with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            return paths, keys, list(pool.map(compress, indexes))

    def flush(self, present: set[str]) -> None:
        """Write pending entries; forget files that are no longer in the tree."""
        self.write_pending()
        self._transaction(
            [
                (f"DELETE FROM {_TABLE} WHERE path NOT IN (SELECT unnest(?))", [sorted(present)]),
                (f"DELETE FROM {_TABLE} WHERE stamp <> ?", [self.stamp]),
            ]
        )

    def _transaction(
        self, statements: list[tuple[str, list]], views: dict[str, object] | None = None
    ) -> None:
        """Run the statements (reading `views`, column batches by name) all or none; a failure
        (a full disk, ...) leaves the store alone for the rest of this run: it is a cache, the
        assessment goes on without it."""
        if self.broken:
            return
        con = self.con
        views = views or {}
        try:
            for name, table in views.items():
                con.register(name, table)
            con.execute("BEGIN TRANSACTION")
            try:
                for sql, params in statements:
                    con.execute(sql, params)
                con.execute("COMMIT")
            except duckdb.Error:
                con.execute("ROLLBACK")
                raise
        except duckdb.Error as exc:
            self.broken = f"cannot write it ({_first_line(exc)})"
        finally:
            for name in views:
                with contextlib.suppress(duckdb.Error):
                    con.unregister(name)

    def close(self) -> str | None:
        """Close and seal the store; returns why it could not be kept, if so (it is then
        removed, and the next run starts afresh)."""
        self._join_writer()
        path = self.directory / FACTS_FILE
        wal = _wal(path)
        try:
            if not self.broken:
                with contextlib.suppress(duckdb.Error):
                    self.write_pending()
                with contextlib.suppress(duckdb.Error):
                    self._checkpoint_if_large()
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            if not self.broken:
                try:
                    trust.write_seal(
                        path,
                        SEAL_KIND,
                        self.stamp,
                        [path, wal],
                        {"written": f"{time.time():.6f}", "stamp": self.stamp},
                    )
                except (OSError, trust.Untrusted) as exc:
                    self.broken = f"cannot seal it ({getattr(exc, 'strerror', None) or exc})"
            if self.broken:
                _remove_store(path)
            return self.broken
        finally:
            os.close(self.lock)


def open_store(directory: Path, stamp: str) -> tuple[FactStore | None, str | None]:
    """The fact store in `directory` (checked, or made anew), or (None, why it cannot be used
    this run).  A store that fails its check is removed first and the reason returned beside
    the new store."""
    try:
        lock = take_lock(directory)
    except StoreUnusable as exc:
        return None, str(exc)
    return open_locked(directory, lock, stamp)


def open_locked(directory: Path, lock: int, stamp: str) -> tuple[FactStore | None, str | None]:
    """open_store, once its lock is held (`lock`: the descriptor that holds it, which the
    store closes with itself, or this function when the store cannot be used)."""
    path = directory / FACTS_FILE
    note = None
    try:
        for part in (path, _wal(path), trust.seal_path(path)):
            kind = trust.kind_of(part)
            if kind not in ("file", "missing"):
                raise StoreUnusable(f"{part.name} is {kind}")
        if trust.kind_of(path) == "file":
            try:
                trust.verify(path, SEAL_KIND, stamp, [path, _wal(path)])
            except trust.Untrusted as exc:
                # A store another version of cpq sealed (its facts would not be used anyway) is
                # replaced without a word; the seal's unchecked word for it decides only that.
                if _sealed_stamp(path) in (None, stamp):
                    note = f"{exc}: made anew"
                _remove_store(path)
        else:
            _remove_store(path)  # a log or seal without its store
        con = _connect(path, directory)
        try:
            problem = _check_tables(con)
        except duckdb.Error as exc:
            problem = _first_line(exc)
        if problem is not None:
            con.close()
            note = f"{FACTS_FILE}: {problem}: made anew"
            _remove_store(path)
            con = _connect(path, directory)
            _create_table(con)
    except (StoreUnusable, OSError, duckdb.Error) as exc:
        os.close(lock)
        return None, _first_line(exc)
    return FactStore(directory, con, stamp, lock), note


def _sealed_stamp(path: Path) -> str | None:
    """The extractor stamp the seal beside `path` names (unchecked), if it can be read."""
    try:
        return trust.read_seal(path).get("stamp")
    except (trust.Untrusted, OSError):
        return None


def _connect(path: Path, directory: Path) -> duckdb.DuckDBPyConnection:
    before = trust.identity(path)
    # No spilling: DuckDB would make a folder beside the file, where a link may wait.  Not
    # synced: the store is checked against its seal, log included, before any use.  Not
    # compressed again: DuckDB's compression of the lz4 entries as it checkpoints them halves
    # the store (SciPy's and Astropy's 61 MB to 29 MB) for 0.5 s of CPU, on the path to the
    # end of a cold run.
    con = connect(
        path,
        limits=Limits(memory_limit="256MB", temp_directory="", synced=False, compressed=False),
        checkpoint_on_close=False,
    )
    # DuckDB follows links: the file it opened must be the one that was checked (or new).
    after = trust.identity(path)
    if before is not None and (after is None or (after.device, after.inode) != (before.device, before.inode)):
        con.close()
        raise StoreUnusable(f"{path.name} was replaced while it was opened")
    return con


def _check_tables(con: duckdb.DuckDBPyConnection) -> str | None:
    """None when the store holds what cpq makes in it (creating the table of a new store);
    else what is wrong."""
    foreign = foreign_objects(con, {_TABLE})
    if foreign:
        return "holds " + ", ".join(foreign[:3])
    columns = con.execute(
        "SELECT list(column_name || ' ' || data_type ORDER BY column_index) FROM duckdb_columns() "
        f"WHERE database_name = current_database() AND table_name = '{_TABLE}'"
    ).fetchone()
    have = columns[0] if columns else None
    if have is None:
        _create_table(con)
        return None
    want = [f"{name} {sql_type}" for name, sql_type in _COLUMNS]
    return None if have == want else "an older layout"


def _create_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE TABLE {_TABLE} ({', '.join(f'{n} {t}' for n, t in _COLUMNS)})")


def take_lock(directory: Path) -> int:
    """Hold the store's lock (never waiting: a run that finds it held goes without the store):
    StoreUnusable when it cannot."""
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreUnusable(f"{path.name}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreUnusable(f"{path.name} is not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreUnusable("in use by another cpq run") from None
        except OSError as exc:
            raise StoreUnusable(f"cannot be locked ({exc.strerror})") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def _remove_store(path: Path) -> None:
    for part in (path, _wal(path), trust.seal_path(path)):
        trust.remove_file(part)


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0][:200]
