"""The pipeline: files → facts → rules.dl evaluated in DuckDB → an `Assessment`.

Nothing here judges code: findings, hot paths and (later) gates and verdict
come out of `rules.dl`; this module gathers inputs and reads results back.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from . import store as fact_store
from .config import Config
from .context import Context
from .engine import Database, DatalogError, Program, parse_program
from .facts import Skipped, SourceText, iter_sources, line_count
from .facts.discover import DEFAULT_MAX_FILE_SIZE
from .facts.store import FactSet, unpack_facts
from .store import FactStore, content_digest, default_cache_dir, open_store

if TYPE_CHECKING:
    from .facts.parallel import Extraction
    from .reuse import FileLayout
    from .suppress import Suppression

CONTEXT_RELATION = "context_number"
DEFAULT_MEMORY_LIMIT = "1GB"
# Below this much source (about 25,000 lines), results files use SMALL_BLOCK_SIZE blocks.
SMALL_TREE_BYTES = 1_000_000
SMALL_BLOCK_SIZE = 16 * 1024


@lru_cache(maxsize=4)
def _program_from_text(text: str, source: str) -> Program:
    """Parse and check rules.dl, reusing a pickled copy from an earlier run when the text matches
    (parsing ~400 rules costs more than the rest of a small assessment)."""
    key = f"{__version__}\0{engine_stamp()}\0{source}\0{text}"
    key = hashlib.sha256(key.encode()).hexdigest()[:24]
    cached = _program_cache_dir() / f"program-{key}.pickle"
    try:
        program = pickle.loads(cached.read_bytes())
        if isinstance(program, Program) and program.text == text:
            _mark_used(cached)
            return program
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        pass
    program = parse_program(text, source=source)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(pickle.dumps(program))
        partial.replace(cached)
        _prune_program_cache("program-*.pickle")
    except OSError:
        pass
    return program


@lru_cache(maxsize=1)
def engine_stamp() -> str:
    """Changes whenever the engine's code changes: a program parsed, or a database made, by
    other code is not reused (keys add cpq's version beside it)."""
    return fact_store.code_digest("cpq.engine", (".py", ".lark"))


def _program_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cpq"


# Entries of each kind the program cache keeps, the most recently used: each cpq version,
# DuckDB version and rules file leaves its own.
PROGRAM_CACHE_KEPT = 8


def _mark_used(entry: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(entry)


def _prune_program_cache(pattern: str) -> None:
    """Remove all but the PROGRAM_CACHE_KEPT most recently used entries matching `pattern`."""
    fact_store.remove_all_but_newest(_program_cache_dir(), pattern, PROGRAM_CACHE_KEPT)


def rules_text() -> str:
    return resources.files("cpq").joinpath("rules.dl").read_text(encoding="utf-8")


# Relations the pipeline loads or reads: a user's --rules file must declare them.
REQUIRED_RELATIONS = (
    "source_file", "skipped_file", "partial_file", "context_number", "context_symbol",
    "suppressed", "disabled", "api_support", "api_alias", "code_info", "finding", "finding_hot",
    "finding_counts", "audit_note", "verdict", "verdict_rule", "gate_status", "compute_pattern",
    "pattern_evidence", "problem_size", "inferred_elements_at", "per_gpu", "api_gap",
    "batching_path", "touchpoints", "readiness", "blocks_sites", "refactor_sites",
)


def load_program(rules_path: Path | None = None) -> Program:
    if rules_path is None:
        return _program_from_text(rules_text(), "rules.dl")
    try:
        text = rules_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DatalogError(
            f"not UTF-8 text ({exc.reason})", source=str(rules_path), line=1, column=1
        ) from None
    except OSError as exc:
        raise DatalogError(
            f"cannot read: {exc.strerror}", source=str(rules_path), line=1, column=1
        ) from None
    program = _program_from_text(text, str(rules_path))
    from .facts.schema import INPUT_RELATIONS

    missing = [r for r in (*INPUT_RELATIONS, *REQUIRED_RELATIONS) if r not in program.relations]
    if missing:
        raise DatalogError(
            "the rules file does not declare relations cpq needs: " + ", ".join(missing[:8])
            + (" …" if len(missing) > 8 else "") + " (extend a copy of the shipped rules.dl)",
            source=str(rules_path),
            line=1,
            column=1,
        )
    return program


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
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # relpath -> text
    db: Database | None = None
    decision: Decision = field(default_factory=Decision)
    cache_hits: int = 0
    reused_results: bool = False
    reparsed: int = 0  # changed files parsed again before their unchanged facts found the results
    updated: bool = False  # the previous results were brought up to date (update.py)
    notebooks: dict[str, Any] = field(default_factory=dict)
    partial: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    _lines: dict[str, list[str]] = field(default_factory=dict, repr=False)
    suppressions: dict[str, list[Any]] = field(default_factory=dict)
    unused_suppressions: list[tuple[str, Any]] = field(default_factory=list)

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


def manifest_facts() -> dict[str, list[tuple]]:
    from .manifest import load

    return load().datalog_facts()


@dataclass
class Collected:
    """What discovery and extraction produced for a tree, before evaluation."""

    found: list[SourceText | Skipped]
    facts: FactSet = field(default_factory=FactSet)
    files: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # relpath -> text
    lines: int = 0
    cache_hits: int = 0
    extracted: bool = False
    notebooks: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # relpath -> why extraction skipped it
    extracted_first: set[str] = field(default_factory=set)  # put in the store by this run
    # Facts copied from an earlier run's results (reuse.py): the plan, then where ids moved.
    copied: dict[str, FileLayout] = field(default_factory=dict)
    moves: dict[str, tuple[FileLayout, int]] = field(default_factory=dict)
    layout: dict[str, FileLayout] = field(default_factory=dict)  # every extracted file's ids
    # Updating earlier results in place (update.py): where each extracted file's ids go.
    placer: Callable[[str, int], int] | None = None
    previous_layout: dict[str, FileLayout] = field(default_factory=dict)  # of the results copied
    _deep: set[str] | None = None

    def deep_files(self) -> set[str]:
        """Files extracted in depth (see facts.relevance), computed once."""
        if self._deep is None:
            from .facts.relevance import deep_files

            self._deep = deep_files(
                {s.relpath: s.text for s in self.found if isinstance(s, SourceText)}
            )
        return self._deep

    def digest_parts(self) -> list[str]:
        """What the results depend on from the tree: every file's content hash, every skip."""
        return sorted(
            f"{item.relpath}:{item.sha}"
            if isinstance(item, SourceText)
            else f"skip:{item.relpath}:{item.reason}"
            for item in self.found
        )


def discover(
    root: Path, config: Config | None = None, max_file_size: int = DEFAULT_MAX_FILE_SIZE
) -> Collected:
    excluded = _excluder(root, config) if config is not None else None
    collected = Collected(list(iter_sources(root, max_file_size, excluded)))
    for item in collected.found:
        if isinstance(item, SourceText):
            collected.sources[item.relpath] = item.text
            if item.notebook is not None:
                collected.notebooks[item.relpath] = item.notebook
    return collected


def _excluder(root: Path, config: Config) -> Callable[[str], bool] | None:
    if not (config.exclude or config.extend_exclude):
        return None
    base = root if root.is_dir() else root.parent

    def excluded(rel: str) -> bool:
        folder = rel.endswith("/")
        relpath = config.relpath(base / rel.rstrip("/"))
        return relpath is not None and config.is_excluded(relpath + ("/" if folder else ""))

    return excluded


def start_extraction(
    collected: Collected, store: FactStore | None = None, jobs: int | None = None
) -> Extraction:
    """Set the workers going on the files the store does not have (and whose facts are not
    to be copied from an earlier run, `collected.copied`)."""
    from .facts.parallel import Extraction

    texts = [
        item
        for item in collected.found
        if isinstance(item, SourceText) and item.relpath not in collected.copied
    ]
    return Extraction(texts, collected.deep_files(), store, jobs)


def extract_facts(
    collected: Collected,
    store: FactStore | None = None,
    jobs: int | None = None,
    show_progress: bool = False,
    extraction: Extraction | None = None,
) -> Collected:
    """Gather every file's facts into `collected.facts` (and its sink), in discovery order."""

    with contextlib.ExitStack() as stack:
        if extraction is None:
            extraction = stack.enter_context(start_extraction(collected, store, jobs))
        _gather(collected, extraction, show_progress, stack)
    if store is not None:
        try:
            store.flush({item.relpath for item in collected.found})
        except Exception:  # the cache is an optimisation; failing to write it is not an error
            pass
    for item in collected.found:
        if isinstance(item, Skipped):
            collected.skipped.append(item)
        elif item.relpath in collected.failed:
            collected.skipped.append(Skipped(item.relpath, collected.failed[item.relpath]))
            collected.sources.pop(item.relpath, None)
    for skip in collected.skipped:
        collected.facts.add("skipped_file", (skip.relpath, skip.reason))
    # Files this run extracted before it looked for saved results came back from the store.
    reused = len(collected.copied) if collected.placer is not None else len(collected.moves)
    collected.cache_hits = reused + (
        max(0, store.hits - len(collected.extracted_first)) if store else 0
    )
    collected.extracted = True
    return collected


def _gather(
    collected: Collected,
    extraction: Extraction,
    show_progress: bool,
    stack: contextlib.ExitStack,
) -> None:
    from .facts.parallel import cache_key, extract_all
    from .facts.store import facts_sha
    from .reuse import FileLayout

    texts = [item for item in collected.found if isinstance(item, SourceText)]
    failed = collected.failed
    facts = collected.facts
    advance: Callable[[int], None] | None = None
    if show_progress:
        from .progress import Progress

        advance = stack.enter_context(Progress(len(texts), "extracting")).advance
    extracted = iter(extraction)
    # Files go in discovery order: node ids are then the same with or without the cache, and
    # with or without facts copied from an earlier run.
    for source in texts:
        relpath = source.relpath
        if advance is not None:
            advance(1)
        earlier = collected.copied.get(relpath)
        if earlier is not None:
            if collected.placer is not None:  # its facts stay where they are
                collected.layout[relpath] = earlier
            else:
                base = facts.skip(earlier.nodes)
                collected.moves[relpath] = (earlier, base)
                collected.layout[relpath] = FileLayout(
                    earlier.key, base, earlier.nodes, earlier.facts_sha
                )
            collected.files.append(relpath)
            collected.lines += line_count(source.text)
            continue
        got, data = next(extracted)
        assert got == relpath, (got, relpath)
        if isinstance(data, str):
            failed[relpath] = data
            continue
        try:
            rows, node_count, lines = unpack_facts(data)
        except (EOFError, ValueError, TypeError):
            # A damaged cache entry: extract the file again rather than trust it.
            data = extract_all([source], extraction.deep, None, 1)[relpath]
            if isinstance(data, str):
                failed[relpath] = data
                continue
            rows, node_count, lines = unpack_facts(data)
        placed = collected.placer(relpath, node_count) if collected.placer is not None else None
        base = facts.add_file(rows, node_count, placed)
        collected.layout[relpath] = FileLayout(
            cache_key(source, relpath in extraction.deep), base, node_count, facts_sha(data)
        )
        collected.files.append(relpath)
        collected.lines += lines


def collect_facts(root: Path, store: FactStore | None = None, jobs: int | None = None) -> Collected:
    return extract_facts(discover(root), store, jobs)


def _evaluation_parts(context: Context, program_text: str, config: Config | None) -> list[str]:
    """What evaluated results depend on besides the files: cpq and its engine, the extractor,
    the program, the context, the manifest and the configuration."""
    from .manifest import load

    return [
        __version__,
        engine_stamp(),
        fact_store.extractor_stamp(),
        program_text,
        repr(context.facts()),
        repr(context.pattern),
        repr(sorted(load().provenance.items())),
        repr(config) if config is not None else "",
    ]


def _results_digest(
    collected: Collected, context: Context, program_text: str, config: Config | None
) -> str:
    return content_digest(
        [*_evaluation_parts(context, program_text, config), *collected.digest_parts()]
    )


def _suppression_facts(
    collected: Collected, suppressions: dict[str, list[Suppression]]
) -> list[tuple[str, str, int]]:
    from .cli.catalogue import catalogue_rows

    codes = [row[0] for row in catalogue_rows()]
    rows = []
    for file, entries in suppressions.items():
        for s in entries:
            for code in s.codes if s.codes is not None else codes:
                rows.append((code, file, s.line))
    return rows


def _disabled_facts(root: Path, collected: Collected, config: Config | None) -> list[tuple[str, str]]:
    if config is None or not (config.select or config.ignore or config.per_file_ignores):
        return []
    from .cli.catalogue import catalogue_rows

    base = root if root.is_dir() else root.parent
    codes = [row[0] for row in catalogue_rows()]
    rows = []
    for item in collected.found:
        if isinstance(item, SourceText):
            target = base / item.relpath if root.is_dir() else root
            relpath = config.relpath(target)
            rows += [(code, item.relpath) for code in codes if not config.code_enabled(code, relpath)]
    return rows


def assess(
    path: Path,
    context: Context | None = None,
    rules_path: Path | None = None,
    cache_dir: Path | None = None,
    use_cache: bool = False,
    jobs: int | None = None,
    config: Config | None = None,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    show_progress: bool = False,
    keep_database: bool = True,
) -> Assessment:
    """Assess a file or tree. With `use_cache`, facts and results are kept in `.cpq/`.

    `keep_database=False`: the caller needs the findings, gates and verdict only, so results
    just saved to the store are not opened again (`result.db` is then None)."""
    from .suppress import match_suppressions, suppressions_by_file

    def read_back(db: Database) -> None:
        result.files, result.skipped = collected.files, collected.skipped
        result.sources, result.lines = collected.sources, collected.lines
        result.fact_count = (
            collected.facts.count() + copied if collected.extracted else _fact_count(db)
        )
        result.cache_hits = collected.cache_hits
        result.notebooks = collected.notebooks
        result.partial = db.rows("partial_file")
        result.findings = read_findings(db, result)
        keys = [(f.code, f.file, f.line) for f in result.findings]
        _, result.unused_suppressions = match_suppressions(keys, suppressions)
        result.suppressions = suppressions
        result.audit_notes = [
            AuditNote(kind, file, line, func, result.source_line(file, line))
            for kind, file, line, func in db.rows("audit_note")
        ]
        result.decision = read_decision(db)

    started = time.perf_counter()
    context = context or Context()
    result = Assessment(root=path, context=context)
    program = load_program(rules_path)
    store = open_store(cache_dir or default_cache_dir(path)) if use_cache else None
    try:
        t0 = time.perf_counter()
        collected = discover(path, config, max_file_size)
        suppressions = suppressions_by_file(collected.sources)
        digest = _results_digest(collected, context, program.text, config)
        suppressed_rows = _suppression_facts(collected, suppressions)
        disabled_rows = _disabled_facts(path, collected, config)
        keyer = _FactsKeyer(collected, context, program, config, suppressed_rows, disabled_rows)
        db = _reuse_results(program, store, digest, keyer, collected, jobs) if store else None
        copied = 0
        if db is not None:
            # The saved run had the same facts: its evaluated database answers everything.
            result.reused_results = True
            result.reparsed = len(collected.extracted_first)
            _summarise_from_db(collected, db)
            t1 = t2 = t3 = time.perf_counter()
            read_back(db)
        else:
            program_key = _program_key(program)
            update_key = _update_key(context, program.text, config)
            partial = None
            if store is not None:
                # A few files changed since the last run: bring its results up to date.
                try:
                    db, partial = _updated(
                        program, store, digest, update_key, collected,
                        (suppressed_rows, disabled_rows), jobs, show_progress,
                    )
                except Exception:  # evaluate from scratch instead
                    db, partial = None, None
                if db is None and collected.placer is not None:
                    # The update given up had used this discovery's state: start again.
                    collected = discover(path, config, max_file_size)
                    keyer.found = collected.found
            if db is not None:
                # Extraction and the update overlap little: the update is the evaluation.
                t1 = t2 = time.perf_counter() - db.last_update_seconds
                result.updated = True
                copied = _fact_count(db) - collected.facts.count()
            else:
                # With a store, the evaluation happens in the results file itself, so keeping
                # the results costs no copy, and DuckDB may move data to disk under its memory
                # limit.
                previous = _plan_copy(store, program_key, collected) if store is not None else None
                with start_extraction(collected, store, jobs) as extraction:
                    # The workers parse while the database is made ready.
                    partial = _results_partial(store, digest) if store is not None else None
                    try:
                        source_bytes = sum(map(len, collected.sources.values()))
                        db = _new_database(program, context, partial, source_bytes)
                    except Exception:  # the store cannot take the file: evaluate in memory
                        partial = None
                        db = _new_database(program, context)
                    db.load("suppressed", suppressed_rows)
                    db.load("disabled", disabled_rows)
                    collected.facts = FactSet(sink=db.load_disjoint)
                    extract_facts(collected, store, jobs, show_progress, extraction)
                copied = _copy_unchanged(db, previous, collected, store, jobs)
                t1 = time.perf_counter()
                collected.facts.flush()
                t2 = time.perf_counter()
                db.evaluate()
            t3 = time.perf_counter()
            # Read while the evaluated database is open and in memory, before it is saved.
            read_back(db)
            if store is not None and partial is not None:
                from .reuse import write_layout

                shas = {file: layout.facts_sha for file, layout in collected.layout.items()}
                facts_digest = keyer.digest(shas, collected.failed)
                try:
                    write_layout(db, collected.layout)
                except Exception:  # only the next run's shortcut is lost
                    pass
                kept = _keep_results(db, program, store, partial, facts_digest, keep_database)
                _set_alias(store, digest, facts_digest)
                try:
                    store.set_latest_results(program_key, facts_digest)
                    store.set_latest_results(update_key, facts_digest)
                except Exception:
                    pass
                result.db = kept
            else:
                result.db = db
    finally:
        if store is not None:
            store.close()
    if result.reused_results:
        result.db = db
    result.timings = {"extract": t1 - t0, "load": t2 - t1, "evaluate": t3 - t2}
    result.seconds = time.perf_counter() - started
    return result


def _summarise_from_db(collected: Collected, db: Database) -> None:
    """Files, skips and line counts of a reused run, read back from its input relations."""
    files = db.rows("source_file")
    collected.files = [f for f, _, _ in files]
    # Counted from the sources: the saved counts may predate an edit that changed no fact.
    collected.lines = sum(
        line_count(collected.sources[f]) if f in collected.sources else n for f, _, n in files
    )
    collected.skipped = [Skipped(f, reason) for f, reason in db.rows("skipped_file")]
    for skip in collected.skipped:
        collected.sources.pop(skip.relpath, None)


def _fact_count(db: Database) -> int:
    from .facts.schema import INPUT_RELATIONS

    return sum(db.count(name) for name in INPUT_RELATIONS)


def _new_database(
    program: Program, context: Context, path: Path | None = None, source_bytes: int = 0
) -> Database:
    """A database (in memory, or in the file `path`) with the context and the manifest
    loaded, ready for the code's facts (`source_bytes` of source in all)."""
    # DuckDB gives each table of a file at least a block of its own: for a small tree, 256 KiB
    # blocks would make a results file of some 30 MB (0.05 s to write) for a few MB of data.
    # Large trees keep them: smaller blocks make their evaluation slower (2.5 s against 2.1 s
    # on NumPy).
    small = path is not None and source_bytes < SMALL_TREE_BYTES
    if small:
        assert path is not None
        db = _small_database_file(program, path)
    else:
        db = Database(program, path)
    try:
        db.con.execute(f"SET memory_limit = '{memory_limit()}'")
        if path is None:
            # Beyond the limit DuckDB writes to disk; never into the working directory.
            spill = Path(tempfile.gettempdir()) / f"cpq-duckdb-{os.getpid()}"
            db.con.execute(f"SET temp_directory = '{str(spill).replace(chr(39), chr(39) * 2)}'")
        db.load(CONTEXT_RELATION, context.facts())
        if context.pattern:
            db.load("context_symbol", [("pattern", context.pattern)])
        for relation, rows in manifest_facts().items():
            db.load(relation, rows)
    except BaseException:
        db.close()
        raise
    return db


def _small_database_file(program: Program, path: Path) -> Database:
    """A new database file with SMALL_BLOCK_SIZE blocks, copied from a template kept beside the
    program cache (made by the first run of this program): on a small tree, creating the
    tables and the program's facts is a tenth of the run."""
    import duckdb

    key = hashlib.sha256(
        f"{__version__}\0{engine_stamp()}\0{duckdb.__version__}\0{SMALL_BLOCK_SIZE}\0"
        f"{program.text}".encode()
    ).hexdigest()[:24]
    template = _program_cache_dir() / f"tables-{key}.duckdb"
    partial = template.with_suffix(f".{os.getpid()}.partial")
    try:
        if not template.exists():
            template.parent.mkdir(parents=True, exist_ok=True)
            with Database(program, partial, block_size=SMALL_BLOCK_SIZE) as made:
                made.con.execute("CHECKPOINT")
            partial.replace(template)
            _prune_program_cache("tables-*.duckdb")
        else:
            _mark_used(template)
        return Database.from_copy(program, template, path)
    except Exception:  # no cache folder, or a damaged template: make this one from scratch
        for leftover in (template, partial, partial.with_name(partial.name + ".wal"), path):
            with contextlib.suppress(OSError):
                leftover.unlink(missing_ok=True)
        return Database(program, path, block_size=SMALL_BLOCK_SIZE)


def memory_limit() -> str:
    """DuckDB's memory limit: CPQ_MEMORY_LIMIT (e.g. `4GB`), else 1 GB."""
    value = os.environ.get("CPQ_MEMORY_LIMIT", "").strip()
    if re.fullmatch(r"\d+(\.\d+)?\s*[KMGT]i?B", value, flags=re.IGNORECASE):
        return value
    return DEFAULT_MEMORY_LIMIT


def _open_saved(program: Program, path: Path) -> Database | None:
    """The saved results, checked readable end to end (DuckDB opens files lazily)."""
    db = None
    try:
        db = Database.open(program, path)
        for name in ("source_file", "skipped_file", "finding", "verdict", "gate_status"):
            db.rows(name)
        return db
    except Exception:  # a damaged or locked results file is recomputed, never trusted
        if db is not None:
            try:
                db.close()
            except Exception:
                pass
        path.unlink(missing_ok=True)
        return None


class _FactsKeyer:
    """The key of evaluated results: a digest of everything the database is made of (the
    program, the context, the manifest, each file's facts, suppressions, skips), not of the
    source text, so that an edit which changes no fact still finds its results."""

    def __init__(
        self,
        collected: Collected,
        context: Context,
        program: Program,
        config: Config | None,
        suppressed: list[tuple[str, str, int]],
        disabled: list[tuple[str, str]],
    ) -> None:
        self.found = collected.found
        self.parts = [
            *_evaluation_parts(context, program.text, config),
            repr(sorted(suppressed)),
            repr(sorted(disabled)),
        ]
        if reads_line_counts(program):
            # Rules that read source_file's line count depend on more than the facts' hash.
            self.parts += collected.digest_parts()

    def digest(self, shas: dict[str, bytes], failed: dict[str, str]) -> str:
        parts = list(self.parts)
        for item in self.found:
            if isinstance(item, Skipped):
                parts.append(f"skip:{item.relpath}:{item.reason}")
            elif item.relpath in failed:
                parts.append(f"skip:{item.relpath}:{failed[item.relpath]}")
            else:
                parts.append(f"{item.relpath}:{shas[item.relpath].hex()}")
        return content_digest(parts)


# The columns that carry a file's line count: source_file's `lines`, the scopes' `end_line`
# (the module scope's is the line count).
_LINE_COUNT_COLUMNS = {"source_file": 2, "scope": 5}


def reads_line_counts(program: Program) -> bool:
    """Whether a rule reads a column that holds a file's line count (rules.dl does not)."""
    from .engine.syntax import Aggregate, Atom, Comparison, Wildcard

    def literals(body: tuple) -> Iterator[object]:
        for literal in body:
            yield literal
            terms = (
                [literal.left, literal.right] if isinstance(literal, Comparison)
                else list(getattr(literal, "args", ()))
            )
            for term in terms:
                if isinstance(term, Aggregate):
                    yield from literals(term.body)

    for rule in program.rules:
        for literal in literals(rule.body):
            column = _LINE_COUNT_COLUMNS.get(getattr(literal, "relation", ""))
            if (
                isinstance(literal, Atom)
                and column is not None
                and len(literal.args) > column
                and not isinstance(literal.args[column], Wildcard)
            ):
                return True
    return False


# Early cutoff is tried when at most this share of the files (or this many) must be extracted
# again: beyond both, facts are streamed into the database while the workers run, which is faster.
EARLY_CUTOFF_SHARE = 0.25
EARLY_CUTOFF_FILES = 16


def _reuse_results(
    program: Program,
    store: FactStore,
    digest: str,
    keyer: _FactsKeyer,
    collected: Collected,
    jobs: int | None,
) -> Database | None:
    """The saved database for this run's facts, if there is one.  The text digest finds a run
    with identical sources at once; otherwise, when few files changed, those are extracted
    (into the store) and the digest of the facts decides."""
    from .facts.parallel import cache_key, extract_all
    from .facts.store import facts_sha

    facts_digest = store.alias(digest)
    path = store.fresh_results(facts_digest) if facts_digest is not None else None
    if path is None:
        if not store.has_results():
            return None  # nothing saved to compare the facts with: no early extraction
        texts = [item for item in collected.found if isinstance(item, SourceText)]
        deep = collected.deep_files()
        shas = store.fact_shas([(s.relpath, cache_key(s, s.relpath in deep)) for s in texts])
        missing = [s for s in texts if s.relpath not in shas]
        if len(missing) > max(EARLY_CUTOFF_SHARE * len(texts), EARLY_CUTOFF_FILES):
            return None
        failed: dict[str, str] = {}
        for relpath, data in extract_all(missing, deep, store, jobs).items():
            if isinstance(data, bytes):
                shas[relpath] = facts_sha(data)
                collected.extracted_first.add(relpath)
            else:
                failed[relpath] = data
        try:
            store.write_pending()  # the main path then finds them in the store
        except Exception:
            pass
        facts_digest = keyer.digest(shas, failed)
        path = store.fresh_results(facts_digest)
        if path is None:
            return None
        _refresh_line_counts(path, collected)
        _set_alias(store, digest, facts_digest)
    return _open_saved(program, path)


def _refresh_line_counts(path: Path, collected: Collected) -> None:
    """Line counts are no part of the results' key: bring them up to date in the file."""
    import duckdb

    try:
        con = duckdb.connect(str(path))
    except Exception:  # open elsewhere in this process, or read-only: the report still counts
        return
    try:
        rows = con.execute('SELECT file, lines FROM source_file WHERE "_iter" = 0').fetchall()
        for file, lines in rows:
            text = collected.sources.get(file)
            count = line_count(text) if text is not None else lines
            if count != lines:
                con.execute(
                    'UPDATE source_file SET lines = ? WHERE file = ? AND "_iter" = 0', [count, file]
                )
                con.execute(
                    "UPDATE scope SET end_line = ? WHERE file = ? AND kind = 'module' "
                    'AND "_iter" = 0',
                    [max(count, 1), file],
                )
    finally:
        con.close()


def _set_alias(store: FactStore, digest: str, facts_digest: str) -> None:
    try:
        store.set_alias(digest, facts_digest)
    except Exception:  # the cache is an optimisation; failing to write it is not an error
        pass


def _program_key(program: Program) -> str:
    """What the input tables of a results file depend on besides the files: cpq and its
    engine, the extractor and the program's relations."""
    return content_digest(
        [__version__, engine_stamp(), fact_store.extractor_stamp(), program.text]
    )


def _update_key(context: Context, program_text: str, config: Config | None) -> str:
    """What results must share with this run to be brought up to date by it: all but the
    files (and the suppressions and skips, which an update compares)."""
    return content_digest(["update", *_evaluation_parts(context, program_text, config)])


def _updated(
    program: Program,
    store: FactStore,
    digest: str,
    update_key: str,
    collected: Collected,
    run_facts: tuple[list[tuple[str, str, int]], list[tuple[str, str]]],
    jobs: int | None,
    show_progress: bool,
) -> tuple[Database | None, Path | None]:
    """The latest results of this program, context and configuration brought up to date
    (update.py), in the results file of this run, when few files changed; else (None, None)."""
    from . import update
    from .facts.parallel import cache_key
    from .reuse import read_layout

    path = store.latest_results(update_key)
    layout = read_layout(path) if path is not None else None
    if path is None or not layout:
        return None, None
    deep = collected.deep_files()
    texts = [item for item in collected.found if isinstance(item, SourceText)]
    unchanged = {}
    for item in texts:
        earlier = layout.get(item.relpath)
        if earlier is not None and earlier.key == cache_key(item, item.relpath in deep):
            unchanged[item.relpath] = earlier
    plan = update.plan_update(path, layout, unchanged, len(texts))
    if plan is None:
        return None, None
    collected.copied, collected.placer = unchanged, plan.place
    partial = _results_partial(store, digest)
    db: Database | None = None
    try:
        with start_extraction(collected, store, jobs) as extraction:
            db = update.open_copy(program, plan, partial)
            db.con.execute(f"SET memory_limit = '{memory_limit()}'")
            suppressed_rows, disabled_rows = run_facts
            update.stage_rows(db, "suppressed", suppressed_rows)
            update.stage_rows(db, "disabled", disabled_rows)
            sink = db.load_disjoint
            collected.facts = FactSet(sink=lambda tables: sink(tables, staged=True))
            extract_facts(collected, store, jobs, show_progress, extraction)
        collected.facts.flush()
        db.update(update.input_changes(db, plan, db.staged))
        db.end_update()
    except BaseException:
        if db is not None:
            db.end_update()
            db.close()
        for leftover in (partial, partial.with_name(partial.name + ".wal")):
            leftover.unlink(missing_ok=True)
        raise
    return db, partial


def _plan_copy(
    store: FactStore, program_key: str, collected: Collected
) -> Path | None:
    """The newest results of this program, and in `collected.copied` the files whose facts
    can be copied out of them (same path, same content, same depth)."""
    from .facts.parallel import cache_key
    from .reuse import read_layout

    try:
        path = store.latest_results(program_key)
    except Exception:
        return None
    layout = read_layout(path) if path is not None else None
    if not layout:
        return None
    collected.previous_layout = layout
    deep = collected.deep_files()
    for item in collected.found:
        if isinstance(item, SourceText):
            earlier = layout.get(item.relpath)
            if earlier is not None and earlier.key == cache_key(item, item.relpath in deep):
                collected.copied[item.relpath] = earlier
    return path if collected.copied else None


def _copy_unchanged(
    db: Database,
    previous: Path | None,
    collected: Collected,
    store: FactStore | None,
    jobs: int | None,
) -> int:
    """Copy the facts of the unchanged files from the earlier results; when that file cannot
    be read after all, their facts come from the store (or the parser) as usual."""
    from .reuse import copy_facts

    if previous is None or not collected.moves:
        return 0
    try:
        return copy_facts(db, previous, collected.moves, collected.previous_layout)
    except Exception:
        pass
    from .facts.parallel import extract_all

    by_path = {s.relpath: s for s in collected.found if isinstance(s, SourceText)}
    sources = [by_path[relpath] for relpath in collected.moves]
    packed = extract_all(sources, collected.deep_files(), store, jobs)
    for relpath, (earlier, base) in collected.moves.items():
        data = packed[relpath]
        if isinstance(data, str):  # cannot happen for a file extracted before; never trust it
            raise RuntimeError(f"{relpath}: {data}")
        rows, node_count, _ = unpack_facts(data)
        if node_count != earlier.nodes:  # the ids reserved for it would not fit
            raise RuntimeError(f"{relpath}: {node_count} node ids, {earlier.nodes} reserved")
        collected.facts.add_file(rows, node_count, base)
    return 0


def _results_partial(store: FactStore, digest: str) -> Path:
    """Where a run evaluates before its results take their place (no leftover of a killed run)."""
    partial = store.results_path(digest).with_suffix(".partial")
    for leftover in (partial, partial.with_name(partial.name + ".wal")):
        leftover.unlink(missing_ok=True)
    return partial


def _keep_results(
    db: Database, program: Program, store: FactStore, partial: Path, digest: str, reopen: bool
) -> Database | None:
    """Make the evaluated file the saved results (renamed into place whole, so a concurrent
    reader never sees half of it) and, with `reopen`, open it again read-only."""
    target = store.results_path(digest)
    try:
        db.con.execute("CHECKPOINT")
        db.close()
    except Exception:  # the cache is an optimisation; failing to write it is not an error
        return db
    try:
        partial.replace(target)
        store.prune_results()
    except Exception:
        target = partial
    return Database.open(program, target) if reopen else None


def read_findings(db: Database, result: Assessment) -> list[Finding]:
    info = {code: (kind, title, recipe) for code, kind, title, recipe in db.rows("code_info")}
    hot = set(db.rows("finding_hot"))
    counts = set(db.rows("finding_counts"))
    suppressed = set(db.rows("suppressed"))
    disabled = set(db.rows("disabled"))
    findings = []
    for code, file, line, func in db.rows("finding"):
        if (code, file) in disabled:
            continue  # turned off by [tool.cpq] select / ignore: not reported at all
        kind, title, recipe = info[code]
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
                counts=(code, file, line) in counts,
                source_line=result.source_line(file, line),
                suppressed=(code, file, line) in suppressed,
                where=result.where(file, line),
            )
        )
    findings.sort(key=lambda f: (f.file, f.line, f.code))
    return findings


