"""GitHub Actions workflow commands: an annotation per finding on the PR's diff and the run.

    ::error file=src/solver.py,line=52,col=9,title=R104::host materialization … in solve: …

BLOCKS is `::error`, REFACTOR `::warning`, INFO `::notice` (the findings listed are those of
report/listing.py); the verdict closes the output as a `::notice`, an `::error` when it
reaches `--fail-on`.  Paths are relative to the repository root, as GitHub resolves them
against the checkout; a notebook finding points at the `.ipynb` JSON line that holds its
source line, with the cell and line in the message (report/places.py).  Values are escaped as
GitHub's toolkit does (`@actions/core`, command.ts): `%`, CR and LF in the message; those and
`:` and `,` in properties.
"""

from __future__ import annotations

from ..pipeline.assessment import Assessment, Finding
from .listing import FindingKeys, kind_counts, listed, message, reported
from .places import Places
from .wording import verdict_reason

COMMANDS = {"BLOCKS": "error", "REFACTOR": "warning", "INFO": "notice", "SCALES": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, properties: dict[str, object], text: str) -> str:
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{name} {props}::{escape_data(text)}" if props else f"::{name}::{escape_data(text)}"


def render_github(a: Assessment, new_keys: FindingKeys | None = None, verdict_fails: bool = False) -> str:
    places = Places(a)
    lines = [_annotation(f, places) for f in listed(a, new_keys)]
    summary = f"{a.verdict} — {verdict_reason(a)} Findings: {kind_counts(reported(a, new_keys))}."
    lines.append(command("error" if verdict_fails else "notice", {"title": "cpq verdict"}, summary))
    return "\n".join(lines) + "\n"


def _annotation(f: Finding, places: Places) -> str:
    place = places.place(f)
    props: dict[str, object] = {"file": place.repo_path, "line": place.line}
    if place.column is not None:
        props["col"] = place.column
    props["title"] = f.code
    where = f"{place.cell_label}: " if place.cell else ""
    return command(COMMANDS.get(f.kind, "notice"), props, where + message(f))
