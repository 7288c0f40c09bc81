"""`--statistics`: how many findings of each code, most frequent first, as `ruff --statistics`
counts its violations.

    1843  R106  BLOCKS    per-element loop over an array
      12  R201  REFACTOR  ...

Every kind is counted, SCALES included (they say what already scales); suppressed findings
and, with a baseline, the findings it records are not, as in the other formats.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..pipeline.assessment import Assessment
from .listing import FindingKeys, reported


def statistics_rows(a: Assessment, new_keys: FindingKeys | None = None) -> list[dict[str, Any]]:
    """One row per code found: code, kind, title, count; by count, then code."""
    findings = reported(a, new_keys)
    counts = Counter(f.code for f in findings)
    about = {f.code: (f.kind, f.title) for f in findings}
    order = sorted(counts, key=lambda code: (-counts[code], code))
    return [
        {"code": code, "kind": about[code][0], "title": about[code][1], "count": counts[code]}
        for code in order
    ]


def render_statistics(a: Assessment, new_keys: FindingKeys | None = None) -> str:
    rows = statistics_rows(a, new_keys)
    if not rows:
        return "No findings.\n"
    count_width = max(len(f"{r['count']:,}") for r in rows)
    code_width = max(len(r["code"]) for r in rows)
    kind_width = max(len(r["kind"]) for r in rows)
    lines = [
        f"{r['count']:>{count_width},}  {r['code']:<{code_width}}  {r['kind']:<{kind_width}}  {r['title']}"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def statistics_json(a: Assessment, new_keys: FindingKeys | None = None) -> str:
    from .json_report import dump_json

    return dump_json(statistics_rows(a, new_keys), depth=1)
