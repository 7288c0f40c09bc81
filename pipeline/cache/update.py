"""Which facts change when saved results are brought up to date after a few files changed.

A file's node ids depend on its path alone (facts.node_ids), so an unchanged file's facts are
the same in the saved results as in a fresh run: the inputs change by the facts of the files
changed, added and removed only, and the engine maintains every derived relation from that
(engine/incremental.py).  A file's facts are replaced whole; the engine compares old and new,
so an edit that moves nothing (a comment appended) changes a line count and little more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...engine.compile_sql import quote
from ...facts.schema import INPUT_RELATIONS

if TYPE_CHECKING:
    from ...engine import Database
    from ...facts import SourceText
    from ..run import FileLayout, Inputs

# An update is tried when at most this many files (or this share of them) changed; beyond,
# evaluating from scratch is about as fast.
UPDATE_MAX_FILES = 16
UPDATE_MAX_SHARE = 0.05
# Nor when the input facts changed (net) by more than this share of them, or this many: an edit
# at the top of a large file moves the ids and lines of the rest of it, and maintaining all
# that derives from them costs what evaluating from scratch costs.
UPDATE_MAX_CHANGED_SHARE = 0.01
UPDATE_MIN_CHANGED = 20_000
# Relations loaded afresh by every run (not from the files' facts): their change is a diff.
RUN_RELATIONS = ("skipped_file", "suppressed", "disabled")


@dataclass
class UpdatePlan:
    unchanged: dict[str, FileLayout]  # files whose facts stay, as laid out in the saved results
    changed: list[SourceText]  # files to extract: changed or added
    gone: dict[str, FileLayout]  # what the saved results hold of the files changed or removed


def plan_update(saved: dict[str, FileLayout], inputs: Inputs) -> UpdatePlan | None:
    """The update of saved results laid out as `saved` to the files of `inputs`, when few
    enough files changed."""
    unchanged = {}
    for source in inputs.texts:
        entry = saved.get(source.relpath)
        if (
            entry is not None
            and entry.made_from(source, source.relpath in inputs.deep)
            and entry.base == inputs.bases[source.relpath]
        ):
            unchanged[source.relpath] = entry
    changed = [source for source in inputs.texts if source.relpath not in unchanged]
    gone = {relpath: entry for relpath, entry in saved.items() if relpath not in unchanged}
    if max(len(changed), len(gone)) > max(UPDATE_MAX_FILES, UPDATE_MAX_SHARE * len(inputs.texts)):
        return None
    return UpdatePlan(unchanged, changed, gone)


def max_changed(facts: int) -> int:
    return max(UPDATE_MIN_CHANGED, int(UPDATE_MAX_CHANGED_SHARE * facts))


def input_changes(db: Database, plan: UpdatePlan) -> dict[str, tuple[str | None, str | None]]:
    """Per input relation, the SELECTs of the facts it loses (those of the files gone, read in
    the previous results) and of those it gains (staged by this run)."""
    from ...engine.change_tables import OLD_DB, change_table, value_columns

    ranges = [(e.base, e.base + e.nodes) for e in plan.gone.values() if e.nodes]
    files = ", ".join("'" + f.replace("'", "''") + "'" for f in plan.gone)
    changes: dict[str, tuple[str | None, str | None]] = {}
    for name in set(INPUT_RELATIONS) | set(RUN_RELATIONS):
        rel = db.program.relations[name]
        old = f'SELECT {value_columns(rel)} FROM {OLD_DB}.{quote(name)} WHERE "_iter" = 0'
        columns = INPUT_RELATIONS.get(name)
        lost: str | None
        if name in RUN_RELATIONS:
            lost = old
        elif columns is not None and columns[0].is_node:
            key = quote(columns[0].name)
            within = " OR ".join(f"({key} >= {lo} AND {key} < {hi})" for lo, hi in ranges)
            lost = f"{old} AND ({within})" if ranges else None
        else:  # keyed by its file
            lost = f"{old} AND {quote(rel.column_names[0])} IN ({files})" if plan.gone else None
        staged = name in db.staged
        gained = f"SELECT {value_columns(rel)} FROM {change_table('new', name)}" if staged else None
        if lost is not None or gained is not None:
            changes[name] = (lost, gained)
    return changes


def stage_rows(db: Database, relation: str, rows: list[tuple]) -> None:
    """Stage a relation's whole new content (the run's own facts)."""
    unique = sorted(set(rows))
    if unique:
        db.load_disjoint({relation: [list(column) for column in zip(*unique, strict=True)]}, staged=True)
