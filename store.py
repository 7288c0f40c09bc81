"""The incremental fact store: `.cpq/` in the assessed tree (or `--cache-dir`).

`facts.duckdb` keeps each file's extracted facts keyed by path and content
hash, under a stamp of the extractor's version, so an unchanged file is never
parsed again. `results-*.duckdb` keep whole evaluated databases keyed by a
digest of everything they depend on (file hashes, context, rules, manifest),
so `why` and `query` — and a re-run with nothing changed — reuse them.

The cache is an optimisation only: any problem with it (a corrupted or locked
file, a read-only tree, a version mismatch) means it is rebuilt or bypassed,
never trusted.
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import duckdb

from . import __version__
from .engine.list_params import unnest_select
from .facts.store import FACTS_SHA_BYTES

CACHE_DIRNAME = ".cpq"
FACTS_FILE = "facts.duckdb"
RESULTS_PREFIX = "results-"
KEEP_RESULTS = 4
PENDING_BYTES = 32 * 1024 * 1024  # new entries held in memory before they are written
# Up to this many bytes of entries go to DuckDB as lists (no pyarrow import for a small tree).
LIST_BATCH_BYTES = 1024 * 1024
# Below this much write-ahead log, closing the store leaves it to be replayed by the next open
# (a few ms per MB) instead of checkpointing: a checkpoint rewrites the table's row group with
# every file's facts in it (65 ms on NumPy) for one edited file's entry.
WAL_KEPT_BYTES = 4 * 1024 * 1024
_SCHEMA = 4  # the packed-facts format


@functools.cache
def extractor_stamp() -> str:
    """Changes whenever the extractor's code (or cpq's version) changes (read once a process:
    several keys of a run depend on it)."""
    return code_digest("cpq.facts", (".py",), f"{__version__}/{_SCHEMA}")


def code_digest(package: str, suffixes: tuple[str, ...], salt: str = "") -> str:
    """A digest of the source files of `package` (names and contents) and of `salt`."""
    digest = hashlib.sha256(salt.encode())
    files = resources.files(package)
    for name in sorted(p.name for p in files.iterdir() if p.name.endswith(suffixes)):
        digest.update(name.encode())
        digest.update(files.joinpath(name).read_bytes())
    return digest.hexdigest()[:16]


def remove_all_but_newest(directory: Path, pattern: str, keep: int) -> None:
    """Remove the files matching `pattern` in `directory` but the `keep` most recently
    modified (a file removed meanwhile by another run is skipped)."""
    found = []
    for path in directory.glob(pattern):
        try:
            found.append((path.stat().st_mtime, path))
        except OSError:
            pass
    found.sort(reverse=True)
    for _, old in found[keep:]:
        try:
            old.unlink()
        except OSError:
            pass


def default_cache_dir(path: Path) -> Path:
    root = path if path.is_dir() else path.parent
    return root / CACHE_DIRNAME


@dataclass
class FactStore:
    """Per-file facts by (path, sha256). Opened on demand; `None`-safe through `open_store`."""

    directory: Path
    con: duckdb.DuckDBPyConnection
    stamp: str
    hits: int = 0
    misses: int = 0
    _pending: list[tuple[str, str, bytes]] = field(default_factory=list)
    _pending_bytes: int = 0
    broken: bool = False  # a read failed: the file is damaged (see _read)

    def get_many(self, keys: list[tuple[str, str]]) -> dict[str, bytes]:
        """Facts for many (path, sha) pairs in one query."""
        found = self._lookup(keys, "data")
        self.hits += len(found)
        self.misses += len(keys) - len(found)
        return found

    def fact_shas(self, keys: list[tuple[str, str]]) -> dict[str, bytes]:
        """`facts_sha` of the stored facts for (path, sha) pairs, without reading the facts."""
        return self._lookup(keys, "facts_sha")

    def _read(self, sql: str, params: list) -> list[tuple]:
        """Rows of a query on the store; none once the store proved damaged (it is then
        left alone for this run and removed at `close`, so the next run starts afresh)."""
        if self.broken:
            return []
        try:
            return self.con.execute(sql, params).fetchall()
        except duckdb.Error:
            self.broken = True
            return []

    def _lookup(self, keys: list[tuple[str, str]], column: str) -> dict[str, bytes]:
        if not keys or self.broken:
            return {}
        wanted = unnest_select([("path", "VARCHAR"), ("sha", "VARCHAR")])
        rows = self._read(
            f"SELECT f.path, f.{column} FROM file_facts f JOIN ({wanted}) w "
            "ON f.path = w.path AND f.sha = w.sha WHERE f.stamp = ?",
            [[p for p, _ in keys], [h for _, h in keys], self.stamp],
        )
        return {path: bytes(value) for path, value in rows}

    def alias(self, text_digest: str) -> str | None:
        return self._digest_of("results_alias", "text_digest", text_digest)

    def set_alias(self, text_digest: str, facts_digest: str) -> None:
        # Only the newest few matter: a tree's text changes with every edit.
        self._set_digest("results_alias", "text_digest", text_digest, facts_digest, keep=64)

    def latest_results(self, program_key: str) -> Path | None:
        digest = self._digest_of("latest_results", "program_key", program_key)
        return self.fresh_results(digest) if digest is not None else None

    def _digest_of(self, table: str, key_column: str, key: str) -> str | None:
        rows = self._read(f"SELECT facts_digest FROM {table} WHERE {key_column} = ?", [key])
        return str(rows[0][0]) if rows else None

    def set_latest_results(self, program_key: str, facts_digest: str) -> None:
        self._set_digest("latest_results", "program_key", program_key, facts_digest)

    def _set_digest(
        self, table: str, key_column: str, key: str, facts_digest: str, keep: int | None = None
    ) -> None:
        """Point `key` at `facts_digest` in `table` (results_alias or latest_results); with
        `keep`, only that many of the newest rows are kept."""
        statements: list[tuple[str, list]] = [
            (f"DELETE FROM {table} WHERE {key_column} = ?", [key]),
            (f"INSERT INTO {table} VALUES (?, ?, ?)", [key, facts_digest, time.time()]),
        ]
        if keep is not None:
            statements.append(
                (
                    f"DELETE FROM {table} WHERE {key_column} NOT IN "
                    f"(SELECT {key_column} FROM {table} ORDER BY written DESC LIMIT {keep})",
                    [],
                )
            )
        self._transaction(statements)

    def put(self, relpath: str, sha: str, data: bytes) -> None:
        self._pending.append((relpath, sha, data))
        self._pending_bytes += len(data)
        if self._pending_bytes >= PENDING_BYTES:
            self.write_pending()

    def write_pending(self) -> None:
        """Write the entries put so far (each replaces the file's previous entry)."""
        if not self._pending:
            return
        paths = [p for p, _, _ in self._pending]
        columns = [
            paths,
            [h for _, h, _ in self._pending],
            [self.stamp] * len(paths),
            [d for _, _, d in self._pending],
            [d[:FACTS_SHA_BYTES] for _, _, d in self._pending],
        ]
        delete = ("DELETE FROM file_facts WHERE path IN (SELECT unnest(?))", [paths])
        if self._pending_bytes <= LIST_BATCH_BYTES:
            entries = unnest_select(
                [
                    ("path", "VARCHAR"),
                    ("sha", "VARCHAR"),
                    ("stamp", "VARCHAR"),
                    ("data", "BLOB"),
                    ("facts_sha", "BLOB"),
                ]
            )
            self._transaction([delete, (f"INSERT INTO file_facts {entries}", columns)])
        else:
            # Many bytes: DuckDB reads an Arrow binary column without a copy per value, three
            # times faster than a list of bytes objects.
            import pyarrow as pa

            names = ["path", "sha", "stamp", "data", "facts_sha"]
            types = [pa.string(), pa.string(), pa.string(), pa.binary(), pa.binary()]
            batch = pa.table([pa.array(c, type=t) for c, t in zip(columns, types, strict=True)], names=names)
            self._transaction(
                [delete, (f"INSERT INTO file_facts SELECT {', '.join(names)} FROM pending_facts", [])],
                {"pending_facts": batch},
            )
        self._pending.clear()
        self._pending_bytes = 0

    def flush(self, present: set[str]) -> None:
        """Write pending entries; forget files that are no longer in the tree."""
        self.write_pending()
        self._transaction(
            [
                ("DELETE FROM file_facts WHERE path NOT IN (SELECT unnest(?))", [sorted(present)]),
                ("DELETE FROM file_facts WHERE stamp <> ?", [self.stamp]),
            ]
        )

    def _transaction(
        self, statements: list[tuple[str, list]], views: dict[str, object] | None = None
    ) -> None:
        """Run the statements (reading `views`, Arrow tables by name) all or none; a failure
        (a damaged file, a full disk) leaves the store alone for this run: it is a cache, the
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
        except duckdb.Error:
            self.broken = True
        finally:
            for name in views:
                try:
                    con.unregister(name)
                except duckdb.Error:
                    pass

    def close(self) -> None:
        if not self.broken and _size(self.directory / (FACTS_FILE + ".wal")) < WAL_KEPT_BYTES:
            try:
                self.con.execute("PRAGMA disable_checkpoint_on_shutdown")
            except duckdb.Error:  # it checkpoints as it closes, as before
                pass
        try:
            self.con.close()
        except duckdb.Error:
            pass
        if self.broken:
            _remove(self.directory / FACTS_FILE)

    # -- whole evaluated databases --------------------------------------------------------

    def results_path(self, digest: str) -> Path:
        return self.directory / f"{RESULTS_PREFIX}{digest[:20]}.duckdb"

    def fresh_results(self, digest: str) -> Path | None:
        path = self.results_path(digest)
        return path if path.exists() else None

    def has_results(self) -> bool:
        """Whether any evaluated database is saved (a first run has none to reuse)."""
        return any(self.directory.glob(f"{RESULTS_PREFIX}*.duckdb"))

    def prune_results(self) -> None:
        remove_all_but_newest(self.directory, f"{RESULTS_PREFIX}*.duckdb", KEEP_RESULTS)
        # A run killed while evaluating leaves its partial file behind; an hour is far longer
        # than any run, so an older one belongs to no running assessment.
        cutoff = time.time() - 3600
        for stale in self.directory.glob(f"{RESULTS_PREFIX}*.partial*"):
            try:
                if stale.stat().st_mtime < cutoff:
                    stale.unlink()
            except OSError:
                pass


def open_store(directory: Path) -> FactStore | None:
    """Open (creating, or rebuilding when unusable) the store; None when it cannot be used."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        ignore = directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n")  # the store never shows up in the user's git status
    except OSError:
        return None
    path = directory / FACTS_FILE
    for attempt in range(2):
        try:
            con = duckdb.connect(str(path))
            _create_tables(con)
            return FactStore(directory, con, extractor_stamp())
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                # Held by a concurrent run: assess without the cache rather than wait or corrupt.
                return None
            if attempt == 0:
                _remove(path)  # not a DuckDB file (damaged, truncated): rebuild it
                continue
            return None
        except duckdb.Error:
            if attempt == 0:
                _remove(path)  # corrupted or from an incompatible DuckDB: rebuild it
                continue
            return None
    return None


