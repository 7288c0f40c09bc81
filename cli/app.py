"""The `cpq` command line (typer). Heavy modules are imported inside commands so
that `cpq --help` and small runs start quickly."""

from __future__ import annotations

import gc
import os
import sys
import textwrap
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core

from .. import __version__
from ..manifest.cli import app as manifest_app
from .explain_cmds import register as register_explain_commands
from .fix_cmd import DiffOpt, UnsafeFixesOpt
from .fix_cmd import register as register_fix_command
from .gating import FindingKind, failing_findings, failure_reason
from .global_options import accept_global_options, start_run
from .options import (
    CacheDirOpt,
    CpuOnlyOpt,
    DoctorOpt,
    ElementsOpt,
    GpuOpt,
    GpusOpt,
    NoCacheOpt,
    NodesOpt,
    PatternOpt,
    ProfileOpt,
    RulesOpt,
    build_context,
    check_input_path,
    check_jobs,
    load_config,
    read_evidence,
    state,
)
from .outputs import Output, plan_outputs, render_listing, write_output

if TYPE_CHECKING:
    from ..pipeline.assessment import Assessment
    from ..pipeline.progress import Progress
    from ..report.baseline import Baseline

# click's base exception class, wherever this typer version keeps click.
_ClickException: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)


class _OneLineErrors(typer.core.TyperGroup):
    """Errors click finds in the command line (an unknown option, a value of the wrong type)
    as one line, `cpq: <message>` with exit status 2, like cpq's own usage errors, instead of a
    usage line and a framed box."""

    def main(  # type: ignore[override]
        self,
        args: list[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        start_run(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            status = super().main(args, prog_name, complete_var, False, **extra)
        except _ClickException as exc:
            error: Any = exc
            if type(exc).__name__ == "NoArgsIsHelpError":  # `cpq` alone: the help, as asked
                error.show()
            else:
                typer.echo(f"cpq: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        # Without standalone mode a command's exit status comes back as the return value.
        sys.exit(status if isinstance(status, int) else 0)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            accept_global_options(command)  # `cpq assess . -q` as `cpq -q assess .`
        return command


app = typer.Typer(
    name="cpq",
    cls=_OneLineErrors,
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
    concise = "concise"
    md = "md"
    json = "json"
    sarif = "sarif"
    github = "github"
    gitlab = "gitlab"
    junit = "junit"


class FailOn(StrEnum):
    ready = "ready"
    light = "light"
    significant = "significant"
    not_recommended = "not-recommended"


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
    no_color: Annotated[
        bool, typer.Option("--no-color", help="No colour in output (also NO_COLOR=1).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only results, no progress.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Timings and details.")] = False,
) -> None:
    state.quiet = quiet
    state.verbose = verbose
    state.color = state.color and not no_color  # NO_COLOR too (global_options.start_run)


# Exit status of `cpq assess` when no file was assessed (none found, all excluded or ignored,
# none readable): no verdict, rather than a READY that nothing earned (0, 1, 2 are taken).
NOTHING_TO_ASSESS = 3

JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs", "-j", help="Worker processes for extraction (default: cores; 1 to 4 per core, ≤ 64)."
    ),
]


@app.command(
    epilog="Exit status: 0 assessed, 1 the --fail-on verdict reached, 2 usage error or unreadable "
    "input, 3 nothing to assess (no Python file found, or none readable)."
)
def assess(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH",
            help="Python files, notebooks or directory trees (several: one report, names "
            "relative to the folder holding them all).",
        ),
    ],
    elements: ElementsOpt = None,
    gpus: GpusOpt = None,
    nodes: NodesOpt = None,
    gpu: GpuOpt = None,
    cpu_only: CpuOnlyOpt = None,
    pattern: PatternOpt = None,
    profile: ProfileOpt = None,
    doctor: DoctorOpt = None,
    format: Annotated[
        OutputFormat | None,
        typer.Option(
            "--format",
            "-f",
            help="Report format: concise (one line per finding, then the verdict; with neither "
            "--format nor -o, stdout gets it with the 40 findings that weigh most), md (the full "
            "report; the default with -o), json, sarif, github (workflow commands), gitlab (Code "
            "Quality), junit.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report to this file (default: md).")
    ] = None,
    output_formats: Annotated[
        list[str] | None,
        typer.Option(
            "--output-format",
            metavar="FORMAT=PATH",
            help="Also write the FORMAT report to PATH (repeatable: md=report.md sarif=cpq.sarif).",
        ),
    ] = None,
    statistics: Annotated[
        bool,
        typer.Option("--statistics", help="Counts per code (code, kind, title, count), not the report."),
    ] = False,
    fail_on: Annotated[
        FailOn | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when the verdict is this bad or worse. The verdict weighs the GPU and the "
            "problem size too, which no code change fixes: to gate on the code, --fail-on-findings.",
        ),
    ] = None,
    fail_on_findings: Annotated[
        FindingKind | None,
        typer.Option(
            "--fail-on-findings",
            case_sensitive=False,
            help="Exit 1 when a finding of this kind or worse counts (not suppressed, not in "
            "--baseline); gates are reported, never fail it. The pre-commit hook's gate.",
        ),
    ] = None,
    rules: RulesOpt = None,
    no_cache: NoCacheOpt = False,
    cache_dir: CacheDirOpt = None,
    jobs: JobsOpt = None,
    max_file_size: Annotated[
        str, typer.Option("--max-file-size", help="Skip files larger than this (bytes, 10M, 512K).")
    ] = "10M",
    show_suppressed: Annotated[
        bool, typer.Option("--show-suppressed", help="List suppressed findings in the report.")
    ] = False,
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline", help="Report only findings not recorded in this baseline file."),
    ] = None,
    write_baseline: Annotated[
        Path | None,
        typer.Option("--write-baseline", help="Record the current findings as the baseline."),
    ] = None,
    fix: Annotated[
        bool, typer.Option("--fix", help="Apply the safe fixes instead of reporting (as `cpq fix`).")
    ] = False,
    diff: DiffOpt = False,
    unsafe_fixes: UnsafeFixesOpt = False,
    no_respect_gitignore: Annotated[
        bool,
        typer.Option("--no-respect-gitignore", help="Assess files .gitignore files ignore, too."),
    ] = False,
) -> None:
    """The readiness report for files, notebooks or directory trees: on stdout one line per
    finding and the verdict (concise), the full Markdown report with -o FILE or --format md.

    Exit status: 0 assessed, 1 --fail-on-findings or --fail-on reached, 2 a usage error (an
    output that cannot be written included, checked before the analysis), 3 nothing to assess."""
    from ..engine import DatalogError
    from ..pipeline.assessment import assess as run_assessment
    from ..pipeline.progress import Progress
    from .inputs import common_root
    from .writable import check_writable

    for each in paths:
        check_input_path(each)
    path, members = common_root(paths)
    if rules is not None and not rules.is_file():
        raise fail(f"{rules}: no such rules file")
    # Before any analysis: a report that cannot be written is known now, not minutes later.
    outputs = plan_outputs(format, output, output_formats, statistics)
    if write_baseline is not None:
        check_writable(write_baseline, "--write-baseline")
    check_jobs(jobs)
    config = load_config(path, rules)
    context = build_context(config, elements, gpus, nodes, gpu, cpu_only, pattern, profile, doctor)
    if fix or diff or unsafe_fixes:
        from .fix_cmd import run_fix

        if not fix:
            raise fail("--diff and --unsafe-fixes go with --fix")
        run_fix(path, config, context, diff, unsafe_fixes)
        return
    known = _load_baseline(baseline) if baseline is not None else None
    progress = Progress.for_run(quiet=state.quiet)
    try:
        result = run_assessment(
            path,
            context,
            rules,
            cache_dir=cache_dir,
            use_cache=not no_cache,
            jobs=jobs,
            config=config,
            max_file_size=_size(max_file_size),
            progress=progress,
            keep_database=False,  # the report reads nothing more from it
            members=members,
            respect_gitignore=not no_respect_gitignore,
            save_later=True,  # while the report is made
        )
    except DatalogError as exc:
        raise fail(str(exc)) from None
    try:
        _report(
            result,
            paths,
            outputs,
            known,
            fail_on,
            fail_on_findings,
            show_suppressed,
            write_baseline,
            progress,
        )
    finally:
        result.wait_saved()


