"""Every key a cache entry is kept under, in one place.

A key is a digest of everything the entry depends on, so an entry found under a key is the
entry that would be made now (its seal, trust.py, proves cpq made it).  cpq's own code is part
of each key: the extractor's for facts, the engine's for parsed programs and databases.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from importlib import resources
from typing import TYPE_CHECKING

from ... import __version__

if TYPE_CHECKING:
    from ...config.context import Context
    from ...config.project import Config
    from ...facts import Skipped, SourceText

PACKED_FACTS_FORMAT = 6  # change with facts.packing's packed layout


def code_digest(package: str, suffixes: tuple[str, ...], salt: str = "") -> str:
    """A digest of the source files of `package` (names and contents) and of `salt`."""
    digest = hashlib.sha256(salt.encode())
    files = resources.files(package)
    for name in sorted(p.name for p in files.iterdir() if p.name.endswith(suffixes)):
        digest.update(name.encode())
        digest.update(files.joinpath(name).read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def extractor_stamp() -> str:
    """Changes whenever the extractor's code (or cpq's version) changes: facts extracted by
    other code are extracted again."""
    return code_digest("cpq.facts", (".py",), f"{__version__}/{PACKED_FACTS_FORMAT}")


@functools.cache
def engine_stamp() -> str:
    """Changes whenever the engine's code changes: a program parsed, or a database made, by
    other code is not reused."""
    return code_digest("cpq.engine", (".py", ".lark"), __version__)


def digest(parts: Iterable[str]) -> str:
    """A digest of strings, each delimited (so that no two lists of them collide)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def entry_key(source: SourceText, deep: bool) -> str:
    """A file's facts in the fact store: its content and how deeply it is extracted."""
    return f"{source.sha}:{'d' if deep else 's'}"


def program_key(text: str, source: str) -> str:
    """A parsed rules file."""
    return digest(["program", __version__, engine_stamp(), source, text])


def template_key(program_text: str, duckdb_version: str, block_size: int) -> str:
    """A database file with a program's tables and facts, and nothing else."""
    return digest(["tables", __version__, engine_stamp(), duckdb_version, str(block_size), program_text])


def evaluation_parts(context: Context, program_text: str, config: Config | None) -> list[str]:
    """What evaluated results depend on besides the files: cpq and its engine, the extractor,
    the program, the context (with its runtime evidence), the manifest and the configuration."""
    from ...manifest import load

    return [
        __version__,
        engine_stamp(),
        extractor_stamp(),
        program_text,
        repr(context.facts()),
        repr(context.pattern),
        context.runtime.key(),
        repr(sorted(load().provenance.items())),
        repr(config) if config is not None else "",
    ]


def results_key(found: list[SourceText | Skipped], evaluation: list[str]) -> str:
    """Evaluated results: the evaluation's parts and every file found, by content (what the
    suppressions, the skips and the configuration's per-file choices depend on too)."""
    from ...facts import SourceText

    files = sorted(
        f"{item.relpath}:{item.sha}" if isinstance(item, SourceText) else f"skip:{item.relpath}:{item.reason}"
        for item in found
    )
    return digest(["results", *evaluation, *files])


def update_key(evaluation: list[str]) -> str:
    """What earlier results must share with a run to be brought up to date by it: all but the
    files (the update compares those, and what depends on them)."""
    return digest(["update", *evaluation])
