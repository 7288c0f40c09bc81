"""The caches of an assessment, behind one interface: `Cache.evaluate` gives the evaluated
database the plain path (run.py) would give, by the cheapest way it can prove right.

1. Saved results (results.py) of exactly this run's inputs: opened as they are.
2. Saved results of the same program, context and configuration, when few files changed:
   copied and brought up to date (update.py, engine/incremental.py).
3. Otherwise the plain path, with the fact store (facts_store.py) as its source of facts
   extracted earlier, evaluating in the file that becomes the saved results.

Every key is computed in keys.py; every file read back is first proved to be cpq's own
(trust.py): a file that fails is rebuilt, and one line on stderr says why.  `keep` saves what
was evaluated; `close` seals the fact store.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ...engine import Database, DatalogError
from ...engine.update import UpdateTooLarge
from ..background import Background
from ..progress import Progress
from ..run import (
    Evaluation,
    Inputs,
    evaluate,
    fact_count,
    limits,
    load_facts,
    load_run_facts,
    new_database,
    skipped_rows,
    start_extraction,
    strata_done,
)
from . import keys, results, trust, update, user_cache
from .facts_store import FACTS_FILE, FactStore, StoreUnusable, open_locked, take_lock

if TYPE_CHECKING:
    from ...config.context import Context
    from ...config.project import Config
    from ...engine import Program

CACHE_DIRNAME = ".cpq"
# Results files use SMALL_BLOCK_SIZE blocks (but from LARGE_TREE_BYTES of source); below this
# much source (about 25,000 lines) they start as a copy of a template.
SMALL_TREE_BYTES = 1_000_000
SMALL_BLOCK_SIZE = 16 * 1024
# From this much source (about 650,000 lines), DuckDB's own block size: results take six or
# seven times the source's bytes, and larger blocks add about 40 MB whatever the tree (an
# eighth of the results from here; NumPy's 68 MB would become 112 MB, which every edit
# copies), while they make loading the facts and checkpointing cheaper (SciPy + Astropy, 36 MB).
LARGE_TREE_BYTES = 24_000_000
LARGE_BLOCK_SIZE = 256 * 1024
# What an update may fail with: the run then evaluates from scratch.
_UPDATE_FAILURES = (duckdb.Error, OSError, ValueError, DatalogError, trust.Untrusted, UpdateTooLarge)


def default_cache_dir(path: Path) -> Path:
    root = path if path.is_dir() else path.parent
    return root / CACHE_DIRNAME


class Cache:
    """The store folder of one assessment (and the user cache): see the module's docstring."""

    def __init__(self, directory: Path, warn: Callable[[str], None]) -> None:
        self.directory = directory
        # Said from the saving thread and the one closing the store, one line at a time.
        lock = threading.Lock()

        def warn_once_at_a_time(line: str) -> None:
            with lock:
                warn(line)

        self.warn = warn_once_at_a_time
        self._store: FactStore | None = None
        self._store_tried = False
        self.results_key = ""
        self.update_key = ""
        self._leftovers: list[Path] = []
        self._present: set[str] = set()
        # The store being opened in a thread (see _open_facts), and what opening it gave.
        self._opening: threading.Thread | None = None
        self._opened: tuple[FactStore | None, str | None] | None = None

    @classmethod
    def open(cls, path: Path, cache_dir: Path | None, warn: Callable[[str], None]) -> Cache | None:
        """The cache for assessing `path` (in `cache_dir`, else PATH/.cpq), or None, with one
        line on stderr saying why, when it cannot be used."""
        directory = default_cache_dir(path) if cache_dir is None else cache_dir
        try:
            trust.secret_key()
            folder = _store_folder(directory, follow=cache_dir is not None)
        except trust.Untrusted as exc:
            warn(f"cache: {exc}: assessing without it")
            return None
        return cls(folder, warn)

    # -- the three ways -------------------------------------------------------------------

    def evaluate(
        self,
        program: Program,
        context: Context,
        config: Config | None,
        inputs: Inputs,
        jobs: int | None = None,
        progress: Progress | None = None,
    ) -> Evaluation:
        progress = progress or Progress.silent()
        evaluation = keys.evaluation_parts(context, program.text, config)
        self.results_key = keys.results_key(inputs.found, evaluation)
        self.update_key = keys.update_key(evaluation)
        self._present = {source.relpath for source in inputs.texts}
        found = (
            self._saved(program)
            or self._updated(program, inputs, jobs, progress)
            or self._fresh(program, context, inputs, jobs, progress)
        )
        if self._store is not None:
            # What the store keeps of this run and has not written yet (an update's files) is
            # compressed and written while the report is made, on the core that leaves idle.
            self._store.write_pending_soon()
        return found

    def _saved(self, program: Program) -> Evaluation | None:
        try:
            saved = results.find(self.directory, self.results_key)
            return (
                Evaluation(results.open_checked(program, saved), how="saved results reused")
                if saved
                else None
            )
        except trust.Untrusted as exc:
            self.warn(f"cache: {exc}: evaluated afresh")
        except duckdb.Error as exc:
            self.warn(f"cache: saved results cannot be read ({_first_line(exc)}): evaluated afresh")
        return None

    def _updated(
        self, program: Program, inputs: Inputs, jobs: int | None, progress: Progress
    ) -> Evaluation | None:
        candidates = results.latest(self.directory, self.update_key)
        if not candidates:
            return None
        previous_path, previous_key = candidates[0]
        # Only the run that holds the store's lock writes in it.  The store opens meanwhile.
        if not self._store_tried and not self._open_facts(background=True):
            return None
        partial = results.partial_path(self.directory, self.results_key)
        db: Database | None = None
        contents_checked: Background | None = None
        try:
            previous = results.copy_checked(previous_path, previous_key, partial)
            db = Database.open(program, partial, read_only=False, limits=limits(partial))
            # What the copy holds is checked on a cursor of its own (DuckDB lists its catalog
            # on the core the changed files' extraction leaves idle).  Until that passes,
            # nothing is written to its tables, nor read from them but the files' layout, from
            # a table (read_layout: a view there could read a file); a failure gives it all up.
            contents_checked = Background(_contents_check(db), "cpq-check-results")
            plan = update.plan_update(results.read_layout(db), inputs)
            if plan is None:
                raise _NotWorthIt
            db.begin_update(previous.path)
            results.ensure_same(previous.path, previous.identity)
            store = self.facts()
            if store is None:
                raise _NotWorthIt  # evaluated afresh, in memory
            progress.phase("extracting", total=len(plan.changed))
            with start_extraction(inputs, plan.changed, store, jobs) as extraction:
                update.stage_rows(db, "suppressed", inputs.suppressed_rows)
                update.stage_rows(db, "disabled", inputs.disabled_rows)
                loaded = load_facts(db, inputs, extraction, staged=True, progress=progress)
            layout = {**plan.unchanged, **loaded.layout}
            update.stage_rows(db, "skipped_file", skipped_rows(inputs, layout))
            progress.phase("updating saved results")
            contents_checked.wait()
            limit = update.max_changed(fact_count(db))
            db.update(update.input_changes(db, plan), max_changed=limit, on_stratum=strata_done(progress))
            db.end_update()
            # Written here, where a failure means evaluating afresh, rather than by the saving
            # thread: there, beside the report's Python, this small statement waited on the
            # interpreter some 60 ms, on the path to the end of an edit's run.
            results.write_layout(db, layout)
        except _NotWorthIt:
            pass
        except trust.Untrusted as exc:
            self.warn(f"cache: {exc}: evaluated afresh")
        except _UPDATE_FAILURES:
            pass
        else:
            timings = {"extract": 0.0, "load": 0.0, "evaluate": db.last_update_seconds}
            return Evaluation(
                db,
                how="saved results updated",
                layout=layout,
                path=partial,
                layout_written=True,
                from_source=len(plan.unchanged) + loaded.from_source,
                timings=timings,
            )
        if contents_checked is not None:
            with contextlib.suppress(Exception):  # the update is given up already
                contents_checked.wait()
        if db is not None:
            db.end_update()
            db.close()
        results.remove(partial)
        return None

    def _fresh(
        self, program: Program, context: Context, inputs: Inputs, jobs: int | None, progress: Progress
    ) -> Evaluation:
        store = self.facts()
        # Only the run that holds the store's lock writes in it; another evaluates in memory.
        partial = results.partial_path(self.directory, self.results_key) if store is not None else None

        def new_db() -> Database:
            nonlocal partial
            if partial is None:
                return new_database(program, context, inputs)
            try:
                return self._database_at(partial, program, context, inputs)
            except (duckdb.Error, OSError, ValueError) as exc:
                self.warn(f"cache: cannot evaluate in the store ({_first_line(exc)}): evaluating in memory")
                results.remove(partial)
                partial = None
                return new_database(program, context, inputs)

        # The entries the store keeps of this run are compressed and written while the facts
        # are written to the results file, on the core that leaves idle.
        on_loaded = store.write_pending_soon if store is not None else None
        try:
            found = evaluate(inputs, new_db, store, jobs, progress, on_loaded)
        except duckdb.InterruptException:
            raise
        except duckdb.Error as exc:
            if partial is None:
                raise
            # The results file could not be written (a full disk): DuckDB gives up on a
            # database whose checkpoint failed, so the facts are loaded again, in memory.
            self.warn(f"cache: cannot write the results ({_first_line(exc)}): evaluating in memory")
            results.remove(partial)
            partial = None
            found = evaluate(inputs, new_db, store, jobs, progress, on_loaded)
        found.path = partial
        return found

    def _database_at(self, path: Path, program: Program, context: Context, inputs: Inputs) -> Database:
        """A new database in the file `path`, with small blocks but for a large tree (see
        LARGE_TREE_BYTES): DuckDB gives each table a block of its own, and with its 256 KiB
        blocks one small file's results would take 30 MB, and NumPy's 112 MB instead of 68
        (which an edit then copies and checks, and seals again).
        For a small tree, copied from a template of the program's tables (making some 200
        tables was a tenth of a one-file run; on a large tree it overlaps the parsing)."""
        if inputs.source_bytes >= SMALL_TREE_BYTES:
            block_size = LARGE_BLOCK_SIZE if inputs.source_bytes >= LARGE_TREE_BYTES else SMALL_BLOCK_SIZE
            return new_database(program, context, inputs, path, block_size=block_size)
        key = keys.template_key(program.text, duckdb.__version__, SMALL_BLOCK_SIZE)
        if not user_cache.copy_template(key, path):
            _make_template(program, key)
            if not user_cache.copy_template(key, path):
                return new_database(program, context, inputs, path, block_size=SMALL_BLOCK_SIZE)
        db = Database.from_template(program, path, limits(path))
        try:
            results.check_contents(db)
            load_run_facts(db, context, inputs)
        except BaseException:
            db.close()
            raise
        return db

    def facts(self) -> FactStore | None:
        """The fact store, opened on first use (None when it cannot be used this run)."""
        if not self._store_tried:
            self._open_facts()
        if self._opening is not None:
            self._opening.join()
            self._opening = None
        if self._opened is not None:
            self._store, note = self._opened
            self._opened = None
            if note is not None:
                if self._store is None:
                    self.warn(f"cache: {note}: extracting without the fact store")
                else:
                    self.warn(f"cache: {note}")
        return self._store

    def _open_facts(self, background: bool = False) -> bool:
        """Take the store's lock and open the store: here, or (`background`) in a thread that
        `facts()` waits for (checking it is DuckDB's and hashlib's work, which can overlap the
        caller's).  False when the lock cannot be taken: the store is then not used."""
        self._store_tried = True
        try:
            lock = take_lock(self.directory)
        except StoreUnusable as exc:
            self._opened = (None, str(exc))
            return False
        # Every run that evaluates in the store holds its lock: partial results files found now
        # belong to runs that were killed.
        results.remove_partials(self.directory)
        stamp = keys.extractor_stamp()

        def open_it() -> None:
            try:
                self._opened = open_locked(self.directory, lock, stamp)
            except Exception as exc:  # in a thread: said by facts(), never lost
                with contextlib.suppress(OSError):
                    os.close(lock)
                self._opened = (None, f"{FACTS_FILE} cannot be opened ({exc.__class__.__name__})")

        if background:
            self._opening = threading.Thread(target=open_it, name="cpq-fact-store")
            self._opening.start()
        else:
            open_it()
        return True

    # -- afterwards ---------------------------------------------------------------------------

    def keep(self, found: Evaluation, program: Program, reopen: bool) -> Database | None:
        """Save what was evaluated as the results of this run; with `reopen`, the database
        again, read-only (else None)."""
        if found.path is None:  # saved results as they were, or evaluated in memory
            if reopen:
                return found.db
            found.db.close()
            return None
        try:
            target, identity = results.save(
                found.db,
                found.path,
                self.directory,
                self.results_key,
                self.update_key,
                None if found.layout_written else found.layout,
            )
        except (OSError, duckdb.Error, trust.Untrusted) as exc:
            self.warn(f"cache: cannot save the results ({_first_line(exc)})")
            if reopen and trust.kind_of(found.path) == "file":
                self._leftovers.append(found.path)
                return Database.open(program, found.path)
            results.remove(found.path)
            return None
        if not reopen:
            return None
        db = Database.open(program, target)
        try:
            results.ensure_same(target, identity)
        except trust.Untrusted as exc:  # replaced since it was saved: nothing to question
            db.close()
            self.warn(f"cache: {exc}")
            return None
        return db

    def close_store(self) -> None:
        """Write, close and seal the fact store (a file of its own: this may run while `keep`
        saves the results, in another thread)."""
        if self._opening is not None:
            self.facts()  # the store still being opened is closed too
        store, self._store = self._store, None
        if store is not None:
            store.flush(self._present)  # files no longer in the tree leave it
            problem = store.close()
            if problem is not None:
                self.warn(f"cache: the fact store {problem}: it is made anew by the next run")

    def close(self) -> None:
        self.close_store()
        for leftover in self._leftovers:
            results.remove(leftover)


