"""The plain path of an assessment: files → facts → rules.dl evaluated in DuckDB.

`discover` finds the files and reads them (`Inputs`); `start_extraction` sets worker processes
parsing them; `new_database` makes the database ready meanwhile (context, manifest, the run's
own facts); `load_facts` loads each file's facts as soon as it is ready; `Database.evaluate`
runs the program.  Nothing here knows of caches: a source of facts extracted earlier (the fact
store, or none) and where the database lives are given to it.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import Database
from ..engine.connect import Limits
from ..engine.evaluation import EVALUATION_THREADS
from ..facts import Skipped, SourceText, iter_sources, line_count
from ..facts.discover import DEFAULT_MAX_FILE_SIZE
from ..facts.gitignore import GitIgnore
from ..facts.node_ids import MAX_NODES, file_bases
from ..facts.packing import FactSet, max_unpacked, unpack_facts
from ..facts.schema import INPUT_RELATIONS
from ..rules.catalogue import code_names
from ..rules.program import load_program
from .progress import Progress

if TYPE_CHECKING:
    from ..config.context import Context
    from ..config.project import Config
    from ..config.suppress import Suppression
    from ..engine import Program
    from ..facts.parallel import Extraction, FactSource

CONTEXT_RELATION = "context_number"
DEFAULT_MEMORY_LIMIT = "1GB"
# The write-ahead log a results file gathers before DuckDB checkpoints it on its own.  With
# DuckDB's 16 MB, a cold run on SciPy + Astropy checkpointed at least 12 times (its log seen
# truncated 12 times; it grows to 230 MB), each compressing and writing the tables' last row
# groups again, on the cores the parsing and the evaluation need; the results are checkpointed
# once, when saved (Cache.keep).
CHECKPOINT_LOG = "512MB"


@dataclass
class Inputs:
    """What discovery found under PATH, and what the run derives from it before extracting."""

    root: Path
    found: list[SourceText | Skipped]
    sources: dict[str, str] = field(default_factory=dict)  # relpath -> text
    notebooks: dict[str, Any] = field(default_factory=dict)
    suppressions: dict[str, list[Suppression]] = field(default_factory=dict)
    suppressed_rows: list[tuple[str, str, int]] = field(default_factory=list)
    disabled_rows: list[tuple[str, str]] = field(default_factory=list)
    ignored: int = 0  # files and folders .gitignore files left out (not candidates)

    @cached_property
    def texts(self) -> list[SourceText]:
        return [item for item in self.found if isinstance(item, SourceText)]

    @cached_property
    def skips(self) -> list[Skipped]:
        return [item for item in self.found if isinstance(item, Skipped)]

    @cached_property
    def deep(self) -> set[str]:
        """Files extracted in depth: all of them. Which files matter is the rules' judgement
        (array work, the hot path, code with no array work at all), never a guess made from
        a file's imports before any rule has run: a pure-Python file beside array code can
        hold the hot loop, or be what has to be vectorized first."""
        return {s.relpath for s in self.texts}

    @cached_property
    def bases(self) -> dict[str, int]:
        """Each file's first node id (facts.node_ids)."""
        return file_bases(s.relpath for s in self.texts)

    @property
    def source_bytes(self) -> int:
        return sum(map(len, self.sources.values()))


def discover(
    root: Path,
    config: Config | None = None,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    *,
    members: list[Path] | None = None,
    respect_gitignore: bool = True,
    codes: list[str] | None = None,
) -> Inputs:
    """The files under `root` (with `members`, under those paths relative to it only), read.
    With `respect_gitignore`, what .gitignore files ignore is left out (facts.gitignore).
    `codes`: those of the rules to evaluate (rules.catalogue.code_names), which a bare
    `# cpq: ignore` and [tool.cpq] select / ignore apply to; by default the shipped ones."""
    from ..config.suppress import suppressions_by_file

    found: list[SourceText | Skipped] = []
    ignored = 0
    for path, prefix in _walk_roots(root, members):
        excluded = _excluder(path, config) if config is not None else None
        ignore = GitIgnore.above(path) if respect_gitignore and path.is_dir() else None
        found += (_under(item, prefix) for item in iter_sources(path, max_file_size, excluded, ignore))
        ignored += ignore.hits if ignore is not None else 0
    inputs = Inputs(root, _first_of_each(found) if members else found, ignored=ignored)
    for item in inputs.texts:
        inputs.sources[item.relpath] = item.text
        if item.notebook is not None:
            inputs.notebooks[item.relpath] = item.notebook
    inputs.suppressions = suppressions_by_file(inputs.sources)
    if codes is None:
        codes = code_names(load_program())
    inputs.suppressed_rows = _suppression_facts(inputs.suppressions, codes)
    inputs.disabled_rows = _disabled_facts(root, inputs, config, codes)
    return inputs


