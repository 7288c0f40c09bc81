"""Read a support level out of a cuPyNumeric docstring.

cuPyNumeric states support in a numpydoc section::

    Availability
    --------
    Multiple GPUs, Multiple CPUs

with the variants "Multiple GPUs (partial)", "Single GPU, Single CPU", "Single CPU", ...
The details of a partial (or limited) support sit in prose, usually in "Notes"
("Multi-GPU usage is limited to data parallel axis-wise batching.").
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
# Sentences about how far it scales; a bare "GPU acceleration" remark is no limitation.
_SCALING = re.compile(r"multi-?GPU|multiple GPUs|single GPU", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`])")
NOTE_LIMIT = 240


@dataclass(frozen=True)
class Support:
    level: str
    note: str
    statement: str  # the Availability text as written, "" when there is none


def sections(doc: str) -> dict[str, str]:
    """numpydoc sections by lower-cased title; text before the first heading is under ""."""
    lines = textwrap.dedent(doc.expandtabs()).splitlines()
    # The summary line of a docstring is often not indented while the rest is.
    if lines and lines[0].strip() and len(lines) > 1:
        lines = [lines[0].strip()] + textwrap.dedent("\n".join(lines[1:])).splitlines()
    out: dict[str, list[str]] = {"": []}
    current = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and _UNDERLINE.match(lines[i + 1]):
            current = line.strip().lower()
            out.setdefault(current, [])
            i += 2
            continue
        out[current].append(line)
        i += 1
    return {title: "\n".join(body).strip() for title, body in out.items()}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def scaling_remarks(doc: str) -> str:
    """The sentences of "Notes" (or of the whole text) that say how far it scales."""
    parts = sections(doc)
    prose = parts.get("notes") or ""
    found = [s for s in _SENTENCE_END.split(_one_line(prose)) if _SCALING.search(s)]
    text = " ".join(found)
    if len(text) > NOTE_LIMIT:
        text = text[: NOTE_LIMIT - 1].rstrip() + "…"
    return text


def availability_statement(doc: str) -> str | None:
    text = sections(doc).get("availability")
    return _one_line(text) if text is not None else None


def parse(doc: str | None) -> Support | None:
    """The support stated by a docstring, or None when it has no Availability section.

    Rules, first match wins: "Multiple GPUs (partial)" → partial; "Multiple GPUs" → multi;
    "Single GPU" → single; an Availability that names no GPU ("Single CPU") → none, since
    such a function runs on the host only, off the distributed GPU path.
    """
    if not doc:
        return None
    statement = availability_statement(doc)
    if statement is None:
        return None
    remarks = scaling_remarks(doc)
    if "Multiple GPUs (partial)" in statement:
        detail = remarks or "the docstring gives no detail"
        return Support("partial", f"multi-GPU partial: {detail}", statement)
    if "Multiple GPUs" in statement:
        return Support("multi", remarks, statement)
    if "Single GPU" in statement:
        return Support("single", remarks, statement)
    return Support("none", f"host only, no GPU support (Availability: {statement})", statement)
