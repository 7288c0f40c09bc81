"""DuckDB connections that touch no file but their own database.

A database file cpq opens may come from a cache that somebody else wrote (a store committed
with a repository, a CI cache restored from another branch): whatever SQL objects it holds, a
connection opened here reads no other file, loads or installs no extension, and takes no
configuration change, so a view or macro hidden in such a file can neither read a file
elsewhere nor widen what the connection may do.  The only files it may open besides its own
are those in the directories it is given (the store's own folder, for ATTACH).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

# Set when the database starts: after that, extension loading is locked out with the rest.
_STARTUP = {
    "autoload_known_extensions": "false",
    "autoinstall_known_extensions": "false",
    "allow_community_extensions": "false",
    # A name in a query never stands for a Python variable of the caller's.
    "python_enable_replacements": "false",
    # Soufflé leaves x/0 undefined; NULL makes the rule not fire instead of aborting the run.
    "error_on_division_by_zero": "false",
}


@dataclass(frozen=True)
class Limits:
    """What a connection may use: memory before it spills, where it spills, the directories
    whose files it may open besides its own database (for ATTACH), DuckDB's threads, how much
    write-ahead log a database file gathers before DuckDB checkpoints it on its own, whether
    each commit waits for the file to reach stable storage (`synced`), and whether DuckDB
    compresses the tables it writes (`compressed`: not for data compressed already)."""

    memory_limit: str | None = None
    temp_directory: str | None = None
    directories: tuple[str, ...] = ()
    threads: int | None = None
    checkpoint_log: str | None = None
    synced: bool = True
    compressed: bool = True


NO_LIMITS = Limits()


def connect(
    path: str | Path | None,
    *,
    read_only: bool = False,
    block_size: int | None = None,
    limits: Limits = NO_LIMITS,
    checkpoint_on_close: bool = True,
) -> duckdb.DuckDBPyConnection:
    """A locked-down connection to the database file `path` (None: in memory).

    `block_size`: of a new database file, in bytes, where DuckDB lets it be chosen.  Without
    `checkpoint_on_close`, closing leaves the write-ahead log as it is (the caller checkpoints
    when it wants to: the configuration cannot change later)."""
    config: dict[str, str | bool | int | float | list[str]] = dict(_STARTUP)
    if limits.memory_limit is not None:
        config["memory_limit"] = limits.memory_limit
    if limits.temp_directory is not None:
        config["temp_directory"] = limits.temp_directory
    if limits.threads is not None:
        config["threads"] = limits.threads
    if limits.checkpoint_log is not None:
        config["checkpoint_threshold"] = limits.checkpoint_log
    if not limits.compressed:
        config["force_compression"] = "uncompressed"
    target = ":memory:" if path is None else str(path)
    con = None
    if block_size is not None and path is not None:
        try:
            con = duckdb.connect(
                target, read_only=read_only, config={**config, "default_block_size": str(block_size)}
            )
        except duckdb.InvalidInputException:  # a DuckDB without the option (before 1.2)
            con = None
    if con is None:
        con = duckdb.connect(target, read_only=read_only, config=config)
    try:
        (locked,) = con.execute("SELECT current_setting('lock_configuration')").fetchone() or (False,)
        if locked:  # another connection of this process to the same file set it all up
            return con
        # Session settings: the evaluation's cursors inherit them when they are made.
        con.execute("SET enable_progress_bar = false")
        if not limits.synced:
            _unsynced(con)
        if not checkpoint_on_close:
            con.execute("PRAGMA disable_checkpoint_on_shutdown")
        if limits.directories:
            listed = ", ".join("'" + _folder(d).replace("'", "''") + "'" for d in limits.directories)
            con.execute(f"SET allowed_directories = [{listed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def _unsynced(con: duckdb.DuckDBPyConnection) -> None:
    """Commits that do not wait for the disk (DuckDB's fsync_mode NONE, where it has one), for the
    caches' files: each is sealed over all its bytes and checked against its seal before any
    use, so a file an operating-system crash left torn is refused, not read.  A cold run on
    SciPy + Astropy commits 581 times, and waited 0.8 s on those syncs (an edit of one NumPy
    file, 24 times and 45 ms), more when other work shares the disk."""
    try:
        con.execute("SET fsync_mode = 'NONE'")
    except duckdb.Error:  # a DuckDB without the setting: it syncs, as it always did
        pass


def _folder(directory: str) -> str:
    return directory if directory.endswith("/") else directory + "/"


# Catalog entries of kinds cpq never creates: a database file holding one was not written by it.
_FOREIGN_OBJECTS = [
    ("view", "view_name", "duckdb_views()", "NOT internal"),
    ("macro", "function_name", "duckdb_functions()", "NOT internal AND function_type LIKE '%macro'"),
    ("sequence", "sequence_name", "duckdb_sequences()", "TRUE"),
    ("index", "index_name", "duckdb_indexes()", "TRUE"),
    ("type", "type_name", "duckdb_types()", "NOT internal"),
    ("schema", "schema_name", "duckdb_schemas()", "NOT internal AND schema_name <> 'main'"),
    ("constraint on", "table_name", "duckdb_constraints()", "constraint_type <> 'NOT NULL'"),
    ("default of", "table_name || '.' || column_name", "duckdb_columns()", "column_default IS NOT NULL"),
    ("table", "table_name", "duckdb_tables()", "NOT internal"),
]
# DuckDB 2 keeps triggers in the database file, and fires them on a write of this connection's
# (an update writes into a copy of saved results): one would change an answer unseen.
_TRIGGERS = ("trigger on", "table_name || '.' || trigger_name", "duckdb_triggers()", "TRUE")


def foreign_objects(con: duckdb.DuckDBPyConnection, tables: set[str]) -> list[str]:
    """What the connection's own database holds besides the `tables` cpq makes in it: other
    tables, views, macros, sequences, indexes, types, schemas, constraints, column defaults,
    triggers.
    Empty for a database cpq made."""

    def listing(sources: list[tuple[str, str, str, str]]) -> list[tuple[str, str]]:
        query = " UNION ALL ".join(
            f"SELECT '{kind}', {name} FROM {source} WHERE database_name = current_database() AND {where}"
            for kind, name, source, where in sources
        )
        return con.execute(query).fetchall()

    try:
        found = listing([*_FOREIGN_OBJECTS, _TRIGGERS])
    except duckdb.CatalogException:  # a DuckDB without triggers (before 2.0) has none to list
        found = listing(_FOREIGN_OBJECTS)
    return [f"{kind} {name}" for kind, name in found if not (kind == "table" and name in tables)]