def _report(
    result: Assessment,
    paths: list[Path],
    outputs: list[Output],
    known: Baseline | None,
    fail_on: FailOn | None,
    fail_on_findings: FindingKind | None,
    show_suppressed: bool,
    write_baseline: Path | None,
    progress: Progress,
) -> None:
    """The reports of `assess`, its lines on stderr and its exit status."""
    from ..pipeline.assessment import nothing_to_assess

    nothing = nothing_to_assess(result, " ".join(map(str, paths)))
    new_keys = _mark_baseline(result, known)
    counted = failing_findings(result.findings, fail_on_findings, new_keys) if fail_on_findings else []
    failing = bool(counted) or (fail_on is not None and _verdict_rank(result.verdict) >= _FAIL_RANK[fail_on])
    progress.phase("rendering the report")
    texts = []
    for out in outputs:
        # With nothing assessed, a report for people (Markdown, concise) would be a verdict
        # nothing earned: only the line on stderr says so; machine formats say it their own way.
        if nothing and out.format in ("md", "concise"):
            continue
        if out.format in ("md", "json", "sarif"):
            text = _render(result, OutputFormat(out.format), show_suppressed, known, new_keys)
        else:
            text = render_listing(result, out, new_keys, failing)
        texts.append((out, text))
    progress.close()  # the report and what follows start on a clean line
    for out, text in texts:
        write_output(out, text)
    if write_baseline is not None:
        from ..report.baseline import BaselineError
        from ..report.baseline import write_baseline as save_baseline

        try:
            count = save_baseline(write_baseline, [f for f in result.findings if not f.suppressed])
        except BaselineError as exc:
            raise fail(str(exc)) from None
        if not state.quiet:
            typer.echo(f"cpq: recorded {count} findings in {write_baseline}", err=True)
    if state.verbose:
        t = result.timings
        if result.how == "evaluated":
            source = f"{result.cache_hits} files from the cache"
        elif result.how == "saved results updated":
            source = f"{result.cache_hits} files unchanged, saved results updated"
        else:
            source = result.how
        typer.echo(
            f"cpq: {len(result.files)} files, {result.lines:,} lines, {result.fact_count:,} facts "
            f"({source}); "
            f"extract {t['extract']:.2f}s, load {t['load']:.2f}s, evaluate {t['evaluate']:.2f}s",
            err=True,
        )
    if nothing:
        raise fail(f"nothing to assess: {nothing}", NOTHING_TO_ASSESS)
    if counted and fail_on_findings is not None:
        typer.echo(failure_reason(counted, fail_on_findings), err=True)
    if failing:
        raise typer.Exit(1)