class _NotWorthIt(Exception):
    """Too many files changed for an update."""


def _contents_check(db: Database) -> Callable[[], None]:
    """results.check_contents(db), on a cursor of db's own (closed after it), for a thread."""
    cursor = db.con.cursor()

    def check() -> None:
        try:
            results.check_contents(db, cursor)
        finally:
            cursor.close()

    return check


def _make_template(program: Program, key: str) -> None:
    target = user_cache.template_target(key)
    if target is None:
        return
    try:
        with Database(program, target, block_size=SMALL_BLOCK_SIZE) as made:
            made.con.execute("CHECKPOINT")
    except (duckdb.Error, OSError):
        user_cache.discard_template(target)
        return
    user_cache.keep_template(key, target)


def _store_folder(directory: Path, follow: bool) -> Path:
    """The store's folder, made if missing: a folder of the user's own, never reached through
    a link (`follow`: the user named it, so a link on the way is theirs to choose)."""
    if follow:
        directory = directory.resolve()
    try:
        directory.mkdir(mode=0o700, parents=follow, exist_ok=True)
        info = os.lstat(directory)
    except FileExistsError:
        raise trust.Untrusted(f"{directory} exists and is not a folder") from None
    except OSError as exc:
        raise trust.Untrusted(f"cannot use {directory} ({exc.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise trust.Untrusted(f"{directory} is a symbolic link (not followed)")
    if not stat.S_ISDIR(info.st_mode):
        raise trust.Untrusted(f"{directory} exists and is not a folder")
    if info.st_uid != os.geteuid():
        raise trust.Untrusted(f"{directory} belongs to another user")
    ignore = directory / ".gitignore"
    with contextlib.suppress(OSError):  # the store never shows up in the user's git status
        fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w") as file:
            file.write("*\n")
    return directory


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0][:200]
