"""`cpq fix PATH`: apply the mechanical recipes of the findings (fix/), ruff-style.

    cpq fix src/                  write the safe fixes
    cpq fix src/ --diff           show them as a unified diff, write nothing
    cpq fix src/ --unsafe-fixes   the unsafe ones too (each says why it is unsafe: -v)

`cpq assess PATH --fix [--diff]` is the same run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .options import build_context, load_config, state, usage_error

if TYPE_CHECKING:
    from ..config.context import Context
    from ..config.project import Config
    from ..fix.run import FixRun

FIX_HELP = (
    "Apply the mechanical recipes of the findings, each assessed again, and write the files.\n\n"
    "Safe fixes by default (R110 any/all over an array, R109 an order= that is the default); "
    "--unsafe-fixes adds those that can change results (R110 sum/max/min, R202 in place, other "
    "order= values). A fix is kept only if its finding goes and no other comes to its lines. "
    "Notebooks are not rewritten. Exit 0 when done (with --diff too); 2 on a usage error, an "
    "unreadable PATH, or a file that could not be written (it is left as it was)."
)

DiffOpt = Annotated[
    bool, typer.Option("--diff", help="Show the fixes as a unified diff on stdout; write nothing.")
]
UnsafeFixesOpt = Annotated[
    bool, typer.Option("--unsafe-fixes", help="Also apply the fixes that can change results.")
]


def fix(
    path: Annotated[Path, typer.Argument(help="A Python file or a directory tree.")],
    diff: DiffOpt = False,
    unsafe_fixes: UnsafeFixesOpt = False,
) -> None:
    if not path.exists() and not path.is_symlink():
        usage_error(f"{path}: no such file or directory")
    config = load_config(path)
    context = build_context(config, None, None, None, None, None, None)
    run_fix(path, config, context, diff, unsafe_fixes)


def run_fix(path: Path, config: Config, context: Context, diff: bool, unsafe: bool) -> None:
    """Plan the fixes, then show them (`diff`) or write them; the summary last."""
    from ..engine import DatalogError
    from ..fix.output import summary, unified_diff
    from ..fix.run import plan_fixes

    try:
        from ..pipeline.progress import Progress

        progress = Progress.for_run(quiet=state.quiet)
        try:
            run = plan_fixes(path, context, config, unsafe, progress=progress)
        finally:
            progress.close()
    except DatalogError as exc:
        usage_error(str(exc))
    if diff:
        sys.stdout.write(unified_diff(run))
        if not state.quiet:
            for line in summary(run, True, state.verbose):
                typer.echo(line, err=True)
        return
    unwritten = _write(run)
    run.applied = [f for f in run.applied if f.file not in unwritten]
    for line in summary(run, False, state.verbose):
        typer.echo(line)
    if unwritten:
        raise typer.Exit(2)


def _write(run: FixRun) -> set[str]:
    """Write every fixed file; the files left as they were, each said on stderr."""
    from ..fix.write import NotWritten, target_path, write_fixed

    unwritten: set[str] = set()
    for file in sorted(run.fixed):
        edits = [edit for fix in run.applied if fix.file == file for edit in fix.edits]
        try:
            write_fixed(target_path(run.root, file), run.shas[file], run.texts[file], edits)
        except NotWritten as exc:
            typer.echo(f"cpq: {file}: not fixed: {exc}", err=True)
            unwritten.add(file)
    return unwritten


def register(app: typer.Typer) -> None:
    app.command(name="fix", help=FIX_HELP)(fix)