def _walk_roots(root: Path, members: list[Path] | None) -> list[tuple[Path, str]]:
    """The paths to walk, and what puts each one's file names under `root`: `root` itself
    ("": the names a walk of it gives), or each member (its path, then "/" for a folder)."""
    if not members:
        return [(root, "")]
    out = []
    for member in members:
        path = root / member
        rel = member.as_posix()
        if rel == ".":
            out.append((path, ""))
        else:
            out.append((path, rel + "/" if path.is_dir() else rel))
    return out


def _under(item: SourceText | Skipped, prefix: str) -> SourceText | Skipped:
    """`item` named from the root: `prefix` + its name, or `prefix` alone for a file member."""
    if not prefix:
        return item
    return replace(item, relpath=prefix + item.relpath if prefix.endswith("/") else prefix)


def _first_of_each(found: list[SourceText | Skipped]) -> list[SourceText | Skipped]:
    """`found` with each file once (PATHs may overlap: `cpq assess src src/a.py`), in name order
    as the walk of one folder gives."""
    unique: dict[str, SourceText | Skipped] = {}
    for item in found:
        unique.setdefault(item.relpath, item)
    return [unique[name] for name in sorted(unique)]


def _excluder(root: Path, config: Config) -> Callable[[str], bool] | None:
    if not (config.exclude or config.extend_exclude):
        return None
    base = root if root.is_dir() else root.parent

    def excluded(rel: str) -> bool:
        folder = rel.endswith("/")
        relpath = config.relpath(base / rel.rstrip("/"))
        return relpath is not None and config.is_excluded(relpath + ("/" if folder else ""))

    return excluded


def _suppression_facts(
    suppressions: dict[str, list[Suppression]], codes: list[str]
) -> list[tuple[str, str, int]]:
    rows = []
    for file, entries in suppressions.items():
        for s in entries:
            for code in s.codes if s.codes is not None else codes:
                rows.append((code, file, s.line))
    return rows


def _disabled_facts(
    root: Path, inputs: Inputs, config: Config | None, codes: list[str]
) -> list[tuple[str, str]]:
    if config is None or not (config.select or config.ignore or config.per_file_ignores):
        return []
    base = root if root.is_dir() else root.parent
    rows = []
    for item in inputs.texts:
        target = base / item.relpath if root.is_dir() else root
        relpath = config.relpath(target)
        rows += [(code, item.relpath) for code in codes if not config.code_enabled(code, relpath)]
    return rows


# -- the database ---------------------------------------------------------------------------


def memory_limit() -> str:
    """DuckDB's memory limit: CPQ_MEMORY_LIMIT (e.g. `4GB`), else 1 GB."""
    value = os.environ.get("CPQ_MEMORY_LIMIT", "").strip()
    if re.fullmatch(r"\d+(\.\d+)?\s*[KMGT]i?B", value, flags=re.IGNORECASE):
        return value
    return DEFAULT_MEMORY_LIMIT


def limits(path: Path | None) -> Limits:
    """What the evaluation's connection may use: the memory limit, beyond which DuckDB works
    from disk (for a database in memory, in the system's temporary folder, never the working
    directory), and the folder of its file (for the previous results an update attaches), whose
    write-ahead log may grow to CHECKPOINT_LOG.  A file here is a results file of the store,
    sealed when saved and checked against its seal before use: its commits are not synced."""
    if path is None:
        spill = Path(tempfile.gettempdir()) / f"cpq-duckdb-{os.getpid()}"
        return Limits(memory_limit(), str(spill), threads=EVALUATION_THREADS)
    return Limits(
        memory_limit(),
        directories=(str(path.parent),),
        threads=EVALUATION_THREADS,
        checkpoint_log=CHECKPOINT_LOG,
        synced=False,
    )


def new_database(
    program: Program,
    context: Context,
    inputs: Inputs,
    path: Path | None = None,
    block_size: int | None = None,
) -> Database:
    """A database (in memory, or in the new file `path`) with its tables made, and the context,
    the manifest and the run's own facts (suppressions, codes turned off) loaded."""
    db = Database(program, path, block_size=block_size, limits=limits(path))
    try:
        load_run_facts(db, context, inputs)
    except BaseException:
        db.close()
        raise
    return db


