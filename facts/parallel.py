"""Extract many files: cached facts first, the rest in worker processes.

Workers return each file's facts packed with `marshal` (compact, fast to move
between processes and to store in the cache as is).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from ..store import FactStore, pack_facts
from . import Skipped, SourceText, extract_source
from .extract import module_name_for
from .tree import parse

# Below this much source, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 400_000


def _extract_packed(item: tuple[str, str, bool]) -> tuple[str, bytes | str]:
    relpath, text, deep = item
    if not deep:
        # Parsed all the same: a file that Python would reject is reported, never counted.
        parsed = parse(text)
        if parsed.error_line is not None:
            return relpath, f"SyntaxError: invalid syntax at line {parsed.error_line}"
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        return relpath, pack_facts(
            {"source_file": [(relpath, module_name_for(relpath), lines)]}, 0, lines
        )
    try:
        result = extract_source(SourceText(relpath, text))
    except Exception as exc:  # one file must never take the run down
        return relpath, f"extractor failure: {exc.__class__.__name__}: {exc}"[:300]
    if isinstance(result, Skipped):
        return relpath, result.reason
    return relpath, pack_facts(dict(result.rows), result.node_count, result.lines)


def _die_with_parent() -> None:
    """Workers take the default SIGTERM action (the parent handles it to shut the pool down)."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def cache_key(source: SourceText, deep: bool) -> str:
    return f"{source.sha}:{'d' if deep else 's'}"


def extract_all(
    sources: list[SourceText],
    deep: set[str],
    store: FactStore | None,
    jobs: int | None = None,
    on_done: Callable[[int], None] | None = None,
) -> dict[str, bytes | str]:
    """relpath -> packed facts, or the reason the file was skipped."""
    out: dict[str, bytes | str] = {}
    todo: list[tuple[str, str, bool]] = []
    cached = (
        store.get_many([(s.relpath, cache_key(s, s.relpath in deep)) for s in sources])
        if store is not None
        else {}
    )
    for s in sources:
        hit = cached.get(s.relpath)
        if hit is not None:
            out[s.relpath] = hit
        else:
            todo.append((s.relpath, s.text, s.relpath in deep))
    if on_done is not None and out:
        on_done(len(out))
    jobs = jobs or os.cpu_count() or 1
    size = sum(len(t) for _, t, _ in todo)
    if jobs > 1 and len(todo) > 1 and size >= PARALLEL_MIN_BYTES:
        # Largest files first so that the workers finish together.
        todo.sort(key=lambda item: len(item[1]), reverse=True)
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(
            max_workers=min(jobs, len(todo)), mp_context=context, initializer=_die_with_parent
        ) as pool:
            for relpath, packed in pool.map(_extract_packed, todo, chunksize=4):
                out[relpath] = packed
                if on_done is not None:
                    on_done(1)
    else:
        for item in todo:
            relpath, packed = _extract_packed(item)
            out[relpath] = packed
            if on_done is not None:
                on_done(1)
    if store is not None:
        by_path = {s.relpath: s for s in sources}
        for relpath, _, is_deep in todo:
            packed = out[relpath]
            if isinstance(packed, bytes):
                store.put(relpath, cache_key(by_path[relpath], is_deep), packed)
    return out
