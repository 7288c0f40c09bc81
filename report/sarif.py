"""The SARIF 2.1.0 report, for GitHub code scanning and editors.

One rule per R-code (SCALES codes included, at level `none`, so a viewer can
explain every code), one result per BLOCKS/REFACTOR/INFO finding (report.md):
SCALES findings are "keep as is" and would only be noise in an alert list.
The verdict, its reason, the pattern and the gates go in the run's
`properties`, since SARIF has no place for a whole-codebase judgement.

Locations are relative to the repository root — the nearest folder above PATH
with `.git` — under the `%SRCROOT%` base id, so GitHub code scanning places them
in the checkout whatever folder was assessed (`cpq assess src/`); relative to
PATH when there is no repository (report/places.py).

Notebook findings point at the `.ipynb` file: `startLine` is the line of the
notebook's JSON that holds the finding's source line (each source line is a
string of its own there, as Jupyter writes notebooks; report/notebook_lines.py),
so a viewer of the raw file lands on it; the cell and the line in the cell,
what a reader of the rendered notebook looks for, lead the message and are in
`properties.cell` / `properties.cellLine`.  Such a region has no columns and no
snippet: the JSON line is quoted and escaped, not the source text.

Each rule's `helpUri` is its catalogue entry, `rules/codes/RXXX/doc.md` of the
cpq that wrote the log, as a `file:` URI (an absolute URI, as SARIF requires;
the repository has no published home to link instead); `help.markdown` holds
the same text for viewers that show it in place.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from .. import __version__
from ..pipeline.assessment import Assessment, Finding
from ..rules.catalogue import catalogue_rows
from ..rules.registry import code_doc, recipe_text, registry
from .baseline import Baseline, fingerprint
from .places import Places
from .wording import fill_gate_reasons, verdict_reason

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://docs.nvidia.com/cupynumeric/latest/"
FINGERPRINT_KEY = "cpqFinding/v1"
SRCROOT = "%SRCROOT%"

LEVELS = {"BLOCKS": "error", "REFACTOR": "warning", "INFO": "note", "SCALES": "none"}
EMITTED_KINDS = ("BLOCKS", "REFACTOR", "INFO")

FindingKey = tuple[str, str, int]


class CellLocator(Protocol):
    """What SARIF needs of a notebook (`cpq.facts.notebook.NotebookSource` has it)."""

    def location(self, line: int) -> tuple[int, int]: ...


def rule_name(title: str) -> str:
    """CamelCase of a title: `host materialization in a hot loop` -> `HostMaterializationInAHotLoop`."""
    return "".join(w[:1].upper() + w[1:] for w in re.split(r"[^0-9A-Za-z]+", title) if w)


def sarif_rules(codes: list[tuple[str, str, str, str]] | None = None) -> list[dict[str, Any]]:
    """One reportingDescriptor per code, sorted by code: `codes` (code, kind, title, recipe) as
    the code_info facts of the rules evaluated say, by default the shipped catalogue's.  A code
    of a user's --rules file has no folder of prose: its title and recipe are what it says."""
    rules = []
    for code, kind, title, recipe in sorted(codes if codes is not None else catalogue_rows()):
        doc = code_doc(code, title)
        recipe_line = recipe_text(code, recipe)
        text = f"{code} {title} ({kind})."
        markdown = f"**{code} {title}** ({kind})"
        if doc != title:  # a code without prose of its own is said by its title alone
            text += f" {doc}"
            markdown += f"\n\n{doc}"
        if recipe and recipe_line != recipe:
            text += f"\n\nRecipe {recipe}: {recipe_line}."
            markdown += f"\n\n**Recipe `{recipe}`**: {recipe_line}."
        elif recipe:  # a recipe without a separate text: the recipe says what to do
            text += f"\n\nRecipe: {recipe}."
            markdown += f"\n\n**Recipe**: {recipe}."
        entry = registry().get(code)
        if entry is not None:
            markdown += f"\n\n`cpq rules {code}` shows the Datalog rules behind it."
        else:
            markdown += f"\n\n`cpq rules {code} --rules FILE` shows the Datalog rules behind it."
        # A code of a user's --rules file has no catalogue entry to point at.
        help_uri = {"helpUri": (entry.folder / "doc.md").resolve().as_uri()} if entry is not None else {}
        rules.append(
            {
                "id": code,
                "name": rule_name(title),
                "shortDescription": {"text": title},
                "fullDescription": {"text": doc},
                "help": {"text": text, "markdown": markdown},
                **help_uri,
                "defaultConfiguration": {"level": LEVELS.get(kind, "note")},
                "properties": {"kind": kind, "recipe": recipe, "tags": ["cupynumeric", kind.lower()]},
            }
        )
    return rules