def load_run_facts(db: Database, context: Context, inputs: Inputs, *, program_facts: bool = True) -> None:
    """Load the context, the manifest (with `program_facts`: a template has them already)
    and the suppressions and disabled codes of this run."""
    if program_facts:
        load_program_facts(db, context)
    db.load("suppressed", inputs.suppressed_rows)
    db.load("disabled", inputs.disabled_rows)


def load_program_facts(db: Database, context: Context) -> None:
    db.load(CONTEXT_RELATION, context.facts())
    if context.pattern:
        db.load("context_symbol", [("pattern", context.pattern)])
    # A --rules program without the runtime relations cannot use the evidence (the CLI says so).
    for relation, rows in context.runtime.facts().items():
        if rows and relation in db.program.relations:
            db.load(relation, rows)
    for relation, rows in manifest_facts().items():
        db.load(relation, rows)


def manifest_facts() -> dict[str, list[tuple]]:
    from ..manifest import load

    return load().datalog_facts()


# -- facts ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileLayout:
    """Where a file's facts are in a database, and what they were made from."""

    sha: str  # of the file's bytes
    deep: bool  # extracted in depth (Inputs.deep)
    base: int  # first node id
    nodes: int  # node ids used
    failed: str = ""  # why the file could not be extracted ("" when it was)

    def made_from(self, source: SourceText, deep: bool) -> bool:
        return self.sha == source.sha and self.deep == deep


@dataclass
class Loaded:
    """What loading files' facts found."""

    layout: dict[str, FileLayout] = field(default_factory=dict)
    from_source: int = 0  # files whose facts came from the fact source, not the parser


def start_extraction(
    inputs: Inputs, files: list[SourceText], source: FactSource | None = None, jobs: int | None = None
) -> Extraction:
    """Set the workers going on `files` (those `source` has not kept).  Their facts come in
    the order of their node ids: loaded so, each relation keyed by a node lies in its table
    in the order of its ids, and a filter or a join on a few files' ids (an update's) reads
    the few row groups that can hold them, by their min and max, rather than all of them."""
    from ..facts.parallel import Extraction

    bases = inputs.bases
    return Extraction(sorted(files, key=lambda source: bases[source.relpath]), inputs.deep, source, jobs)


def load_facts(
    db: Database,
    inputs: Inputs,
    extraction: Extraction,
    *,
    staged: bool = False,
    progress: Progress | None = None,
) -> Loaded:
    """Load each file's facts, at its base (facts.node_ids), as the workers hand them over
    (`staged`: into the staging tables of an update); the files that could not be extracted
    are returned with their reason, not loaded.  `progress` counts the files, then shows the
    last facts loaded."""
    from ..facts.parallel import extract_all

    sink = db.load_disjoint
    facts = FactSet(sink=(lambda tables: sink(tables, staged=True)) if staged else sink)
    loaded = Loaded(from_source=extraction.from_source)
    for source, data in extraction:
        relpath = source.relpath
        if progress is not None:
            progress.advance()
        deep = relpath in extraction.deep
        base = inputs.bases[relpath]
        if isinstance(data, bytes):
            try:
                # Bounded by the file's size: an entry of the fact store may claim any size.
                rows, node_count, _ = unpack_facts(
                    data, max_unpacked(len(source.text)), verify=relpath not in extraction.fresh
                )
            except (EOFError, ValueError, TypeError):
                # Facts that do not unpack are extracted again rather than trusted, and kept
                # in their place.
                data = extract_all([source], extraction.deep, None, 1)[relpath]
                extraction.keep(source, data)
                if isinstance(data, bytes):
                    rows, node_count, _ = unpack_facts(data)
        if isinstance(data, str):
            loaded.layout[relpath] = FileLayout(source.sha, deep, base, 0, data)
        elif node_count > MAX_NODES:
            loaded.layout[relpath] = FileLayout(source.sha, deep, base, 0, "too large: too many syntax nodes")
        else:
            facts.add_file(rows, node_count, base)
            loaded.layout[relpath] = FileLayout(source.sha, deep, base, node_count)
    if progress is not None:
        progress.phase("loading facts")
    if staged:
        facts.flush()
    else:
        # The extraction is over and nothing else runs: the last facts load on two
        # connections, each core appending to relations of its own (0.6 s on one core for
        # the last 4.6 million values of SciPy + Astropy).
        side = db.con.cursor()
        try:
            facts.flush(also=lambda tables: db.load_disjoint(tables, con=side))
        finally:
            side.close()
    return loaded


