"""Each fix assessed again: the fixed texts evaluated with the same rules, context and files, and
a fix kept only where the finding it targets is gone and no other finding came to its lines.

SCALES findings are not counted as new: they are the idioms that scale (np.sum is R002), which
a fix is there to bring.  A call a fix writes must resolve to the NumPy function it names (an
`np` shadowed in the function would not).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import replace
from pathlib import Path

from ..config.context import Context
from ..engine import Database, Program
from ..facts import SourceText
from ..pipeline.assessment import Assessment, read_back
from ..pipeline.progress import Progress
from ..pipeline.run import Inputs, evaluate, new_database
from .edits import apply_edits, line_of
from .recipes import Fix


def assess_inputs(
    root: Path, context: Context, program: Program, inputs: Inputs, progress: Progress | None = None
) -> Assessment:
    """An assessment of `inputs` in memory (no cache: fixed texts are nowhere on disk), its
    database kept open for the questions below; the caller closes it."""
    found = evaluate(inputs, lambda: new_database(program, context, inputs), None, None, progress)
    result = Assessment(root=root, context=context)
    read_back(result, found, inputs)
    result.db = found.db
    return result


def with_texts(inputs: Inputs, texts: dict[str, str]) -> Inputs:
    """`inputs` with some files' texts replaced.  Lines keep their numbers (fix.edits), so the
    suppressions and configuration read from the files still hold."""
    found = [
        replace(item, text=texts[item.relpath], sha=hashlib.sha256(texts[item.relpath].encode()).hexdigest())
        if isinstance(item, SourceText) and item.relpath in texts
        else item
        for item in inputs.found
    ]
    return replace(inputs, found=found, sources={**inputs.sources, **texts})


def fixed_texts(texts: dict[str, str], fixes: list[Fix]) -> dict[str, str]:
    """The text of each file the fixes touch, with them applied."""
    by_file: dict[str, list[Fix]] = {}
    for fix in fixes:
        by_file.setdefault(fix.file, []).append(fix)
    return {
        file: apply_edits(texts[file], [edit for fix in found for edit in fix.edits])
        for file, found in by_file.items()
    }


def fix_lines(text: str, fix: Fix) -> set[int]:
    """The lines a fix changes, and its finding's."""
    return {fix.line} | {line_of(text, edit.start) for edit in fix.edits}


class Findings:
    """What an assessment found, by line: live sites per (code, file, line), the codes of
    findings other than SCALES, and the files it could not read whole."""

    def __init__(self, result: Assessment) -> None:
        db = result.db
        assert db is not None
        self.db = db
        rows = db.query("live_site(C, N), loc(N, F, L, _)")[1]
        self.sites = Counter((code, file, line) for code, _, file, line in rows)
        self.codes: dict[tuple[str, int], set[str]] = {}
        for f in result.findings:
            if f.kind != "SCALES":
                self.codes.setdefault((f.file, f.line), set()).add(f.code)
        self.broken = {file for file, _ in result.partial} | {s.relpath for s in result.skipped}

    def codes_on(self, file: str, lines: set[int]) -> set[str]:
        return set().union(*(self.codes.get((file, line), set()) for line in lines))

    def callees_on(self, file: str, line: int) -> set[str]:
        return {row[0] for row in _calls_on(self.db, file, line)}


def _calls_on(db: Database, file: str, line: int) -> list[tuple[str]]:
    return db.con.execute(
        'SELECT c."callee" FROM "call" c JOIN "node" n ON n."n" = c."c" '
        'JOIN "scope" s ON s."s" = n."scope" WHERE s."file" = ? AND n."line" = ?',
        [file, line],
    ).fetchall()


def failures(fixes: list[Fix], texts: dict[str, str], before: Findings, after: Findings) -> dict[Fix, str]:
    """The fixes the assessment of the fixed texts does not bear out, with the reason."""
    per_key = Counter((fix.code, fix.file, fix.line) for fix in fixes)
    failed: dict[Fix, str] = {}
    for fix in fixes:
        key = (fix.code, fix.file, fix.line)
        lines = fix_lines(texts[fix.file], fix)
        new = after.codes_on(fix.file, lines) - before.codes_on(fix.file, lines)
        if fix.file in after.broken and fix.file not in before.broken:
            failed[fix] = "the fixed file no longer parses"
        elif after.sites[key] > before.sites[key] - per_key[key]:
            failed[fix] = f"{fix.code} is still there"
        elif new:
            failed[fix] = f"it brings {', '.join(sorted(new))}"
        elif fix.callee and fix.callee not in after.callees_on(fix.file, fix.line):
            failed[fix] = f"the call it writes is not {fix.callee} there"
    return failed