def sarif_report(
    a: Assessment,
    *,
    justifications: Mapping[FindingKey, str] | None = None,
    baseline: Baseline | None = None,
    notebooks: Mapping[str, CellLocator] | None = None,
) -> dict[str, Any]:
    """The SARIF 2.1.0 log of an assessment.

    justifications: the reason of each suppressed finding, keyed (code, file, line).
    baseline: when given, each result carries `baselineState` new/unchanged.
    notebooks: for `.ipynb` files, how module lines map back to cells.
    """
    fill_gate_reasons(a)
    rules = sarif_rules(a.codes or None)
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    emitted = [f for f in a.findings if f.kind in EMITTED_KINDS]
    new_ids = {id(f) for f in baseline.new_findings(emitted)} if baseline is not None else None
    seen: Counter[str] = Counter()
    places = Places(a)
    results = []
    for f in emitted:
        result = _result(f, index, a, seen, notebooks if notebooks is not None else a.notebooks, places)
        if f.suppressed:
            suppression: dict[str, Any] = {"kind": "inSource"}
            reason = (justifications or {}).get((f.code, f.file, f.line), "")
            if reason:
                suppression["justification"] = reason
            result["suppressions"] = [suppression]
        if new_ids is not None:
            result["baselineState"] = "new" if id(f) in new_ids else "unchanged"
        results.append(result)
    d = a.decision
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "cpq",
                "fullName": "cpq (cuPyNumeric query)",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": rules,
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": _folder_uri(places.base)}},
        "invocations": [_invocation(a, places)],
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": {
            "verdict": d.verdict,
            "verdict_reason": verdict_reason(a),
            "verdict_rule": d.verdict_rule,
            "pattern": d.pattern,
            "gates": [
                {"gate": g.number, "name": g.name, "status": g.status, "reason": g.reason} for g in d.gates
            ],
            "files_assessed": len(a.files),
            "suppressed": sum(1 for f in a.findings if f.suppressed),
        },
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _folder_uri(folder: Path) -> str:
    uri = folder.as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _result(
    f: Finding,
    index: Mapping[str, int],
    a: Assessment,
    seen: Counter[str],
    notebooks: Mapping[str, CellLocator],
    places: Places,
) -> dict[str, Any]:
    where, props = "", {}
    region: dict[str, Any] = {"startLine": f.line}
    nb = notebooks.get(f.file)
    cell = _cell(nb, f.line) if nb is not None else None
    if cell is not None:
        where = f"cell {cell[0]}:line {cell[1]}: "
        props = {"cell": cell[0], "cellLine": cell[1]}
        json_lines = places.notebook_lines(f.file)
        found = json_lines.json_line(*cell) if json_lines is not None else None
        # Unknown (the notebook changed or went since it was read): its first line.
        region = {"startLine": found or 1}
    else:
        raw = _raw_line(a, f.file, f.line)
        if raw.strip():
            indent = len(raw) - len(raw.lstrip())
            region["startColumn"] = indent + 1
            region["endColumn"] = len(raw.rstrip()) + 1
            region["snippet"] = {"text": raw.rstrip()}
    message = f"{where}{f.code} {f.title} in {f.function}"
    if f.source_line:
        message += f": `{f.source_line}`"
    if f.recipe and recipe_text(f.code, f.recipe) != f.recipe:
        message += f". Recipe {f.recipe}: {recipe_text(f.code, f.recipe)}."
    elif f.recipe:
        message += f". Recipe: {f.recipe}."
    # Identical lines in one function share a hash; the occurrence number keeps them apart.
    digest = fingerprint(f.code, f.function, f.source_line)
    seen[digest] += 1
    return {
        "ruleId": f.code,
        "ruleIndex": index[f.code],
        "level": LEVELS.get(f.kind, "note"),
        "message": {"text": message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": _artifact(places.repo_path(f.file)),
                    "region": region,
                },
                "logicalLocations": [_logical(f.function)],
            }
        ],
        "partialFingerprints": {FINGERPRINT_KEY: f"{digest}:{seen[digest]}"},
        "properties": {
            "kind": f.kind,
            "function": f.function,
            "hot": f.hot,
            "countsForVerdict": f.counts,
            **({"runtime": f.runtime} if f.runtime else {}),
            **({"runtimeShare": round(f.share / 1000, 3)} if f.share is not None else {}),
            **({"doctor": f.doctor, "doctorChecks": list(f.doctor_checks)} if f.doctor else {}),
            **props,
        },
    }


def _cell(nb: CellLocator, line: int) -> tuple[int, int] | None:
    try:
        cell = nb.location(line)
    except ValueError:
        return None
    return cell if cell[0] else None


def _raw_line(a: Assessment, file: str, line: int) -> str:
    return a.raw_line(file, line)


def _artifact(relpath: str) -> dict[str, str]:
    # A relative URI reference: percent-encode what a URI cannot hold, keep the slashes.
    uri = quote(relpath.replace("\\", "/"), safe="/-._~")
    return {"uri": uri, "uriBaseId": SRCROOT}


def _logical(function: str) -> dict[str, Any]:
    if function == "<module>":
        return {"name": function, "kind": "module"}
    name = function.rsplit(".", 1)[-1]
    return {"name": name, "fullyQualifiedName": function, "kind": "member" if "." in function else "function"}


def _invocation(a: Assessment, places: Places) -> dict[str, Any]:
    notes = [
        {
            "level": "warning",
            "message": {"text": f"skipped {s.relpath}: {s.reason}"},
            "locations": [{"physicalLocation": {"artifactLocation": _artifact(places.repo_path(s.relpath))}}],
        }
        for s in a.skipped
    ]
    out: dict[str, Any] = {"executionSuccessful": True}
    if notes:
        out["toolExecutionNotifications"] = notes
    return out
