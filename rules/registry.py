"""The R-code registry: one folder per code under rules/codes/, holding all that is said of it.

A code's folder holds its rules (`rules.dl`: the `code_info` fact with kind, title and recipe,
the rules that derive its sites and the helper relations only it uses; rules.dl includes every
folder's with `#include "rules/codes/*/rules.dl"`, after rules/codes.dl, which declares
`code_info` and `site`), what the reports add to them (`code.toml`: the step of
its fix in the next steps, its recipe's text, the before/after sketch of a finding's line),
its documentation (`doc.md`, the prose SARIF viewers show) and its fixture (`fixture.py`,
code that must and must not produce it, with `fixture_*.py` beside it for a scenario of several
modules; tests/test_rules.py collects them).  Adding a code means adding a folder: nothing
else lists the codes.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CODES_DIR = Path(__file__).parent / "codes"
_CODE_NAME = re.compile(r"R\d{3}")


@dataclass(frozen=True)
class Rewrite:
    """How a finding's source line is rewritten into the shape of its fix: substitutions
    (`steps`) applied in order, then the `after` template ({line}: the line so far; {1}, {2},
    ...: the groups of `match`, anchored at the start, or `search`, anywhere).  When that
    pattern does not match, the `fallback` template is used instead."""

    steps: tuple[tuple[re.Pattern[str], str], ...] = ()
    pattern: re.Pattern[str] | None = None
    anchored: bool = False
    after: str = "{line}"
    fallback: str = "{line}"

    def rewrite(self, line: str) -> str:
        for find, replace in self.steps:
            line = find.sub(replace, line)
        if self.pattern is None:
            return self.after.format(line=line)
        found = self.pattern.match(line) if self.anchored else self.pattern.search(line)
        if found is None:
            return self.fallback.format(line=line)
        return self.after.format(found.group(0), *found.groups(), line=line)


@dataclass(frozen=True)
class CodeEntry:
    """What a code's folder says beside its rules."""

    code: str
    folder: Path
    doc: str
    recipe_text: str = ""
    step: int | None = None
    rewrite: Rewrite | None = None


@cache
def registry() -> dict[str, CodeEntry]:
    """Every code with a folder under rules/codes/, by code."""
    entries = {}
    for folder in sorted(CODES_DIR.iterdir()):
        if folder.is_dir() and _CODE_NAME.fullmatch(folder.name):
            entries[folder.name] = _read_entry(folder)
    return entries


def _read_entry(folder: Path) -> CodeEntry:
    meta_path = folder / "code.toml"
    meta = tomllib.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    doc_path = folder / "doc.md"
    doc = " ".join(doc_path.read_text(encoding="utf-8").split()) if doc_path.exists() else ""
    step = meta.get("step")
    return CodeEntry(
        code=folder.name,
        folder=folder,
        doc=doc,
        recipe_text=str(meta.get("recipe_text", "")),
        step=int(step) if step is not None else None,
        rewrite=_read_rewrite(meta["sketch"]) if "sketch" in meta else None,
    )


def _read_rewrite(spec: dict[str, object]) -> Rewrite:
    steps = tuple(
        (re.compile(str(step["find"])), str(step["replace"]))
        for step in spec.get("steps", [])  # type: ignore[attr-defined]
    )
    pattern = spec.get("match", spec.get("search"))
    return Rewrite(
        steps=steps,
        pattern=re.compile(str(pattern)) if pattern is not None else None,
        anchored="match" in spec,
        after=str(spec.get("after", "{line}")),
        fallback=str(spec.get("fallback", "{line}")),
    )


def code_doc(code: str, title: str = "") -> str:
    """The long description of `code`, falling back to its title for a code without prose."""
    entry = registry().get(code)
    return entry.doc if entry is not None and entry.doc else title


def recipe_text(code: str, recipe: str) -> str:
    """What the recipe of `code` does, as its folder says (the recipe's name without a text)."""
    entry = registry().get(code)
    return entry.recipe_text if entry is not None and entry.recipe_text else recipe


def step_order() -> list[str]:
    """The BLOCKS codes in the order their fixes come in the report's next steps."""
    stepped = [(entry.step, code) for code, entry in registry().items() if entry.step is not None]
    return [code for _, code in sorted(stepped)]


def rewrite_line(code: str, line: str) -> str:
    """The line rewritten into the shape of the code's fix (the line itself without a sketch)."""
    entry = registry().get(code)
    if entry is None or entry.rewrite is None:
        return line
    return entry.rewrite.rewrite(line)