_TABLES = {
    "file_facts": "(path VARCHAR, sha VARCHAR, stamp VARCHAR, data BLOB, facts_sha BLOB)",
    # A tree's text digest -> the digest of its facts, under which its results are kept.
    "results_alias": "(text_digest VARCHAR, facts_digest VARCHAR, written DOUBLE)",
    # The newest results per program (rules, extractor): a later run copies unchanged files'
    # facts out of them (see reuse.py).
    "latest_results": "(program_key VARCHAR, facts_digest VARCHAR, written DOUBLE)",
}


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    """The store's tables; a table of an older layout is replaced (it is only a cache)."""
    # One query for every table's columns: each statement costs a millisecond or two.
    have = dict(
        con.execute(
            "SELECT table_name, list(column_name ORDER BY column_index) FROM duckdb_columns() "
            "WHERE schema_name = 'main' AND table_name IN (SELECT unnest(?)) GROUP BY table_name",
            [list(_TABLES)],
        ).fetchall()
    )
    statements = []
    for name, columns in _TABLES.items():
        want = [part.split()[0] for part in columns.strip("()").split(", ")]
        if have.get(name) != want:
            if name in have:
                statements.append(f"DROP TABLE {name}")
            statements.append(f"CREATE TABLE {name} {columns}")
    if statements:
        con.execute(";\n".join(statements))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _remove(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".wal")):
        try:
            p.unlink()
        except OSError:
            pass


def content_digest(parts: list[str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()