def skipped_rows(inputs: Inputs, layout: dict[str, FileLayout]) -> list[tuple[str, str]]:
    """Every file skipped: by discovery, and by extraction."""
    rows = [(skip.relpath, skip.reason) for skip in inputs.skips]
    rows += [(relpath, entry.failed) for relpath, entry in layout.items() if entry.failed]
    return rows


def partial_files(
    marked: list[tuple[str, str]], inputs: Inputs, assessed: list[str]
) -> list[tuple[str, str]]:
    """The files assessed in part, each once with its reasons: those the extractor `marked`
    (statements it could not parse), and the notebooks of `assessed` with a cell left out (one
    that does not parse is blanked, facts.notebook, and the rest of the notebook assessed)."""
    reasons: dict[str, list[str]] = {}
    for file, reason in marked:
        reasons.setdefault(file, []).append(reason)
    for file in assessed:
        notebook = inputs.notebooks.get(file)
        for cell, why in notebook.skipped_cells if notebook is not None else ():
            reasons.setdefault(file, []).append(f"cell {cell} left out, it does not parse ({why})")
    return [(file, "; ".join(found)) for file, found in sorted(reasons.items())]


def collect_facts(root: Path) -> FactSet:
    """The facts of a tree without a database (for `cpq facts`), numbered densely."""
    from ..facts.parallel import extract_all

    inputs = discover(root)
    facts = FactSet()
    packed = extract_all(inputs.texts, inputs.deep, None)
    failed: dict[str, str] = {}
    for source in inputs.texts:
        data = packed[source.relpath]
        if isinstance(data, str):
            failed[source.relpath] = data
            continue
        rows, node_count, _ = unpack_facts(data)
        facts.add_file(rows, node_count)
    for skip in inputs.skips:
        facts.add("skipped_file", (skip.relpath, skip.reason))
    for relpath, reason in failed.items():
        facts.add("skipped_file", (relpath, reason))
    return facts


def fact_count(db: Database) -> int:
    """Input facts in the database."""
    return sum(db.counts(list(INPUT_RELATIONS)).values())


def lines_of(inputs: Inputs, files: list[str]) -> int:
    return sum(line_count(inputs.sources[f]) for f in files if f in inputs.sources)


@dataclass
class Evaluation:
    """An evaluated database and how it came to be."""

    db: Database
    how: str = "evaluated"  # or "saved results reused", "saved results updated"
    layout: dict[str, FileLayout] = field(default_factory=dict)  # its files' ids
    path: Path | None = None  # the file it is in, while it is not yet saved
    layout_written: bool = False  # `layout` is in the database already (cache.results)
    from_source: int = 0  # files whose facts came from the fact source
    timings: dict[str, float] = field(default_factory=lambda: {"extract": 0.0, "load": 0.0, "evaluate": 0.0})


def evaluate(
    inputs: Inputs,
    new_db: Callable[[], Database],
    source: FactSource | None = None,
    jobs: int | None = None,
    progress: Progress | None = None,
    on_loaded: Callable[[], None] | None = None,
) -> Evaluation:
    """Extract every file (or take its facts from `source`), load the facts into the database
    `new_db` makes (while the workers parse), and evaluate the program; `progress` shows
    each phase.  `on_loaded` is called once the facts are loaded, before the database writes
    them to its file (on one core: the other is free for the caller's work)."""
    started = time.perf_counter()
    progress = progress or Progress.silent()
    progress.phase("extracting", total=len(inputs.texts))
    with start_extraction(inputs, inputs.texts, source, jobs) as extraction:
        db = new_db()
        try:
            loaded = load_facts(db, inputs, extraction, progress=progress)
            db.load("skipped_file", skipped_rows(inputs, loaded.layout))
            if on_loaded is not None:
                on_loaded()
            db.write_to_file()
        except BaseException:
            db.close()
            raise
    extracted = time.perf_counter()
    progress.phase("evaluating rules")
    db.evaluate(on_stratum=strata_done(progress))
    done = time.perf_counter()
    return Evaluation(
        db,
        layout=loaded.layout,
        from_source=loaded.from_source,
        timings={"extract": extracted - started, "load": 0.0, "evaluate": done - extracted},
    )


def strata_done(progress: Progress) -> Callable[[int, int], None]:
    """The evaluation's report of strata done, as the progress line's detail."""
    return lambda done, total: progress.detail(f"{done}/{total} strata")
