"""What the one-line-per-finding formats list (concise, github, gitlab, junit, --statistics),
and the words they share.

They list what SARIF lists — BLOCKS, REFACTOR and INFO findings — and leave SCALES findings
("keep as is") to the full report: on NumPy they are some 1,900 lines that ask nothing of
anyone.  Suppressed findings are not listed; with a baseline, neither are the findings it
already records (the verdict still weighs them all).
"""

from __future__ import annotations

from collections import Counter

from ..pipeline.assessment import Assessment, Finding
from ..rules.registry import recipe_text

LISTED_KINDS = ("BLOCKS", "REFACTOR", "INFO")
KIND_ORDER = ("BLOCKS", "REFACTOR", "INFO", "SCALES")

FindingKeys = set[tuple[str, str, int]]


def is_new(f: Finding, new_keys: FindingKeys | None) -> bool:
    """Not recorded in the baseline (every finding is new without one)."""
    return new_keys is None or (f.code, f.file, f.line) in new_keys


def reported(a: Assessment, new_keys: FindingKeys | None) -> list[Finding]:
    """The findings a report shows: not suppressed, not already in the baseline; every kind."""
    return [f for f in a.findings if not f.suppressed and is_new(f, new_keys)]


def listed(a: Assessment, new_keys: FindingKeys | None) -> list[Finding]:
    """The findings a line format lists, in file, line and code order (with a profile, those in
    measured-hot code first and those in code that never ran last: pipeline.assessment)."""
    return [f for f in reported(a, new_keys) if f.kind in LISTED_KINDS]


def kind_counts(findings: list[Finding], kinds: tuple[str, ...] = KIND_ORDER) -> str:
    """`3 BLOCKS, 1 REFACTOR, 0 INFO, 12 SCALES`: these kinds in the catalogue's order, then
    any other kind a --rules file gave its codes."""
    counts = Counter(f.kind for f in findings)
    others = sorted(set(counts) - set(KIND_ORDER))
    return ", ".join(f"{counts[k]:,} {k}" for k in (*kinds, *others))


def message(f: Finding) -> str:
    """The title, where it is and what to do: `host materialization … in solve: `x.item()`.
    Recipe R-item: …`."""
    text = f"{f.title} in {f.function}"
    if f.source_line:
        text += f": `{f.source_line}`"
    recipe = recipe_text(f.code, f.recipe) if f.recipe else ""
    if recipe and recipe != f.recipe:
        text += f". Recipe {f.recipe}: {recipe}."
    elif f.recipe:
        text += f". Recipe: {f.recipe}."
    return text