def _size(text: str) -> int:
    from ..config.context import ContextError, parse_elements

    try:
        return parse_elements(text.upper().removesuffix("B") if text.upper().endswith("MB") else text)
    except ContextError:
        raise fail(f"--max-file-size: cannot read {text!r} (try 10M or 5000000)") from None


def _load_baseline(path: Path):  # type: ignore[no-untyped-def]
    from ..report.baseline import BaselineError, load_baseline

    try:
        return load_baseline(path)
    except BaselineError as exc:
        raise fail(str(exc)) from None


def _mark_baseline(result, known) -> set[tuple[str, str, int]] | None:  # type: ignore[no-untyped-def]
    """With a baseline, the (code, file, line) of the findings it does not know."""
    if known is None:
        return None
    fresh = known.new_findings([f for f in result.findings if not f.suppressed])
    return {(f.code, f.file, f.line) for f in fresh}


def _render(result, format, show_suppressed, known, new_keys) -> str:  # type: ignore[no-untyped-def]

    if format is OutputFormat.json:
        from ..report.json_report import dump_json, report_dict

        return dump_json(report_dict(result, new_keys))
    if format is OutputFormat.sarif:
        from ..config.suppress import find_suppression
        from ..report.sarif import sarif_report

        reasons = {}
        for f in result.findings:
            if f.suppressed:
                found = find_suppression((f.code, f.file, f.line), result.suppressions)
                if found is not None:
                    reasons[(f.code, f.file, f.line)] = found.reason
        log = sarif_report(result, justifications=reasons, baseline=known, notebooks=result.notebooks)
        from ..report.json_report import dump_json

        return dump_json(log, depth=4)
    from ..report.markdown import render

    return render(result, show_suppressed=show_suppressed, new_keys=new_keys)


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
    export: Annotated[
        str | None,
        typer.Option(
            "--export",
            metavar="FILE",
            help="Write the rules as one file, the files rules.dl includes expanded in place "
            "('-': standard output), for Soufflé or a --rules copy to extend.",
        ),
    ] = None,
    rules_file: Annotated[
        Path | None,
        typer.Option(
            "--rules",
            help="The rules of this file (with what it includes, `#include <cpq>` the shipped "
            "rules) instead of the shipped rules: its own codes are listed too.",
        ),
    ] = None,
) -> None:
    """The catalogue: every R-code with kind, title, recipe and its rules (rules.dl and the
    files under rules/ it includes)."""
    from ..engine import DatalogError

    if rules_file is not None and not rules_file.is_file():
        raise fail(f"{rules_file}: no such rules file")
    try:
        if export is not None:
            if code is not None:
                raise fail("--export writes every rule: give no CODE with it")
            _export_rules(export, rules_file)
            return
        _show_catalogue(code, rules_file)
    except DatalogError as exc:
        raise fail(str(exc)) from None


