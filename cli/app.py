"""The `cpq` command line (typer). Heavy modules are imported inside commands so
that `cpq --help` and small runs start quickly."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .. import __version__

app = typer.Typer(
    name="cpq",
    help=(
        "cuPyNumeric query: a Datalog code-query tool that answers, before a port, which NumPy "
        "code will scale on cuPyNumeric and what must change first. Static and read-only: it "
        "never imports, executes or modifies the code it reads."
    ),
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class OutputFormat(StrEnum):
    md = "md"
    json = "json"
    sarif = "sarif"


class FailOn(StrEnum):
    ready = "ready"
    light = "light"
    significant = "significant"
    not_recommended = "not-recommended"


class _State:
    quiet = False
    verbose = False
    color = True


state = _State()


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"cpq: {message}", err=True)
    return typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cpq {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour in output.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only results, no progress.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Timings and details.")] = False,
) -> None:
    state.quiet = quiet
    state.verbose = verbose
    state.color = not no_color


def _existing_path(path: Path) -> Path:
    if not path.exists() and not path.is_symlink():
        raise fail(f"{path}: no such file or directory")
    return path


def _context(elements, gpus, nodes, gpu, cpu_only, pattern):  # type: ignore[no-untyped-def]
    from ..context import Context, ContextError

    try:
        return Context.from_options(elements, gpus, nodes, gpu, cpu_only, pattern)
    except ContextError as exc:
        raise fail(str(exc)) from None


ElementsOpt = Annotated[
    str | None,
    typer.Option("--elements", help="Hot-path array size in total: 8192, 16M, 2.5e8, 16384x16384."),
]
GpusOpt = Annotated[int | None, typer.Option("--gpus", help="GPUs per node (default 1–4).")]
NodesOpt = Annotated[int | None, typer.Option("--nodes", help="Nodes (default 1).")]
GpuOpt = Annotated[
    str | None, typer.Option("--gpu", help="GPU model (H100, A100, V100, P100, ...) or sm_XX / X.Y.")
]
CpuOnlyOpt = Annotated[bool, typer.Option("--cpu-only", help="A CPU-only Legate run.")]
PatternOpt = Annotated[
    str | None, typer.Option("--pattern", help="Override the inferred compute pattern.")
]
NoCacheOpt = Annotated[
    bool, typer.Option("--no-cache", help="Neither read nor write the .cpq/ fact store.")
]
CacheDirOpt = Annotated[
    Path | None, typer.Option("--cache-dir", help="Keep the fact store here instead of PATH/.cpq.")
]
JobsOpt = Annotated[
    int | None, typer.Option("--jobs", "-j", help="Worker processes for extraction (default: cores).")
]
RulesOpt = Annotated[
    Path | None, typer.Option("--rules", help="Use this rules file instead of the shipped rules.dl.")
]


@app.command()
def assess(
    path: Annotated[Path, typer.Argument(help="A Python file or a directory tree.")],
    elements: ElementsOpt = None,
    gpus: GpusOpt = None,
    nodes: NodesOpt = None,
    gpu: GpuOpt = None,
    cpu_only: CpuOnlyOpt = False,
    pattern: PatternOpt = None,
    format: Annotated[OutputFormat, typer.Option("--format", "-f", help="Report format.")] = (
        OutputFormat.md
    ),
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report to this file.")
    ] = None,
    fail_on: Annotated[
        FailOn | None,
        typer.Option("--fail-on", help="Exit 1 when the verdict is this bad or worse (for CI)."),
    ] = None,
    rules: RulesOpt = None,
    no_cache: NoCacheOpt = False,
    cache_dir: CacheDirOpt = None,
    jobs: JobsOpt = None,
) -> None:
    """The full readiness report for a file or a directory tree."""
    from ..assessment import assess as run_assessment
    from ..engine import DatalogError

    _existing_path(path)
    context = _context(elements, gpus, nodes, gpu, cpu_only, pattern)
    try:
        result = run_assessment(
            path, context, rules, cache_dir=cache_dir, use_cache=not no_cache, jobs=jobs
        )
    except DatalogError as exc:
        raise fail(str(exc)) from None
    if format is OutputFormat.json:
        import json

        from .json_report import report_dict

        text = json.dumps(report_dict(result), indent=2, ensure_ascii=False) + "\n"
    elif format is OutputFormat.sarif:
        raise fail("--format sarif is not available yet")
    else:
        from .markdown import render

        text = render(result)
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if state.verbose:
        t = result.timings
        typer.echo(
            f"cpq: {len(result.files)} files, {result.lines:,} lines, {result.fact_count:,} facts "
            f"({result.cache_hits} files from the cache"
            f"{', results reused' if result.reused_results else ''}); "
            f"extract {t['extract']:.2f}s, load {t['load']:.2f}s, evaluate {t['evaluate']:.2f}s",
            err=True,
        )
    if fail_on is not None and _verdict_rank(result.verdict) >= _FAIL_RANK[fail_on]:
        raise typer.Exit(1)


_VERDICT_RANK = {"READY": 0, "LIGHT REFACTOR": 1, "SIGNIFICANT REFACTOR": 2, "NOT RECOMMENDED": 3}
_FAIL_RANK = {
    FailOn.ready: 0,
    FailOn.light: 1,
    FailOn.significant: 2,
    FailOn.not_recommended: 3,
}


def _verdict_rank(verdict: str) -> int:
    return _VERDICT_RANK.get(verdict, 0)


@app.command()
def rules(
    code: Annotated[str | None, typer.Argument(help="One R-code, e.g. R104.")] = None,
) -> None:
    """The catalogue: every R-code with kind, title, recipe and its rules in rules.dl."""
    from .catalogue import catalogue_rows, rule_texts

    rows = catalogue_rows()
    if code is None:
        from tabulate import tabulate

        typer.echo(tabulate(rows, headers=["code", "kind", "title", "recipe"]))
        return
    code = code.upper()
    match = [r for r in rows if r[0] == code]
    if not match:
        raise fail(f"unknown code {code!r}; known codes: {', '.join(r[0] for r in rows)}")
    c, kind, title, recipe = match[0]
    typer.echo(f"{c} [{kind}] {title}" + (f" — recipe {recipe}" if recipe else ""))
    typer.echo("")
    for line_no, text in rule_texts(c):
        typer.echo(f"rules.dl:{line_no}:")
        typer.echo(text)
        typer.echo("")


@app.command()
def facts(
    path: Annotated[Path, typer.Argument(help="A Python file or a directory tree.")],
    relation: Annotated[
        str | None, typer.Option("--relation", "-r", help="Show only this relation.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write one NAME.facts TSV per input relation (Soufflé -F)."),
    ] = None,
) -> None:
    """The extracted facts: a table, or Soufflé's TSV input files in a folder."""
    from ..assessment import collect_facts
    from ..facts.schema import INPUT_RELATIONS

    _existing_path(path)
    fact_set = collect_facts(path).facts
    if relation is not None and relation not in INPUT_RELATIONS:
        raise fail(f"unknown relation {relation!r}; known: {', '.join(sorted(INPUT_RELATIONS))}")
    if out is not None:
        from ..assessment import manifest_facts
        from ..context import Context
        from .fact_export import write_souffle_facts

        extra = {
            "context_number": Context().facts(),
            "context_symbol": [],
            "suppressed": [],
            **manifest_facts(),
        }
        counts = write_souffle_facts(fact_set, out, extra)
        if not state.quiet:
            typer.echo(
                f"wrote {sum(counts.values()):,} facts in {len(counts)} files to {out}", err=True
            )
        return
    from tabulate import tabulate

    names = [relation] if relation else sorted(INPUT_RELATIONS)
    for name in names:
        rows = fact_set.rows(name)
        cols = [c.name for c in INPUT_RELATIONS[name]]
        typer.echo(f"{name} ({len(rows):,})")
        if rows:
            typer.echo(tabulate(rows, headers=cols))
        typer.echo("")


def _mount_manifest() -> None:
    try:
        from ..manifest.cli import app as manifest_app
    except ImportError:  # pragma: no cover - the manifest package ships with cpq
        return
    app.add_typer(manifest_app, name="manifest", help="The API-support manifest.")


_mount_manifest()


def _register_explain() -> None:
    try:
        from .explain_cmds import register
    except ImportError:
        return
    register(app)


_register_explain()


def main() -> None:
    app()
