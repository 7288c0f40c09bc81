"""Render a manifest as Markdown, grouped like the upstream comparison table.

The output is readable by `upstream_md.parse_text`, so `cpq manifest diff` accepts it too.
"""

from __future__ import annotations

import textwrap

from .model import GLYPHS, LEVEL_WORDS, LEVELS, SECTIONS, Entry, Manifest

WIDTH = 110


def _md_name(api: str) -> str:
    # A trailing underscore (`numpy.ix_`) would open emphasis in some renderers.
    shown = api[:-1] + "\\_" if api.endswith("_") else api
    return shown + "()" if api.startswith("numpy.ndarray.") else shown


def _runs(glyph: str, entries: list[Entry]) -> list[str]:
    lines: list[str] = []
    plain = [e for e in entries if not e.note]
    if plain:
        text = ", ".join(_md_name(e.api) for e in plain)
        for chunk in textwrap.wrap(text, WIDTH - len(glyph) - 1, break_on_hyphens=False):
            lines.append(f"{glyph} {chunk.rstrip(',')}")
    for e in entries:
        if e.note:
            lines.append(f"{glyph} {_md_name(e.api)} — {e.note}")
    return lines


def render(manifest: Manifest) -> str:
    prov = manifest.provenance
    counts = manifest.counts()
    implemented = counts["multi"] + counts["single"] + counts["partial"]
    out = [
        "# cuPyNumeric API support (cpq manifest)",
        "",
        f"cuPyNumeric: {prov.get('cupynumeric_version', '?')}",
        f"NumPy: {prov.get('numpy_version', '?')}",
        f"Generated: {prov.get('date', '?')}",
        f"Method: {prov.get('method', '?')}",
        f"Source: {prov.get('source', '?')}",
        f"Counts: {len(manifest.entries)} total · {implemented} implemented · "
        f"{counts['multi']} multi-GPU · {counts['single']} single-GPU only · "
        f"{counts['partial']} partial · {counts['none']} not implemented",
        "",
        "Produced by `cpq manifest refresh`; do not edit by hand. Legend:",
        "",
    ]
    out += [f"- `{GLYPHS[level]}` {LEVEL_WORDS[level]}" for level in LEVELS]
    out += [
        "",
        "Each NumPy name is looked up under the same path in `cupynumeric`; its level is the "
        "docstring's Availability section (Multiple GPUs → ✓✓, Multiple GPUs (partial) → 🟡, "
        "Single GPU → ✓, CPU only → ✗). Not defined, or raising NotImplementedError → ✗; "
        "defined without an Availability statement, or NumPy's own object re-exported → 🟡. "
        "dtype names are not listed.",
        "",
        "Aliases (`numpy.abs` → `numpy.absolute`) are listed at the end; "
        "an alias that cuPyNumeric does not define has an entry of its own.",
    ]
    for key, title, _prefix in SECTIONS:
        entries = [e for e in manifest.sorted_entries() if e.section == key]
        if not entries:
            continue
        done = sum(1 for e in entries if e.level != "none")
        out += ["", f"## {title} ({done} of {len(entries)} implemented)", ""]
        for level in LEVELS:
            out += _runs(GLYPHS[level], [e for e in entries if e.level == level])
    if manifest.aliases:
        out += ["", "## Aliases", ""]
        out += [f"- {a} → {c}" for a, c in sorted(manifest.aliases.items())]
    return "\n".join(out) + "\n"
