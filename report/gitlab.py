"""GitLab Code Quality: the JSON report a merge request shows in its diff and widget.

A list of issues with the fields GitLab documents (`description`, `check_name`, `fingerprint`,
`severity`, `location.path`, `location.lines.begin`), one per finding listed
(report/listing.py).  Severity by kind: BLOCKS `critical`, REFACTOR `major`, INFO `info`.
Paths are relative to the repository root; a notebook finding points at the `.ipynb` JSON line
that holds its source line, with the cell and line in the description (report/places.py).

The fingerprint is what GitLab compares between the merge request and its target branch: a
hash of the code, the file and the line's text (comment dropped, blanks collapsed), with the
occurrence number among identical lines, so a finding moved by an edit above it stays the same
issue, and a new one is new.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from ..pipeline.assessment import Assessment
from .baseline import normalise_line
from .listing import FindingKeys, listed, message
from .places import Places

SEVERITIES = {"BLOCKS": "critical", "REFACTOR": "major", "INFO": "info", "SCALES": "info"}


def gitlab_issues(a: Assessment, new_keys: FindingKeys | None = None) -> list[dict[str, Any]]:
    places = Places(a)
    seen: Counter[str] = Counter()
    issues = []
    for f in listed(a, new_keys):
        place = places.place(f)
        key = "\0".join((f.code, place.repo_path, normalise_line(f.source_line)))
        seen[key] += 1
        digest = hashlib.sha256(f"{key}\0{seen[key]}".encode()).hexdigest()[:32]
        where = f"{place.cell_label}: " if place.cell else ""
        issues.append(
            {
                "description": f"{where}{f.code} {message(f)}",
                "check_name": f.code,
                "fingerprint": digest,
                "severity": SEVERITIES.get(f.kind, "info"),
                "location": {"path": place.repo_path, "lines": {"begin": place.line}},
            }
        )
    return issues


def render_gitlab(a: Assessment, new_keys: FindingKeys | None = None) -> str:
    from .json_report import dump_json

    return dump_json(gitlab_issues(a, new_keys), depth=1)
