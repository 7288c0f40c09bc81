"""What a fix run says: the unified diff of the files it changes (or would change), and the
summary, ruff's way: "N fixes applied (M more with --unsafe-fixes)"."""

from __future__ import annotations

import difflib

from .recipes import Fix
from .run import FixRun

_NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(run: FixRun) -> str:
    """One diff for every file fixed, paths as a/FILE and b/FILE relative to PATH (`git apply`
    and `patch -p1` take it from there)."""
    parts: list[str] = []
    for file in sorted(run.fixed):
        old, new = run.texts[file], run.fixed[file]
        lines = difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{file}", f"b/{file}"
        )
        for line in lines:
            parts.append(line if line.endswith("\n") else line + "\n" + _NO_NEWLINE)
    return "".join(parts)


def summary(run: FixRun, dry_run: bool, verbose: bool = False) -> list[str]:
    """The summary's lines."""
    count = len(run.applied)
    done = "would be applied" if dry_run else "applied"
    head = f"{count} {'fix' if count == 1 else 'fixes'} {done}"
    if run.hidden:
        head += f" ({len(run.hidden)} more with --unsafe-fixes)"
    lines = [head]
    if verbose:
        lines += [_listed(fix) for fix in run.applied]
        if run.hidden:
            lines.append("left out, unsafe:")
            lines += [_listed(fix) for fix in run.hidden]
    if run.dropped:
        lines.append(f"{len(run.dropped)} dropped, the re-assessment refusing them:")
        lines += [f"  {fix.file}:{fix.line}: {fix.code} {fix.title}: {why}" for fix, why in run.dropped]
    if run.notebooks:
        total = sum(run.notebooks.values())
        names = ", ".join(sorted(run.notebooks))
        lines.append(
            f"notebooks are not rewritten: {total} fixable {_plural(total, 'finding')} left in {names}"
        )
    if verbose and run.unfixed:
        lines.append(f"{len(run.unfixed)} {_plural(len(run.unfixed), 'finding')} with no mechanical fix:")
        lines += [f"  {s.file}:{s.line}: {s.code}: {why}" for s, why in run.unfixed]
    return lines


def _listed(fix: Fix) -> str:
    line = f"  {fix.file}:{fix.line}: {fix.code} {fix.title}"
    return line if fix.safe else f"{line} (unsafe: {fix.note})"


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"
