"""The concise report: one line per finding, ruff-style, then a one-paragraph summary.

    src/solver.py:52:9: R104 host materialization inside a hot loop
    analysis.ipynb:cell 3:line 4: R101 Python loop over array elements

    SIGNIFICANT REFACTOR — Rule 5: 12 BLOCKS sites on hot paths (three or more). Findings:
    12 BLOCKS, 3 REFACTOR, 1 INFO, 40 SCALES in 18 files. Full report: `cpq assess src -o
    report.md` (or `--format md`).

Paths are PATH as typed joined with the file, so a terminal or editor opens them from where
cpq ran; the column is where the line's code starts (report/places.py).  A notebook finding
is placed as `cpq why` takes it, by cell and line.

`limit`: at most this many lines (cpq's default output on stdout, which must stay readable on
a tree as large as NumPy's, some 4,900 findings): the findings that weigh most — those that
count for the verdict, BLOCKS before REFACTOR before INFO — shown in file order, and a line
saying how many more there are and how to see them.
"""

from __future__ import annotations

import shlex
import textwrap

from ..pipeline.assessment import Assessment, Finding
from .listing import KIND_ORDER, LISTED_KINDS, FindingKeys, kind_counts, listed, reported
from .places import Places
from .wording import runtime_mark, verdict_reason

WIDTH = 100


def render_concise(a: Assessment, new_keys: FindingKeys | None = None, limit: int | None = None) -> str:
    places = Places(a)
    findings = listed(a, new_keys)
    shown = findings
    if limit is not None and len(findings) > limit:
        order = {id(f): i for i, f in enumerate(findings)}
        shown = sorted(sorted(findings, key=_weight)[:limit], key=lambda f: order[id(f)])
    out = [f"{places.place(f).terminal}: {f.code} {f.title}" + _mark(f) for f in shown]
    if len(shown) < len(findings):
        shown_ids = {id(f) for f in shown}
        rest = [f for f in findings if id(f) not in shown_ids]
        out.append(
            f"… and {len(rest):,} more ({kind_counts(rest, LISTED_KINDS)}): `--format concise` lists all."
        )
    if out:
        out.append("")
    out += textwrap.wrap(summary(a, new_keys), WIDTH, break_on_hyphens=False, break_long_words=False)
    return "\n".join(out) + "\n"


def _weight(f: Finding) -> tuple[bool, bool, int, str, int, str]:
    return (not f.counts, f.runtime != "measured-hot", KIND_ORDER.index(f.kind), f.file, f.line, f.code)


def _mark(f: Finding) -> str:
    mark = runtime_mark(f)
    return f" [{mark}]" if mark else ""


def summary(a: Assessment, new_keys: FindingKeys | None = None) -> str:
    """The verdict, its deciding reason, the findings by kind and where the full report is."""
    findings = reported(a, new_keys)
    files = f"{len(a.files):,} file{'s' if len(a.files) != 1 else ''}"
    parts = [f"{a.verdict} — {verdict_reason(a)}"]
    parts.append(f"Findings: {kind_counts(findings)} in {files}.")
    also = []
    suppressed = sum(1 for f in a.findings if f.suppressed)
    if suppressed:
        also.append(f"{suppressed:,} suppressed (not counted)")
    if new_keys is not None:
        known = sum(1 for f in a.findings if not f.suppressed) - len(findings)
        also.append(f"{known:,} already in the baseline (not listed, counted)")
    if a.skipped:
        also.append(f"{len(a.skipped):,} file{'s' if len(a.skipped) != 1 else ''} skipped")
    if a.partial:
        also.append(f"{len(a.partial):,} assessed in part")
    if also:
        parts.append("Also: " + "; ".join(also) + ".")
    path = shlex.quote(str(a.root))
    parts.append(f"Full report: `cpq assess {path} -o report.md` (or `--format md`).")
    return " ".join(parts)
