"""Extract many files: cached facts first, the rest in worker processes.

Workers return each file's facts packed with `marshal` (compact, fast to move between
processes), uncompressed: compressing them was a tenth of a worker's time, spent while every
core is busy; the fact store compresses what it keeps at the end of the run instead, while
the report is made and a core is idle (see FactStore.write_pending_soon).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Protocol

from . import Skipped, SourceText, extract_source, line_count
from .extract import module_name_for
from .packing import pack_facts
from .tree import parse

# Below this much source, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 400_000
# A file this many times the mean size is parsed before the others.
LARGE_FILE_FACTOR = 4


@contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Extracting a file makes hundreds of thousands of short-lived objects (tree nodes, fact
    tuples) that reference counting frees; their number alone sets off Python's cycle
    collector, which then walks every object of the process again and again for nothing (a
    fifth of the extraction time on NumPy).  It is off while a file is extracted, and the
    few cycles the file left (if any) are collected at the end, from the youngest objects:
    in a worker, or where the collector was on.  The `cpq` command turns it off for its whole
    life, and leaves its few cycles to its end: there, the youngest objects are all those made
    since it started (an update's one file walked them again, 10 to 15 ms on NumPy)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled or _in_worker:
            gc.collect(0)
        if enabled:
            gc.enable()


def _extract_packed(item: tuple[str, str, bool]) -> tuple[str, bytes | str]:
    with _without_cyclic_gc():
        return _extract_one(item)


def _extract_one(item: tuple[str, str, bool]) -> tuple[str, bytes | str]:
    relpath, text, deep = item
    if not deep:
        # Parsed all the same: a file that Python would reject is reported, never counted.
        parsed = parse(text)
        if parsed.error_line is not None:
            return relpath, f"SyntaxError: invalid syntax at line {parsed.error_line}"
        lines = line_count(text)
        return relpath, pack_facts(
            {"source_file": [(relpath, module_name_for(relpath), lines)]}, 0, lines, compress=False
        )
    try:
        result = extract_source(SourceText(relpath, text))
    except Exception as exc:  # one file must never take the run down
        return relpath, f"extractor failure: {exc.__class__.__name__}: {exc}"[:300]
    if isinstance(result, Skipped):
        return relpath, result.reason
    return relpath, pack_facts(dict(result.rows), result.node_count, result.lines, compress=False)


def _work_order(todo: list[tuple[str, str, bool]]) -> list[tuple[str, str, bool]]:
    """The order the workers take the files in: the few large ones first (so the workers
    finish together; their facts wait, compressed, for their turn), then the rest in the
    order they are consumed, so the caller loads each file's facts while later files are
    still being parsed rather than all of them once the workers are done."""
    if not todo:
        return todo
    large = LARGE_FILE_FACTOR * sum(len(text) for _, text, _ in todo) / len(todo)
    first = sorted((item for item in todo if len(item[1]) > large), key=lambda item: -len(item[1]))
    return first + [item for item in todo if len(item[1]) <= large]


_in_worker = False  # set in the extraction workers


def _init_worker(lifeline: int, parent_end: int) -> None:
    """Workers die with their parent, whatever ends it (`kill -9` included): else they would
    wait for ever on the pipe of their next task, and hold the caller's stdout open (so that
    `cpq assess ... | cat` never ends).  They watch `lifeline`, the read end of a pipe whose
    write end, `parent_end`, only the parent keeps open.  Ctrl-C, which reaches the whole process group, is
    the parent's to handle; SIGTERM takes its default action (the pool ends the workers of a
    broken pool so).  They leave the objects inherited from the parent out of every cycle
    collection."""
    global _in_worker
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(ValueError):  # the wakeup fd is the parent's (see cli/shutdown.py)
        signal.set_wakeup_fd(-1)
    # Workers print nothing; a worker that outlived cpq must not keep its stdout open either.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.close(parent_end)  # every worker closes its copy: the parent's is then the only one
    threading.Thread(target=_exit_with_parent, args=(lifeline,), daemon=True).start()
    _in_worker = True
    gc.freeze()


def _exit_with_parent(lifeline: int) -> None:
    """Wait for the end of the pipe that only the parent can write to: the system closes it
    when the parent ends, however it ends (if it already has, this returns at once)."""
    try:
        while os.read(lifeline, 1):
            pass
    except OSError:  # nothing to watch
        return
    os._exit(1)


class FactSource(Protocol):
    """Facts extracted by an earlier run (the fact store): packed facts, or why the file could
    not be extracted."""

    def get_many(self, files: list[tuple[SourceText, bool]]) -> dict[str, bytes | str]:
        """What it holds for these (file, extracted in depth) pairs, by relpath."""
        ...

    def put(self, source: SourceText, deep: bool, data: bytes | str) -> None:
        """Keep what the extraction of `source` gave."""
        ...


class Extraction:
    """Facts for each source, in order, as soon as each is ready: a file is handed on while
    later ones are still being extracted, so the caller never holds every file's facts at
    once.  The work starts on creation (so the caller can prepare the database meanwhile);
    iterate for (source, packed facts or the reason the file was skipped), then `close`.
    What the workers extract goes to the fact source."""

    def __init__(
        self,
        sources: list[SourceText],
        deep: set[str],
        store: FactSource | None,
        jobs: int | None = None,
    ) -> None:
        self._sources = sources
        self.deep = deep
        self._store = store
        self._cached = store.get_many([(s, s.relpath in deep) for s in sources]) if store is not None else {}
        self.from_source = len(self._cached)
        # The files this run's workers extract (their facts need no checking; see unpack_facts).
        self.fresh: set[str] = set()
        todo = [(s.relpath, s.text, s.relpath in deep) for s in sources if s.relpath not in self._cached]
        todo = _work_order(todo)
        self._pool: ProcessPoolExecutor | None = None
        self._lifeline: tuple[int, int] | None = None
        jobs = jobs or os.cpu_count() or 1
        todo_bytes = sum(len(t) for _, t, _ in todo)
        if jobs > 1 and len(todo) > 1 and todo_bytes >= PARALLEL_MIN_BYTES:
            self._lifeline = os.pipe()  # see _init_worker
            self._pool = ProcessPoolExecutor(
                max_workers=min(jobs, len(todo)),
                mp_context=multiprocessing.get_context("fork"),
                initializer=_init_worker,
                initargs=self._lifeline,
            )
            self._results: Iterator[tuple[str, bytes | str]] = self._pool.map(
                _extract_packed, todo, chunksize=2
            )
        else:
            self._results = map(_extract_packed, todo)

    def __iter__(self) -> Iterator[tuple[SourceText, bytes | str]]:
        by_path = {s.relpath: s for s in self._sources}
        ready: dict[str, bytes | str] = {}
        for s in self._sources:
            hit = self._cached.pop(s.relpath, None)
            if hit is not None:
                yield s, hit
                continue
            while s.relpath not in ready:
                relpath, packed = next(self._results)
                self.fresh.add(relpath)
                self.keep(by_path[relpath], packed)
                ready[relpath] = packed
            yield s, ready.pop(s.relpath)

    def keep(self, source: SourceText, data: bytes | str) -> None:
        """Give the fact source what an extraction of `source` gave (in place of what it had)."""
        if self._store is not None:
            self._store.put(source, source.relpath in self.deep, data)

    def close(self) -> None:
        """Stop the workers (also when the caller stopped early)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._lifeline is not None:
            for fd in self._lifeline:
                os.close(fd)
            self._lifeline = None

    def __enter__(self) -> Extraction:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def extract_all(
    sources: list[SourceText],
    deep: set[str],
    store: FactSource | None,
    jobs: int | None = None,
) -> dict[str, bytes | str]:
    """relpath -> packed facts, or the reason the file was skipped."""
    with Extraction(sources, deep, store, jobs) as extraction:
        return {source.relpath: data for source, data in extraction}
