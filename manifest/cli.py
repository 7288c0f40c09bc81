"""`cpq manifest …`: a typer sub-app (the main app mounts it as `manifest`)."""

from __future__ import annotations

import datetime as _dt
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from . import clear_cache, default_path, load
from .model import GLYPHS, LEVEL_WORDS, LEVELS, REFRESH_COMMAND, STALE_AFTER_DAYS, Manifest

app = typer.Typer(
    help="The API-support manifest: look up an API, show its source and age, rebuild it "
    "from the cuPyNumeric wheel, or compare two manifests.",
    no_args_is_help=False,
)


class Method(StrEnum):
    static = "static"
    # Only where `import cupynumeric` works (it needs the CUDA driver library).
    introspect = "introspect"


ManifestOption = Annotated[
    Path | None,
    typer.Option("--manifest", "-m", help="Use this manifest JSON instead of the shipped one."),
]


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _load(path: Path | None) -> Manifest:
    try:
        return load(path)
    except (OSError, ValueError, KeyError) as exc:
        _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def _counts_line(manifest: Manifest) -> str:
    counts = manifest.counts()
    parts = ", ".join(f"{counts[level]} {GLYPHS[level]}" for level in LEVELS)
    return f"{len(manifest.entries)} APIs ({parts}), {len(manifest.aliases)} aliases"


def status_text(manifest: Manifest, today: _dt.date | None = None) -> str:
    prov = manifest.provenance
    age = manifest.age_days(today)
    age_text = f"{age} days old" if age is not None else "age unknown"
    lines = [
        f"manifest: {manifest.path or default_path()}",
        f"source: {prov.get('source', '?')}",
        f"cuPyNumeric: {prov.get('cupynumeric_version', '?')}    NumPy: {prov.get('numpy_version', '?')}",
        f"method: {prov.get('method', '?')}",
        f"date: {prov.get('date', '?')} ({age_text})",
        f"listed: {_counts_line(manifest)}",
    ]
    if age is None or age > STALE_AFTER_DAYS:
        why = f"is {age} days old" if age is not None else "has no valid date"
        lines.append(
            f"warning: the manifest {why} (over {STALE_AFTER_DAYS} days); refresh it with: {REFRESH_COMMAND}"
        )
    return "\n".join(lines)


@app.callback(invoke_without_command=True)
def _default(ctx: typer.Context) -> None:
    """With no subcommand, `cpq manifest` shows the status."""
    if ctx.invoked_subcommand is None:
        typer.echo(status_text(_load(None)))


@app.command()
def status(manifest: ManifestOption = None) -> None:
    """Where the manifest came from, which versions, and how old it is."""
    typer.echo(status_text(_load(manifest)))


@app.command()
def show(
    name: Annotated[str, typer.Argument(help="An API, e.g. numpy.linalg.svd or np.abs.")],
    manifest: ManifestOption = None,
) -> None:
    """The support level (and note) of one API."""
    data = _load(manifest)
    query = name.strip()
    if not query.startswith(("numpy", "np.", "cupynumeric")):
        query = "numpy." + query
    entry = data.lookup(query)
    if entry is None:
        typer.echo(f"{name}: not listed in the manifest (passed over silently)")
        return
    shown = name if entry.api == name else f"{name} → {entry.api}"
    typer.echo(f"{shown}: {entry.glyph} {LEVEL_WORDS[entry.level]}")
    if entry.note:
        typer.echo(f"  note: {entry.note}")
    version = data.provenance.get("cupynumeric_version", "?")
    if entry.source:
        typer.echo(f"  defined in cuPyNumeric {version} at {entry.source}")
    elif entry.level == "none" and not entry.note.startswith("NumPy's own"):
        typer.echo(f"  not defined by cuPyNumeric {version}")


@app.command("refresh")
def refresh_command(
    version: Annotated[
        str | None, typer.Option("--version", help="nvidia-cupynumeric version (default: latest).")
    ] = None,
    wheel: Annotated[
        Path | None,
        typer.Option("--wheel", help="An already downloaded wheel, or an unpacked package folder."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Manifest JSON to write (default: the shipped one)."),
    ] = None,
    method: Annotated[
        Method,
        typer.Option(help="static: read the sources; introspect: import the package."),
    ] = Method.static,
) -> None:
    """Rebuild the manifest from the nvidia-cupynumeric wheel on PyPI (or --wheel)."""
    # Imported here, as in `diff`: every cpq command loads this module, few rebuild manifests.
    from .introspect import IntrospectionError
    from .refresh import RefreshError, refresh

    if wheel is None:
        typer.echo(
            f"downloading nvidia-cupynumeric{'==' + version if version else ''} (pip download --no-deps) …",
            err=True,
        )
    try:
        result = refresh(version=version, wheel=wheel, output=output, method=method.value)
    except (RefreshError, IntrospectionError, OSError) as exc:
        _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    clear_cache()
    m = result.manifest
    if result.downloaded is not None:
        typer.echo(
            f"downloaded {result.downloaded.name} ({result.download_bytes / 1e6:.1f} MB) "
            f"in {result.download_seconds:.1f} s"
        )
    typer.echo(
        f"read {result.python_files} Python files of cuPyNumeric "
        f"{m.provenance.get('cupynumeric_version')} "
        f"against NumPy {m.provenance.get('numpy_version')}"
    )
    for warning in result.warnings:
        typer.echo(f"note: {warning}", err=True)
    typer.echo(f"wrote {result.json_path} and {result.md_path.name}: {_counts_line(m)}")
    typer.echo(f"took {result.seconds:.1f} s")


@app.command()
def diff(
    other: Annotated[Path, typer.Argument(help="Another manifest JSON, or an upstream-format .md.")],
    manifest: ManifestOption = None,
    list_all: Annotated[bool, typer.Option("--list", help="Also list the names only one side has.")] = False,
) -> None:
    """Compare this manifest with another (before/after an upgrade, or the upstream table)."""
    from .diff import compare, load_any, report

    ours = _load(manifest)
    try:
        theirs = load_any(other)
    except (OSError, ValueError, KeyError) as exc:
        _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    result = compare(ours, theirs)
    typer.echo(report(result, _label(ours), _label(theirs, str(other)), list_all, ours))


def _label(manifest: Manifest, fallback: str = "") -> str:
    prov = manifest.provenance
    parts = [manifest.path or str(prov.get("source") or fallback)]
    if prov.get("cupynumeric_version"):
        parts.append(f"cuPyNumeric {prov['cupynumeric_version']}")
    if prov.get("date"):
        parts.append(str(prov["date"]))
    return ", ".join(parts)
