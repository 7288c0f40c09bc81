"""Edits of a file's text: a span of characters replaced, and applying several at once.

Offsets count characters of the text as assessed (line endings read as "\\n").  No edit adds or
removes a line break, so every line keeps its number: the findings before and after a fix are
compared line by line, and the suppression comments and configuration of the run still apply.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Edit:
    start: int
    end: int  # exclusive; equal to start for an insertion
    text: str

    def __post_init__(self) -> None:
        if "\n" in self.text or self.start > self.end:
            raise ValueError(f"an edit may not break lines: {self}")


def overlaps(a: Edit, b: Edit) -> bool:
    """Whether two edits touch the same text (two insertions at one place count: their order
    would be a guess)."""
    if a.start == a.end == b.start == b.end:
        return True
    return a.start < b.end and b.start < a.end


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """`text` with the edits made; they must not overlap, nor remove a line break."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    parts: list[str] = []
    at = 0
    for edit in ordered:
        if edit.start < at:
            raise ValueError(f"overlapping edits at offset {edit.start}")
        if "\n" in text[edit.start : edit.end]:
            raise ValueError(f"an edit may not join lines: {edit}")
        parts.append(text[at : edit.start])
        parts.append(edit.text)
        at = edit.end
    parts.append(text[at:])
    return "".join(parts)


def line_of(text: str, offset: int) -> int:
    """The line (from 1) that `offset` is on."""
    return text.count("\n", 0, offset) + 1
