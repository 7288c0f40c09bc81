"""Bring the saved results of a tree up to date after a few of its files changed.

When the previous run of the same program, context and configuration left its results, and
few files differ from it, the new results start as a copy of that file: the facts of the
changed, added and removed files are replaced, and the engine maintains every derived relation
incrementally (engine/incremental.py) instead of evaluating the program again.

Unchanged files keep their node ids, so none of their facts changes.  A changed file keeps its
first id when its nodes still fit before the next file's ids (an edit near its end then changes
few facts); otherwise it takes new ids above every file's.  Each file's ids are followed by a
little room to grow (facts.store.id_span).  When the ids have spread too far, or too many files
changed, the run evaluates from scratch, numbering the files afresh.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .engine.compile_sql import quote
from .facts.schema import INPUT_RELATIONS
from .facts.store import id_span

if TYPE_CHECKING:
    from .engine import Database, Program
    from .reuse import FileLayout

# An update is tried when at most this many files (or this share of them) changed; beyond,
# evaluating from scratch is about as fast.
UPDATE_MAX_FILES = 16
UPDATE_MAX_SHARE = 0.05
# Nor when the changed files held more than this share of the nodes: an edit inside a large file
# moves the ids and lines of the rest of it, and maintaining all that derives from them costs
# about what evaluating from scratch costs (NumPy: 4.3 s against 5.1 s for a 5,700-line file).
UPDATE_MAX_NODE_SHARE = 0.01
# Beyond this many ids per node in use, the tree is numbered afresh (and evaluated from scratch).
MAX_ID_SPREAD = 4
# Relations loaded afresh by every run (not from the files' facts): their change is a diff.
RUN_RELATIONS = ("skipped_file", "suppressed", "disabled")


@dataclass
class UpdatePlan:
    previous: Path  # the results brought up to date
    layout: dict[str, FileLayout]  # their files' ids
    gone: list[str]  # files of `previous` whose facts go: changed or removed
    next_free: int  # the first id above every file's
    placed: dict[str, int] = field(default_factory=dict)

    def place(self, relpath: str, nodes: int) -> int:
        """The first id of a changed or added file's facts (see the module's docstring)."""
        earlier = self.layout.get(relpath)
        if earlier is not None and nodes <= self.room(earlier):
            base = earlier.base
        else:
            base = self.next_free
            self.next_free += id_span(nodes)
        self.placed[relpath] = base
        return base

    def room(self, earlier: FileLayout) -> int:
        """The ids a file may use from its first one: up to the next file's first id."""
        above = [other.base for other in self.layout.values() if other.base > earlier.base]
        return (min(above) if above else self.next_free) - earlier.base


def plan_update(
    path: Path | None, layout: dict[str, FileLayout] | None, unchanged: dict[str, FileLayout], files: int
) -> UpdatePlan | None:
    """An update of the results at `path` (with their `layout`) when it is worth it; `unchanged`
    holds the files whose facts stay, out of `files` files now."""
    if path is None or not layout:
        return None
    gone = [relpath for relpath in layout if relpath not in unchanged]
    changed = files - len(unchanged)
    if max(changed, len(gone)) > max(UPDATE_MAX_FILES, UPDATE_MAX_SHARE * files):
        return None
    next_free = max((e.base + id_span(e.nodes) for e in layout.values()), default=0)
    in_use = sum(e.nodes for e in layout.values())
    if next_free > MAX_ID_SPREAD * in_use + (1 << 20):
        return None
    if sum(layout[f].nodes for f in gone) > max(UPDATE_MAX_NODE_SHARE * in_use, 20_000):
        return None
    return UpdatePlan(path, layout, gone, next_free)


def open_copy(program: Program, plan: UpdatePlan, target: Path) -> Database:
    """The previous results copied to `target`, opened for the update."""
    from .engine import Database

    shutil.copyfile(plan.previous, target)
    db = Database.open(program, target, read_only=False)
    try:
        db.begin_update(plan.previous)
    except BaseException:
        db.close()
        raise
    return db


def input_changes(
    db: Database, plan: UpdatePlan, staged: set[str]
) -> dict[str, tuple[str | None, str | None]]:
    """Per input relation, the SELECTs of the facts it loses (those of the files gone, read in
    the previous results) and of those it gains (staged by this run)."""
    from .engine.incremental import OLD_DB, change_table, value_columns

    ranges = [(plan.layout[f].base, plan.layout[f].base + plan.layout[f].nodes) for f in plan.gone]
    ranges = [(lo, hi) for lo, hi in ranges if hi > lo]
    files = ", ".join("'" + f.replace("'", "''") + "'" for f in plan.gone)
    changes: dict[str, tuple[str | None, str | None]] = {}
    for name in set(INPUT_RELATIONS) | set(RUN_RELATIONS):
        rel = db.program.relations[name]
        old = f'SELECT {value_columns(rel)} FROM {OLD_DB}.{quote(name)} WHERE "_iter" = 0'
        columns = INPUT_RELATIONS.get(name)
        if name in RUN_RELATIONS:
            lost: str | None = old
        elif columns is not None and columns[0].is_node:
            key = quote(columns[0].name)
            lost = (
                old + " AND (" + " OR ".join(f"({key} >= {lo} AND {key} < {hi})" for lo, hi in ranges) + ")"
                if ranges
                else None
            )
        else:  # keyed by its file
            lost = f"{old} AND {quote(rel.column_names[0])} IN ({files})" if plan.gone else None
        gained = (
            f"SELECT {value_columns(rel)} FROM {change_table('new', name)}" if name in staged else None
        )
        if lost is not None or gained is not None:
            changes[name] = (lost, gained)
    return changes


def stage_rows(db: Database, relation: str, rows: list[tuple]) -> bool:
    """Stage a relation's whole new content (the run's own facts); whether any row was."""
    unique = sorted(set(rows))
    if not unique:
        return False
    db.load_disjoint({relation: [list(column) for column in zip(*unique, strict=True)]}, staged=True)
    return True

