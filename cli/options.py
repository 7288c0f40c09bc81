"""Options shared by `assess`, `why` and `query`, the context and configuration they build, and
the state the options of `cpq` itself set (`--quiet`, `--verbose`, `--no-color`).

The context comes from the command line first, then `[tool.cpq]` in the nearest pyproject.toml,
then the defaults of decision.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from ..config.context import Context
    from ..config.project import Config
    from ..runtime.evidence import RuntimeEvidence

ElementsOpt = Annotated[
    str | None,
    typer.Option("--elements", help="Hot-path array size in total: 8192, 16M, 2.5e8, 16384x16384."),
]
GpusOpt = Annotated[int | None, typer.Option("--gpus", help="GPUs per node (default 1–4).")]
NodesOpt = Annotated[int | None, typer.Option("--nodes", help="Nodes (default 1).")]
GpuOpt = Annotated[
    str | None, typer.Option("--gpu", help="GPU model (H100, A100, V100, P100, ...) or sm_XX / X.Y.")
]
CpuOnlyOpt = Annotated[
    bool | None,
    typer.Option("--cpu-only/--no-cpu-only", help="A CPU-only Legate run.", show_default=False),
]
PatternOpt = Annotated[str | None, typer.Option("--pattern", help="Override the inferred compute pattern.")]
ProfileOpt = Annotated[
    Path | None,
    typer.Option(
        "--profile",
        metavar="FILE",
        help="A profile of a representative run: cProfile/pstats output (python -m cProfile -o "
        "FILE) or py-spy's speedscope JSON (--format speedscope). Findings in code it never "
        "ran do not count; Gate 5 is judged on the measured time.",
    ),
]
DoctorOpt = Annotated[
    Path | None,
    typer.Option(
        "--doctor",
        metavar="FILE",
        help="The cuPyNumeric Doctor's JSON report (CUPYNUMERIC_DOCTOR=1 "
        "CUPYNUMERIC_DOCTOR_FORMAT=json): it confirms findings and adds what only a run shows.",
    ),
]
RulesOpt = Annotated[
    Path | None,
    typer.Option("--rules", help="Use this rules file (it may #include more) instead of the shipped rules."),
]

NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the .cpq/ fact store.")]
CacheDirOpt = Annotated[
    Path | None, typer.Option("--cache-dir", help="Keep the fact store here instead of PATH/.cpq.")
]


Read = TypeVar("Read")


class _State:
    """The options of `cpq` itself (before the command), for every command to read."""

    quiet = False
    verbose = False
    color = True


state = _State()


def usage_error(message: str) -> NoReturn:
    typer.echo(f"cpq: {message}", err=True)
    raise typer.Exit(2)


# The most extraction workers --jobs may ask for: more than a few per CPU only adds processes
# (each holds a parser and its memory) without adding speed.
JOBS_PER_CPU = 4
MAX_JOBS = 64


def usable_cpus() -> int:
    """The CPUs this process may run on (a container's or a taskset's share, not the machine's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this system (macOS, Windows)
        return os.cpu_count() or 1


def check_jobs(jobs: int | None) -> int | None:
    """`--jobs`, when given, between 1 and min(64, 4 x the usable CPUs); exit 2 otherwise.  The
    workers started are fewer still when there are fewer files to parse (facts.parallel)."""
    if jobs is None:
        return None
    cpus = usable_cpus()
    bound = min(MAX_JOBS, JOBS_PER_CPU * cpus)
    if not 1 <= jobs <= bound:
        usage_error(
            f"--jobs must be between 1 and {bound} ({JOBS_PER_CPU} per CPU, {cpus} here, "
            f"at most {MAX_JOBS}), got {jobs}"
        )
    return jobs


def check_input_path(path: Path) -> None:
    """Exit 2 with one line unless `path` is a file or a folder (cli.inputs says what it is)."""
    from .inputs import input_problem

    problem = input_problem(path)
    if problem:
        usage_error(f"{path}: {problem}")


def load_config(path: Path, rules: Path | None = None) -> Config:
    """`[tool.cpq]` of the nearest pyproject.toml (defaults when there is none), once `path` is
    known to be a file or a folder (a pipe, a device, a symlink loop is a usage error: every
    command reads its configuration before it reads PATH).  The codes it lists are those of
    the shipped rules, or of the `rules` file (a team's T001 beside the R-codes)."""
    from ..config.project import ConfigError, config_for

    check_input_path(path)
    codes = None
    if rules is not None:
        from ..engine import DatalogError
        from ..rules.catalogue import code_names
        from ..rules.program import load_program

        try:
            codes = code_names(load_program(rules))
        except (DatalogError, OSError):
            pass  # the rules file's own error is reported where it is read
    try:
        return config_for(path, codes)
    except ConfigError as exc:
        usage_error(str(exc))


def build_context(
    config: Config,
    elements: str | None,
    gpus: int | None,
    nodes: int | None,
    gpu: str | None,
    cpu_only: bool | None,
    pattern: str | None,
    profile: Path | None = None,
    doctor: Path | None = None,
) -> Context:
    """The context: command-line values win over the configuration's; with the runtime evidence
    of `profile` and `doctor` (a file that cannot be read is a usage error, in one line)."""
    from ..config.context import Context, ContextError

    options = config.context_options(
        elements=elements, gpus=gpus, nodes=nodes, gpu=gpu, cpu_only=cpu_only, pattern=pattern
    )
    try:
        context = Context.from_options(**options)
    except ContextError as exc:
        usage_error(str(exc))
    _mark_configured(context, config, elements, gpus, nodes, gpu)
    if profile is not None or doctor is not None:
        context.runtime = read_evidence(profile, doctor)
    return context


def read_evidence(profile: Path | None, doctor: Path | None) -> RuntimeEvidence:
    """The profile and the Doctor report given; exit 2 with one line for one that cannot be read."""
    from ..runtime import read_doctor, read_profile
    from ..runtime.evidence import RuntimeEvidence

    return RuntimeEvidence(
        profile=_evidence_file("--profile", profile, read_profile) if profile is not None else None,
        profile_path=str(profile or ""),
        doctor=_evidence_file("--doctor", doctor, read_doctor) if doctor is not None else None,
        doctor_path=str(doctor or ""),
    )


def _evidence_file(option: str, path: Path, reader: Callable[[Path], Read]) -> Read:
    from ..runtime import EvidenceError

    try:
        return reader(path)
    except EvidenceError as exc:
        usage_error(f"{option}: {exc}")


def _mark_configured(context: Context, config: Config, elements, gpus, nodes, gpu) -> None:  # type: ignore[no-untyped-def]
    """Values taken from pyproject.toml are reported as given, with where they came from."""
    where = str(config.source) if config.source is not None else ""
    for name, cli_value in (("elements", elements), ("gpus", gpus), ("nodes", nodes), ("gpu", gpu)):
        if cli_value is None and getattr(config, name) is not None:
            getattr(context, name).where = where
