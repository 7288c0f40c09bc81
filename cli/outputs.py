"""Where `cpq assess` writes what: the report on stdout (or `-o FILE`), the reports of
`--output-format FORMAT=PATH`, and the checks that every one of them can be written, made
before the analysis so that a typo in a path costs no run.

Which format goes where:

- stdout, with neither `--format` nor `-o`: concise, at most DEFAULT_LIMIT finding lines and
  the verdict summary (a terminal, a pre-commit hook and a CI log all read it);
- `--format F`: F in full, on stdout or in `-o FILE`;
- `-o FILE` alone: the Markdown report;
- `--statistics`: the counts per code instead (as JSON with `--format json`);
- each `--output-format F=PATH`: F in full in PATH, beside the above.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .options import usage_error
from .writable import check_writable, write_file, write_stdout

if TYPE_CHECKING:
    from ..pipeline.assessment import Assessment

# Every report format `--format` and `--output-format` take (`cpq assess --help` lists them).
FORMATS = ("concise", "md", "json", "sarif", "github", "gitlab", "junit")
# The finding lines of the default output (report/concise.py says which come first).
DEFAULT_LIMIT = 40


@dataclass(frozen=True)
class Output:
    format: str  # one of FORMATS, or "statistics" / "statistics-json"
    path: Path | None  # None: stdout
    limit: int | None = None  # at most this many finding lines (concise only)


def parse_output_format(spec: str) -> Output:
    """`md=report.md` -> Output("md", Path("report.md"))."""
    name, sep, target = spec.partition("=")
    if not sep or not target:
        usage_error(f"--output-format {spec!r}: give FORMAT=PATH, e.g. md=report.md")
    name = name.strip().lower()
    if name not in FORMATS:
        usage_error(f"--output-format {spec!r}: unknown format {name!r}; known: {', '.join(FORMATS)}")
    return Output(name, Path(target))


def plan_outputs(
    format: str | None, output: Path | None, extra: list[str] | None, statistics: bool
) -> list[Output]:
    """The outputs of one run, stdout's (or -o's) first; every path checked writable."""
    if statistics:
        if format not in (None, "concise", "json"):
            usage_error(
                f"--statistics prints a table (JSON with --format json), not {format}: "
                f"write the {format} report with --output-format {format}=PATH"
            )
        main = Output("statistics-json" if format == "json" else "statistics", output)
    elif format is None:
        main = Output("md", output) if output is not None else Output("concise", None, DEFAULT_LIMIT)
    else:
        main = Output(format, output)
    outputs = [main, *(parse_output_format(spec) for spec in extra or [])]
    seen: dict[str, Path] = {}
    for out in outputs:
        if out.path is None:
            continue
        key = os.path.abspath(out.path)
        if key in seen:
            usage_error(f"{out.path}: named for two outputs; give each report a file of its own")
        seen[key] = out.path
        check_writable(out.path, "--output-format" if out is not main else "--output")
    return outputs


def render_listing(
    result: Assessment, out: Output, new_keys: set[tuple[str, str, int]] | None, verdict_fails: bool
) -> str:
    """The report of a format beyond md, json and sarif (those app.py renders)."""
    if out.format == "concise":
        from ..report.concise import render_concise

        return render_concise(result, new_keys, out.limit)
    if out.format == "statistics":
        from ..report.statistics import render_statistics

        return render_statistics(result, new_keys)
    if out.format == "statistics-json":
        from ..report.statistics import statistics_json

        return statistics_json(result, new_keys)
    if out.format == "github":
        from ..report.github import render_github

        return render_github(result, new_keys, verdict_fails)
    if out.format == "gitlab":
        from ..report.gitlab import render_gitlab

        return render_gitlab(result, new_keys)
    if out.format == "junit":
        from ..report.junit import render_junit

        return render_junit(result, new_keys, verdict_fails)
    raise ValueError(f"no renderer for {out.format!r}")


def write_output(out: Output, text: str) -> None:
    if out.path is None:
        write_stdout(text)
    else:
        write_file(out.path, text, "--output")
