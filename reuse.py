"""Take the input facts of unchanged files from an earlier evaluation of the same tree.

After an edit, most files are unchanged and their facts already sit, loaded, in the saved
results of the previous run. Copying them table to table inside DuckDB is much cheaper than
reading them back from the fact store and loading them again. Node ids are numbered file
after file in discovery order, so a file's ids move by the change in node count of the files
before it: the copy adds that shift, and the ids come out exactly as a fresh run makes them.

Each saved results file carries its layout (LAYOUT_TABLE): per file, its store key, the first
node id and the number of ids, and the hash of its facts.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .engine import Database
from .engine.compile_sql import quote
from .engine.list_params import unnest_select
from .facts.schema import INPUT_RELATIONS, NO_NODE

LAYOUT_TABLE = "cpq_file_layout"
# Facts the extractor writes per file (skipped_file is written afresh by every run).
COPIED_RELATIONS = [name for name in INPUT_RELATIONS if name != "skipped_file"]


@dataclass(frozen=True, slots=True)
class FileLayout:
    key: str  # the store's key: content hash and extraction depth
    base: int  # first node id
    nodes: int  # node ids used
    facts_sha: bytes


def write_layout(db: Database, layout: dict[str, FileLayout]) -> None:
    files = list(layout)
    rows = unnest_select(
        [
            ("file", "VARCHAR"),
            ("key", "VARCHAR"),
            ("base", "BIGINT"),
            ("nodes", "BIGINT"),
            ("facts_sha", "BLOB"),
        ]
    )
    db.con.execute(
        f"CREATE OR REPLACE TABLE {LAYOUT_TABLE} AS {rows}",
        [
            files,
            [layout[f].key for f in files],
            [layout[f].base for f in files],
            [layout[f].nodes for f in files],
            [layout[f].facts_sha for f in files],
        ],
    )


def read_layout(path: Path) -> dict[str, FileLayout] | None:
    """The layout saved with a results file; None when it cannot be read."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:  # open elsewhere in this process with other settings, damaged, gone
        return None
    try:
        rows = con.execute(f"SELECT file, key, base, nodes, facts_sha FROM {LAYOUT_TABLE}").fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()
    return {file: FileLayout(key, base, nodes, bytes(sha)) for file, key, base, nodes, sha in rows}


# A copy is one CASE over id ranges; beyond this many ranges (edits scattered over many
# files), the caller loads the facts from the store instead.
MAX_SEGMENTS = 64


class TooScattered(Exception):
    """The unchanged files form too many id ranges for one copy statement."""


def segments(
    moves: dict[str, tuple[FileLayout, int]], layout: dict[str, FileLayout] | None = None
) -> list[tuple[int, int, int]]:
    """Old id ranges [lo, hi) of the moved files, runs of neighbours merged, each with the
    shift of its ids.  With the whole old `layout`, a file's range reaches the next file's
    first id (the room to grow between them holds no fact), so that neighbours merge."""
    starts = sorted(e.base for e in layout.values() if e.nodes) if layout else []

    def end(old: FileLayout) -> int:
        later = bisect.bisect_right(starts, old.base)
        return starts[later] if later < len(starts) else old.base + old.nodes

    ranges = sorted(
        (old.base, end(old) if old.nodes else old.base, new - old.base) for old, new in moves.values()
    )
    merged: list[tuple[int, int, int]] = []
    for lo, hi, delta in ranges:
        if hi == lo:
            continue  # a file without nodes has no node-keyed facts
        if merged and merged[-1][1] == lo and merged[-1][2] == delta:
            merged[-1] = (merged[-1][0], hi, delta)
        else:
            merged.append((lo, hi, delta))
    return merged


def copy_facts(
    db: Database,
    path: Path,
    moves: dict[str, tuple[FileLayout, int]],
    layout: dict[str, FileLayout] | None = None,
) -> int:
    """Copy the input facts of the files in `moves` (file -> (old layout, new first id)) from
    the results file `path` (whose files are laid out as `layout`) into `db`; returns how many
    tuples were copied."""
    if not moves:
        return 0
    runs = segments(moves, layout)
    if len(runs) > MAX_SEGMENTS:
        raise TooScattered(len(runs))
    target = str(path).replace("'", "''")
    db.con.execute(f"ATTACH '{target}' AS cpq_previous (READ_ONLY)")
    db.con.execute(
        "CREATE OR REPLACE TEMP TABLE cpq_moved_files AS SELECT CAST(unnest(?) AS VARCHAR) AS file",
        [list(moves)],
    )
    copied = 0
    try:
        db.con.execute("BEGIN TRANSACTION")  # all or nothing: the caller may load them instead
        try:
            for name in COPIED_RELATIONS:
                copied += _copy_relation(db, name, runs)
            db.con.execute("COMMIT")
        except BaseException:
            db.con.execute("ROLLBACK")
            raise
    finally:
        db.con.execute("DROP TABLE IF EXISTS temp.cpq_moved_files")
        db.con.execute("DETACH cpq_previous")
    return copied


def _copy_relation(db: Database, name: str, runs: list[tuple[int, int, int]]) -> int:
    columns = INPUT_RELATIONS[name]
    first = columns[0]

    def moved(ref: str) -> str:
        cases = " ".join(f"WHEN {ref} < {hi} THEN {ref} + {delta}" for _, hi, delta in runs)
        return f"CASE WHEN {ref} = {NO_NODE} THEN {NO_NODE} {cases} END"

    picked = [
        moved(f"r.{quote(col.name)}") if col.is_node else f"r.{quote(col.name)}" for col in columns
    ]
    key = f"r.{quote(first.name)}"
    if first.is_node:
        if not runs:
            return 0
        where = " OR ".join(f"({key} >= {lo} AND {key} < {hi})" for lo, hi, _ in runs)
    else:  # keyed by its file (source_file, import_module, ...)
        where = f"{key} IN (SELECT file FROM cpq_moved_files)"
    names = ", ".join([quote(col.name) for col in columns] + ['"_iter"', '"_rule"'])
    sql = (
        f"INSERT INTO {quote(name)} ({names}) SELECT {', '.join(picked)}, 0, NULL "
        f'FROM cpq_previous.{quote(name)} r WHERE r."_iter" = 0 AND ({where})'
    )
    rows = db.con.execute(sql).fetchall()
    return int(rows[0][0]) if rows else 0
