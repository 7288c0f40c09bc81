"""An assessment: the plain path of run.py, through the caches (cache/) unless told not
to, and the findings, gates and verdict that rules.dl derived, read back for the reports.

Nothing here judges code: findings, hot paths, gates and verdict come out of `rules.dl`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.context import Context
from ..config.project import Config
from ..engine import Database, DatalogError, Program
from ..facts import Skipped
from ..facts.discover import DEFAULT_MAX_FILE_SIZE, EXCLUDED
from ..rules.catalogue import code_names
from ..rules.program import load_program
from .background import Background
from .cache.facade import Cache
from .progress import Progress
from .run import Evaluation, Inputs, discover, evaluate, fact_count, new_database, partial_files


@dataclass
class Finding:
    code: str
    kind: str
    title: str
    recipe: str
    file: str
    line: int
    function: str
    hot: bool
    counts: bool  # counts for the verdict (on a hot path or possibly so)
    source_line: str = ""
    suppressed: bool = False
    where: str = ""  # file:line, or nb.ipynb:cell 3:line 4 inside a notebook
    # What a profile says of its place (rules/runtime.dl): "measured-hot", "ran", "never-ran",
    # or "" (no profile, or nothing measured there), with its share of the run in per mille.
    runtime: str = ""
    share: int | None = None
    # What the Doctor says of it: "confirmed" (a check saw it at runtime), "added" (only the
    # Doctor saw it), or ""; with the checks that did.
    doctor: str = ""
    doctor_checks: tuple[str, ...] = ()

    @property
    def location(self) -> str:
        return self.where or f"{self.file}:{self.line}"


@dataclass
class AuditNote:
    kind: str
    file: str
    line: int
    function: str
    source_line: str = ""


@dataclass
class Gate:
    number: int
    name: str
    status: str
    reason_key: str
    reason: str = ""


@dataclass
class ApiGap:
    api: str
    level: str
    glyph: str
    file: str
    line: int
    hot: bool
    note: str = ""


@dataclass
class Decision:
    """What rules.dl decided beyond single findings: verdict, gates, pattern, size."""

    verdict: str = "READY"
    verdict_rule: int = 8
    matched_rules: list[tuple[int, str]] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)  # what each verdict rule stands for
    thresholds: dict[str, int] = field(default_factory=dict)  # the framework's numbers, by name
    gates: list[Gate] = field(default_factory=list)
    pattern: str = "unknown"
    pattern_evidence: list[tuple[str, str, int]] = field(default_factory=list)
    size_low: int | None = None
    size_high: int | None = None
    size_source: str = "default"
    size_where: str = ""
    per_gpu: tuple[int, int] | None = None
    api_gaps: list[ApiGap] = field(default_factory=list)
    batching: list[tuple[str, int]] = field(default_factory=list)
    touchpoints: tuple[int, int] = (0, 0)
    readiness: list[tuple[str, str]] = field(default_factory=list)
    blocks_sites: int = 0
    refactor_sites: int = 0
    runtime: RuntimeFindings = field(default_factory=lambda: RuntimeFindings())


@dataclass
class RuntimeFindings:
    """What the runtime evidence established (rules/runtime.dl), for the reports."""

    # (host, array calls, the assessed code's own) shares of the profiled run, per mille.
    measured_split: tuple[int, int, int] | None = None
    work_total: int | None = None  # the profiled run without its imports, in the profile's unit
    stale_files: list[str] = field(default_factory=list)  # edited since the profiled run
    confirmed: int = 0  # findings a Doctor check saw at runtime
    # Doctor diagnostics at assessed lines no finding stands for (check, file, line, description).
    doctor_only: list[tuple[str, str, int, str]] = field(default_factory=list)
    # Doctor diagnostics outside the assessed files (path, line, check).
    doctor_elsewhere: list[tuple[str, int, str]] = field(default_factory=list)


@dataclass
class Assessment:
    root: Path
    context: Context
    files: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    lines: int = 0
    fact_count: int = 0
    findings: list[Finding] = field(default_factory=list)
    audit_notes: list[AuditNote] = field(default_factory=list)
    # Sites no rule could judge for want of evidence (kind "loop" or "call", file, line).
    unresolved: list[tuple[str, str, int]] = field(default_factory=list)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # relpath -> text
    db: Database | None = None
    decision: Decision = field(default_factory=Decision)
    cache_hits: int = 0  # files whose facts came from the fact store
    how: str = "evaluated"  # or "saved results reused", "saved results updated"
    notebooks: dict[str, Any] = field(default_factory=dict)
    partial: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    _lines: dict[str, list[str]] = field(default_factory=dict, repr=False)
    suppressions: dict[str, list[Any]] = field(default_factory=dict)
    unused_suppressions: list[tuple[str, Any]] = field(default_factory=list)
    ignored: int = 0  # files and folders left out by .gitignore files
    # The codes of the rules evaluated, (code, kind, title, recipe) as their code_info says:
    # the shipped catalogue, with a --rules file's own codes (T001, ...) when it adds some.
    codes: list[tuple[str, str, str, str]] = field(default_factory=list)
    # The end of a run (saving its results, closing the caches) while the report is made:
    # see assess(save_later=True).
    saving: Background | None = field(default=None, repr=False)

    def wait_saved(self) -> None:
        """Return once the results are saved and the caches closed (at once unless
        assess(save_later=True) left that to a thread)."""
        if self.saving is not None:
            saving, self.saving = self.saving, None
            saving.wait()

    def unresolved_counts(self) -> tuple[int, int]:
        """(loops, calls) no rule could judge."""
        loops = sum(1 for kind, _, _ in self.unresolved if kind == "loop")
        return loops, len(self.unresolved) - loops

    def where(self, file: str, line: int) -> str:
        """`file:line`, or `nb.ipynb:cell 3:line 4` inside a notebook."""
        notebook = self.notebooks.get(file)
        if notebook is not None:
            try:
                return f"{file}:{notebook.label(line)}"
            except ValueError:
                pass
        return f"{file}:{line}"

    @property
    def verdict(self) -> str:
        return self.decision.verdict

    def raw_line(self, file: str, line: int) -> str:
        """Line `line` of `file` as written (files are split into lines only when asked)."""
        lines = self._lines.get(file)
        if lines is None:
            text = self.sources.get(file)
            if text is None:
                return ""
            lines = self._lines[file] = text.split("\n")
        return lines[line - 1] if 1 <= line <= len(lines) else ""

    def source_line(self, file: str, line: int) -> str:
        return self.raw_line(file, line).strip()


def assess(
    path: Path,
    context: Context | None = None,
    rules_path: Path | None = None,
    cache_dir: Path | None = None,
    use_cache: bool = False,
    jobs: int | None = None,
    config: Config | None = None,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    progress: Progress | None = None,
    keep_database: bool = True,
    warn: Callable[[str], None] | None = None,
    members: list[Path] | None = None,
    respect_gitignore: bool = True,
    report: bool = True,
    save_later: bool = False,
) -> Assessment:
    """Assess a file or tree. With `use_cache`, through the caches (cache/): the store in
    PATH/.cpq (or `cache_dir`) and the user cache.  `warn` takes one line about a cache that
    could not be used (by default, on stderr, past the progress line).  `progress` shows each
    phase (the caller closes it; a failed run erases it).  `members`: only these paths under
    the folder `path` (several PATHs, cli.inputs); `respect_gitignore`: leave out what
    .gitignore files ignore.

    `keep_database=False`: the caller needs the findings, gates and verdict only, so results
    just saved to the store are not opened again (`result.db` is then None).

    `report=False`: the caller reads the database itself (why, query), so the report's parts
    (findings, notes, the decision) are not read back from it (`read_report` does it later).

    `save_later` (with `keep_database=False`): the results are saved and the caches closed in a
    thread while the caller makes the report from `result`; it calls `result.wait_saved()`
    before it ends (a process that ends first leaves the results unsaved, never half saved)."""
    shown = progress or Progress.silent()
    warn = warn or (lambda line: shown.say(f"cpq: {line}"))
    try:
        started = time.perf_counter()
        context = context or Context()
        shown.phase("reading the rules")
        program = load_program(rules_path)
        shown.phase("discovering files")
        codes = code_names(program)
        inputs = discover(
            path, config, max_file_size, members=members, respect_gitignore=respect_gitignore, codes=codes
        )
        cache = Cache.open(path, cache_dir, warn) if use_cache else None
        result = Assessment(root=path, context=context)
        if cache is None:
            found = evaluate(inputs, lambda: new_database(program, context, inputs), None, jobs, shown)
            shown.phase("reading results")
            read_back(result, found, inputs, report)
            result.db = found.db
        else:
            closing: Cache | None = cache
            try:
                found = cache.evaluate(program, context, config, inputs, jobs, shown)
                # Read while the evaluated database is open and in memory, before it is saved.
                shown.phase("reading results")
                if save_later and not keep_database:
                    # The results are read at once; then they are saved (checkpointed: seconds
                    # on a large tree, on one core) while the report is made from what was read.
                    # Nothing reads the database while it is checkpointed: a checkpoint that
                    # fails (a full disk) leaves DuckDB unusable, and the report must not fail.
                    read = ResultRows(found.db, report)
                    result.saving = Background(lambda: _keep_and_close(cache, found, program), "cpq-saving")
                    closing = None
                    read_back(result, found, inputs, report, read)
                else:
                    read_back(result, found, inputs, report)
                    shown.phase("saving results")
                    result.db = cache.keep(found, program, reopen=keep_database)
            finally:
                if closing is not None:
                    closing.close()
    except BaseException:
        shown.close()  # what follows (an error, a traceback) starts on a clean line
        raise
    result.timings = found.timings
    result.seconds = time.perf_counter() - started
    return result


def _keep_and_close(cache: Cache, found: Evaluation, program: Program) -> None:
    """Save the results and close the fact store side by side: two files, each written and
    sealed by DuckDB and hashlib, which leave the interpreter to the report (the store's
    close came after the save: some 30 ms on the path to the end of an edit's run on NumPy).
    The store's entries are written already (FactStore.write_pending_soon)."""
    store_closed = Background(cache.close_store, "cpq-store-closing")
    try:
        cache.keep(found, program, reopen=False)
    finally:
        try:
            store_closed.wait()
        finally:
            cache.close()


def nothing_to_assess(a: Assessment, shown: str = "") -> str:
    """Why no file was assessed (`shown`: the PATHs as the user gave them); empty when some
    file was. The rules would call an empty tree READY: no report may say so."""
    if a.files:
        return ""
    where = shown or str(a.root)
    if not a.skipped:
        if a.ignored:
            return (
                f"no Python files (.py, .ipynb) under {where} that .gitignore files leave in "
                "(--no-respect-gitignore assesses the ignored ones)"
            )
        return f"no Python files (.py, .ipynb) under {where}"
    count = len(a.skipped)
    files = "the one Python file" if count == 1 else f"all {count} Python files"
    if all(s.reason == EXCLUDED for s in a.skipped):
        return f"{files} under {where} {'is' if count == 1 else 'are'} excluded by [tool.cpq] exclude"
    first = next(s for s in a.skipped if s.reason != EXCLUDED)
    more = f" (and {count - 1} more: --format json lists them)" if count > 1 else ""
    return f"{files} under {where} skipped: {first.relpath}: {first.reason}{more}"


# The relations `read_back` reads (with `report`, REPORT_RELATIONS too), where the program has
# them: they are read at once (ResultRows), so that the results can be checkpointed while the
# report is made from them (see assess).
RESULT_RELATIONS = ("source_file", "skipped_file", "partial_file")
REPORT_RELATIONS = (
    *("code_info", "finding", "finding_hot", "finding_counts", "suppressed", "audit_note"),
    *("finding_measured", "finding_measured_hot", "finding_ran", "finding_never_ran"),
    *("doctor_confirms", "doctor_finding", "doctor_uncoded", "doctor_unassessed", "unresolved"),
    *("verdict", "verdict_rule", "verdict_reason", "threshold", "gate_status"),
    *("compute_pattern", "pattern_evidence", "problem_size", "inferred_elements_at", "per_gpu"),
    *("api_gap", "batching_path", "touchpoints", "readiness", "blocks_sites", "refactor_sites"),
    *("measured_split", "work_total", "stale_profile_file"),
)


class ResultRows:
    """What `read_back` reads from an evaluated database, read from it at once: the rows of
    RESULT_RELATIONS (and with `report`, of REPORT_RELATIONS) and the number of input facts."""

    def __init__(self, db: Database, report: bool) -> None:
        self.program = db.program
        self._db = db
        names = RESULT_RELATIONS + (REPORT_RELATIONS if report else ())
        self._rows = {name: db.rows(name) for name in names if name in db.program.relations}
        self.fact_count = fact_count(db)

    def rows(self, relation: str) -> list[tuple[Any, ...]]:
        found = self._rows.get(relation)
        if found is not None:
            return found
        if relation in self.program.relations:  # a fault of cpq's, which every run would show
            raise RuntimeError(f"internal error: '{relation}' is read back but was not read at once")
        return self._db.rows(relation)  # the error of a --rules program without it


def read_back(
    result: Assessment, found: Evaluation, inputs: Inputs, report: bool = True, read: ResultRows | None = None
) -> None:
    """Fill `result` from the evaluated database (the same whichever way it came), or from
    what was `read` of it already; the report's parts only with `report`."""
    db = read if read is not None else ResultRows(found.db, report)
    source_files = sorted(db.rows("source_file"))
    result.files = [file for file, _, _ in source_files]
    result.lines = sum(lines for _, _, lines in source_files)
    result.skipped = [Skipped(file, reason) for file, reason in sorted(db.rows("skipped_file"))]
    result.sources = {file: inputs.sources[file] for file in result.files if file in inputs.sources}
    result.fact_count = db.fact_count
    result.cache_hits = found.from_source
    result.how = found.how
    result.notebooks = inputs.notebooks
    result.ignored = inputs.ignored
    result.partial = partial_files(db.rows("partial_file"), inputs, result.files)
    result.suppressions = inputs.suppressions
    if report:
        read_report(result, db)


def read_report(result: Assessment, db: ResultRows) -> None:
    """The report's parts of `result`: findings, notes, blind spots and the decision."""
    from ..config.suppress import match_suppressions

    result.findings = read_findings(db, result)
    keys = [(f.code, f.file, f.line) for f in result.findings]
    _, result.unused_suppressions = match_suppressions(keys, result.suppressions)
    result.audit_notes = [
        AuditNote(kind, file, line, func, result.source_line(file, line))
        for kind, file, line, func in db.rows("audit_note")
    ]
    # Optional in a user's --rules file: a program without it has no blind spots to count.
    rows = db.rows("unresolved") if "unresolved" in db.program.relations else []
    result.unresolved = sorted(rows, key=lambda row: (row[1], row[2], row[0]))
    result.decision = read_decision(db)


def read_findings(db: ResultRows, result: Assessment) -> list[Finding]:
    result.codes = db.rows("code_info")
    info = {code: (kind, title, recipe) for code, kind, title, recipe in result.codes}
    hot = set(db.rows("finding_hot"))
    counts = set(db.rows("finding_counts"))
    suppressed = set(db.rows("suppressed"))
    findings = []
    runtime = _finding_runtime(db)
    doctor = _finding_doctor(db)
    for code, file, line, func in db.rows("finding"):
        kind, title, recipe = info[code]
        key = (code, file, line)
        status, share = runtime.get(key, ("", None))
        doctor_status, checks = doctor.get(key, ("", ()))
        findings.append(
            Finding(
                code=code,
                kind=kind,
                title=title,
                recipe=recipe,
                file=file,
                line=line,
                function=func,
                hot=(code, file, line) in hot,
                # A suppressed finding never counts, whatever its place (rules/verdict.dl
                # leaves it out of the verdict likewise).
                # Nor one in code a profile says never ran.
                counts=key in counts and key not in suppressed and status != "never-ran",
                source_line=result.source_line(file, line),
                suppressed=key in suppressed,
                where=result.where(file, line),
                runtime=status,
                share=share,
                doctor=doctor_status,
                doctor_checks=checks,
            )
        )
    # Measured hot first, code that never ran last; by place within each (all alike without a profile).
    rank = {"measured-hot": 0, "never-ran": 2}
    findings.sort(key=lambda f: (rank.get(f.runtime, 1), f.file, f.line, f.code))
    return findings


def _finding_runtime(db: ResultRows) -> dict[tuple[str, str, int], tuple[str, int | None]]:
    """What the profile says of each finding's place (empty without a profile, or for a --rules
    program without rules/runtime.dl)."""
    if "finding_measured" not in db.program.relations:
        return {}
    out: dict[tuple[str, str, int], tuple[str, int | None]] = {}
    hot = set(db.rows("finding_measured_hot"))
    for code, file, line, share in db.rows("finding_measured"):
        key = (code, file, line)
        out[key] = ("measured-hot" if key in hot else "ran", share)
    for key in db.rows("finding_ran"):
        out.setdefault(key, ("ran", None))
    for key in db.rows("finding_never_ran"):
        out[key] = ("never-ran", None)
    return out


def _finding_doctor(db: ResultRows) -> dict[tuple[str, str, int], tuple[str, tuple[str, ...]]]:
    """Which Doctor checks confirm each finding, or added it."""
    if "doctor_confirms" not in db.program.relations:
        return {}
    checks: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for code, file, line, check in db.rows("doctor_confirms"):
        checks[(code, file, line)].add(check)
    out = {key: ("confirmed", tuple(sorted(found))) for key, found in checks.items()}
    for code, file, line, check in db.rows("doctor_finding"):
        out.setdefault((code, file, line), ("added", (check,)))
    return out


def _one(rows: list[tuple], default: tuple) -> tuple:
    return rows[0] if rows else default


def read_decision(db: ResultRows) -> Decision:
    from ..manifest import load

    d = Decision()
    verdicts = db.rows("verdict")
    if len(verdicts) != 1:
        # Every tree gets exactly one verdict from the shipped rules: anything else is a fault
        # of the rules (a user's --rules file, or a bug), never a READY to report.
        found = ", ".join(f"{v} (rule {r})" for v, r in verdicts) or "none"
        raise DatalogError(
            f"internal error: the rules must derive exactly one verdict, they derived {found}",
            source=db.program.source,
        )
    d.verdict, d.verdict_rule = verdicts[0]
    d.matched_rules = sorted((r, v) for r, v in db.rows("verdict_rule"))
    d.reasons = dict(db.rows("verdict_reason"))
    d.thresholds = dict(db.rows("threshold"))
    d.gates = [Gate(n, name, status, key) for n, name, status, key in sorted(db.rows("gate_status"))]
    d.pattern = _one(db.rows("compute_pattern"), ("unknown",))[0]
    d.pattern_evidence = sorted(db.rows("pattern_evidence"))
    size = db.rows("problem_size")
    if size:
        d.size_low, d.size_high, d.size_source = size[0]
    at = db.rows("inferred_elements_at")
    if at and d.size_source == "inferred":
        d.size_where = f"{at[0][0]}:{at[0][1]}"
    per_gpu = db.rows("per_gpu")
    d.per_gpu = per_gpu[0] if per_gpu else None
    manifest = load()
    for api, level, glyph, file, line, hot in db.rows("api_gap"):
        entry = manifest.lookup(api)
        d.api_gaps.append(ApiGap(api, level, glyph, file, line, bool(hot), entry.note if entry else ""))
    d.api_gaps.sort(key=lambda g: (not g.hot, g.api, g.file, g.line))
    d.batching = sorted(db.rows("batching_path"))
    d.touchpoints = _one(db.rows("touchpoints"), (0, 0))
    d.readiness = sorted(db.rows("readiness"))
    d.blocks_sites = _one(db.rows("blocks_sites"), (0,))[0]
    d.refactor_sites = _one(db.rows("refactor_sites"), (0,))[0]
    if "measured_split" in db.program.relations:
        d.runtime = read_runtime(db)
    return d


def read_runtime(db: ResultRows) -> RuntimeFindings:
    """What rules/runtime.dl established from the profile and the Doctor report (empty without)."""
    r = RuntimeFindings()
    split = db.rows("measured_split")
    r.measured_split = split[0] if split else None
    work = db.rows("work_total")
    r.work_total = work[0][0] if work else None
    r.stale_files = sorted(file for (file,) in db.rows("stale_profile_file"))
    r.confirmed = len({(c, f, line) for c, f, line, _ in db.rows("doctor_confirms")})
    r.doctor_only = sorted(db.rows("doctor_uncoded"))
    r.doctor_elsewhere = sorted(db.rows("doctor_unassessed"))
    return r


def assess_cached(
    path: Path,
    context: Context | None = None,
    rules_path: Path | None = None,
    cache_dir: Path | None = None,
    config: Config | None = None,
    report: bool = True,
) -> Assessment:
    """An assessment whose database is reused from `.cpq/` when nothing changed (why, query)."""
    return assess(
        path, context, rules_path, cache_dir=cache_dir, use_cache=True, config=config, report=report
    )