def _show_catalogue(code: str | None, rules_file: Path | None) -> None:
    from ..rules.catalogue import catalogue_rows, rule_texts
    from ..rules.registry import recipe_text, registry

    rows = catalogue_rows(rules_file)
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
    entry = registry().get(c)
    if entry is not None:
        typer.echo("")
        typer.echo(textwrap.fill(entry.doc or title, 100))
        if recipe:
            typer.echo("")
            typer.echo(textwrap.fill(f"Recipe {recipe}: {recipe_text(c, recipe)}.", 100))
        typer.echo("")
        typer.echo(f"Its folder: rules/codes/{c}/ (rules.dl, code.toml, doc.md, fixture.py)")
    typer.echo("")
    for where, text in rule_texts(c, rules_file):
        typer.echo(f"{where}:")
        typer.echo(text)
        typer.echo("")


def _export_rules(target: str, rules_file: Path | None) -> None:
    from ..rules.program import read_rules, rules_text

    # A --rules file joined with all it includes, the shipped rules of `#include <cpq>` too:
    # one file that Soufflé reads, whatever the program was spread over.
    text = read_rules(rules_file).text if rules_file is not None else rules_text()
    if target == "-":
        sys.stdout.write(text)
        return
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {target}: {exc.strerror or exc}") from None
    if not state.quiet:
        typer.echo(f"wrote the rules, {text.count(chr(10)):,} lines, to {target}", err=True)


@app.command()
def facts(
    path: Annotated[Path, typer.Argument(help="A Python file or a directory tree.")],
    relation: Annotated[str | None, typer.Option("--relation", "-r", help="Show only this relation.")] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write one NAME.facts TSV per input relation (Soufflé -F)."),
    ] = None,
    profile: ProfileOpt = None,
    doctor: DoctorOpt = None,
) -> None:
    """The extracted facts: a table, or Soufflé's TSV input files in a folder (with --out, the
    runtime evidence of --profile and --doctor too, as the rules read it)."""
    from ..facts.schema import INPUT_RELATIONS
    from ..pipeline.run import collect_facts
    from .writable import check_writable_folder

    check_input_path(path)
    if relation is not None and relation not in INPUT_RELATIONS:
        raise fail(f"unknown relation {relation!r}; known: {', '.join(sorted(INPUT_RELATIONS))}")
    if out is not None:
        check_writable_folder(out, "--out")
    evidence = read_evidence(profile, doctor)
    fact_set = collect_facts(path)
    if out is not None:
        from ..config.context import Context
        from ..pipeline.run import manifest_facts
        from .fact_export import write_souffle_facts

        extra = {
            "context_number": Context().facts(),
            "context_symbol": [],
            "suppressed": [],
            **evidence.facts(),
            **manifest_facts(),
        }
        try:
            counts = write_souffle_facts(fact_set, out, extra)
        except OSError as exc:
            raise fail(f"--out {out}: cannot write: {exc.strerror or exc}") from None
        if not state.quiet:
            typer.echo(f"wrote {sum(counts.values()):,} facts in {len(counts)} files to {out}", err=True)
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


app.add_typer(manifest_app, name="manifest", help="The API-support manifest.")
register_explain_commands(app)
register_fix_command(app)


def main() -> None:
    from .shutdown import install

    # Ctrl-C and SIGTERM (CI timeouts, kill) end the run at once, whatever it is doing.
    install()
    app()


def run() -> None:
    """The `cpq` command: `main`, then an exit without the interpreter's teardown, which
    costs up to a tenth of a second (a sixth of assessing one small file) and has nothing left
    to do: by then the report is written, the store closed, and the databases are closed here.

    Python's cycle collector is off for the command's life: loading facts, reading findings
    back and rendering the report make millions of objects that reference counting frees, and
    the collector walked them again and again for nothing (0.3 s of a cold run on SciPy +
    Astropy, in 695 collections that found some 860 objects in cycles).  The command leaves
    those few to the end of its process."""
    gc.disable()
    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # as sys.exit("message") does
        print(code, file=sys.stderr)
        status = 1
    from ..engine.storage import close_all_databases

    try:
        close_all_databases()
    except Exception:  # a database that cannot close cleanly must not change the exit status
        pass
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(status)  # a profiler or coverage tool writes its results at the normal exit
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(status)
