"""`--fail-on-findings KIND`: gating a commit hook or a CI job on what a code change can fix.

`--fail-on VERDICT` weighs the gates too, and two of them rest on the run's context rather
than on the code: Gate 1 (the GPU model) and Gate 2 (the problem size, which a demo array such
as `np.zeros(300)` fixes when no `--elements` is given). No commit fixes those, so a hook gated
on the verdict fails a repository with nothing to change. Here only findings decide: exit 1
when a finding of KIND or worse counts for the verdict (on a hot path or possibly so), is not
suppressed (codes turned off by configuration are never findings), and, with `--baseline`, is
not in the baseline. The gates are still in the report; they never fail the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..pipeline.assessment import Finding

SHOWN = 5  # locations named in the one-line reason; the rest are counted


class FindingKind(StrEnum):
    BLOCKS = "BLOCKS"
    REFACTOR = "REFACTOR"


# KIND or worse: BLOCKS is the worst kind.
_AT_LEAST = {
    FindingKind.BLOCKS: frozenset({"BLOCKS"}),
    FindingKind.REFACTOR: frozenset({"BLOCKS", "REFACTOR"}),
}


def failing_findings(
    findings: Iterable[Finding], kind: FindingKind, new_keys: set[tuple[str, str, int]] | None = None
) -> list[Finding]:
    """The findings that fail the run under `--fail-on-findings kind` (`new_keys`: those a
    baseline does not know, when there is one)."""
    kinds = _AT_LEAST[kind]
    return [
        f
        for f in findings
        if f.kind in kinds
        and f.counts
        and not f.suppressed
        and (new_keys is None or (f.code, f.file, f.line) in new_keys)
    ]


def failure_reason(failing: list[Finding], kind: FindingKind) -> str:
    """One line on why the run fails: how many findings, and where the first ones are."""
    worse = "" if kind is FindingKind.BLOCKS else " or BLOCKS"
    counted = "finding counts" if len(failing) == 1 else "findings count"
    places = ", ".join(f"{f.location} {f.code}" for f in failing[:SHOWN])
    more = f" and {len(failing) - SHOWN} more" if len(failing) > SHOWN else ""
    return f"cpq: --fail-on-findings {kind}: {len(failing)} {kind}{worse} {counted}: {places}{more}"
