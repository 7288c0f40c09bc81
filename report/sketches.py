"""Before/after sketches for each recipe, built from the user's own line.

The rewrite is a sketch for a reader, not an automatic fix: it shows the shape of the change
on the line cpq cited.  How each code rewrites a line is said in its folder
(rules/codes/RXXX/code.toml, see rules.registry).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..rules.registry import rewrite_line


@dataclass
class Sketch:
    before: str
    after: str


def sketch(code: str, line: str) -> Sketch:
    """A before/after for one finding's source line."""
    before = line.strip()
    return Sketch(before, rewrite_line(code, before))