def _one(rows: list[tuple], default: tuple) -> tuple:
    return rows[0] if rows else default


def read_decision(db: Database) -> Decision:
    from .manifest import load

    d = Decision()
    d.verdict, d.verdict_rule = _one(db.rows("verdict"), ("READY", 8))
    d.matched_rules = sorted((r, v) for r, v in db.rows("verdict_rule"))
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
        d.api_gaps.append(
            ApiGap(api, level, glyph, file, line, bool(hot), entry.note if entry else "")
        )
    d.api_gaps.sort(key=lambda g: (not g.hot, g.api, g.file, g.line))
    d.batching = sorted(db.rows("batching_path"))
    d.touchpoints = _one(db.rows("touchpoints"), (0, 0))
    d.readiness = sorted(db.rows("readiness"))
    d.blocks_sites = _one(db.rows("blocks_sites"), (0,))[0]
    d.refactor_sites = _one(db.rows("refactor_sites"), (0,))[0]
    return d


def assess_cached(
    path: Path,
    context: Context | None = None,
    rules_path: Path | None = None,
    cache_dir: Path | None = None,
    config: Config | None = None,
) -> Assessment:
    """An assessment whose database is reused from `.cpq/` when nothing changed (why, query)."""
    return assess(path, context, rules_path, cache_dir=cache_dir, use_cache=True, config=config)
