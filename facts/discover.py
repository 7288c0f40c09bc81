"""Find the files to assess under PATH and read them as text.

Every file found ends in exactly one bucket: read (with its text) or skipped
(with a reason a user can act on). Nothing is imported or executed.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .gitignore import GitIgnore

DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024
# tree-sitter positions cost time proportional to the column, so a very long line (minified or
# generated code) makes parsing quadratic; such files are skipped with this reason.
MAX_LINE_LENGTH = 20_000

# Folders that hold no user source: version control, caches, virtual environments.
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".cpq",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "node_modules",
        ".ipynb_checkpoints",
    }
)
SOURCE_SUFFIXES = (".py", ".ipynb")
EXCLUDED = "excluded by configuration"  # the reason a file [tool.cpq] exclude leaves out is skipped

# Decides whether a path (relative to PATH; folders end with "/") is excluded by configuration.
Excluder = Callable[[str], bool]

_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


@dataclass(frozen=True)
class SourceText:
    relpath: str
    text: str
    sha: str = ""  # sha256 of the file's bytes, the cache key
    notebook: Any = None  # the NotebookSource of a .ipynb file (its cells as one module)


@dataclass(frozen=True)
class Skipped:
    relpath: str
    reason: str


def iter_sources(
    root: Path,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    excluded: Excluder | None = None,
    ignore: GitIgnore | None = None,
) -> Iterator[SourceText | Skipped]:
    """Yield every candidate file under `root` (or `root` itself), read or skipped.  Files and
    folders that `ignore` (the .gitignore files) leaves out are no candidates: not yielded.  A
    file given as `root` is read whatever ignores it: it was asked for by name."""
    if root.is_file() or (root.is_symlink() and not root.is_dir()):
        yield read_source(root, root.name, max_file_size)
        return
    real_root = root.resolve()
    unreadable: list[str] = []
    # The ignore rules of each folder still to be walked, by its path.
    ignores: dict[str, GitIgnore] = {os.fspath(root): ignore.entering(root, "")} if ignore else {}

    def walk_error(exc: OSError) -> None:
        if exc.filename:
            unreadable.append(str(exc.filename))

    for dirpath, dirnames, filenames in _walk(root, walk_error):
        here = Path(dirpath)
        here_ignore = ignores.pop(dirpath, None)
        kept = []
        for d in sorted(dirnames):
            full = here / d
            if d in SKIP_DIRS or _is_virtualenv(full):
                continue
            if _is_symlink(full):
                continue  # symlinked folders are not followed (loops, trees outside PATH)
            rel_dir = full.relative_to(root).as_posix() + "/"
            if excluded is not None and excluded(rel_dir):
                continue
            if here_ignore is not None:
                if here_ignore.ignored(rel_dir):
                    continue
                ignores[os.path.join(dirpath, d)] = here_ignore.entering(full, rel_dir)  # as _walk names it
            kept.append(d)
        dirnames[:] = kept
        for name in sorted(filenames):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            full = here / name
            rel = full.relative_to(root).as_posix()
            if here_ignore is not None and here_ignore.ignored(rel):
                continue
            if not _utf8(rel):
                # The name cannot travel in reports (JSON, SARIF) as is: shown escaped, skipped.
                shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                yield Skipped(shown, "file name is not valid UTF-8")
                continue
            if excluded is not None and excluded(rel):
                yield Skipped(rel, EXCLUDED)
                continue
            try:
                link = full.is_symlink()
            except OSError as exc:
                # A folder that can be listed but not entered (mode r--): its entries have names
                # but no status.
                yield Skipped(rel, f"unreadable: {exc.strerror or exc.__class__.__name__}")
                continue
            if link:
                try:
                    target = full.resolve(strict=True)
                except (OSError, RuntimeError):
                    yield Skipped(rel, "broken symlink")
                    continue
                if not target.is_relative_to(real_root):
                    yield Skipped(rel, "symlink leaving the assessed tree (not followed)")
                    continue
            yield read_source(full, rel, max_file_size)
    for folder in unreadable:
        rel = Path(folder).relative_to(root).as_posix() if Path(folder).is_relative_to(root) else folder
        yield Skipped(rel + "/", "unreadable folder: permission denied or vanished")


def _walk(root: Path, onerror: Callable[[OSError], None]) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(root, followlinks=False, onerror=onerror)`, top down, in the same order, but
    with a stack instead of recursion: on Python 3.11 os.walk recurses, and a tree some 1,000
    folders deep raised RecursionError.  As with os.walk, the caller may prune `dirnames`."""
    stack = [os.fspath(root)]
    while stack:
        top = stack.pop()
        dirnames: list[str] = []
        filenames: list[str] = []
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirnames if is_dir else filenames).append(entry.name)
        except OSError as exc:
            onerror(exc)
            continue
        yield top, dirnames, filenames
        # Pushed last first, so the first folder is walked next (os.walk's depth-first order).
        for name in reversed(dirnames):
            path = os.path.join(top, name)
            if not os.path.islink(path):
                stack.append(path)


def _is_symlink(path: Path) -> bool:
    """Whether `path` is a symlink; False when that cannot be told (a folder that can be listed
    but not entered): then walking into it fails, and that failure is reported."""
    try:
        return path.is_symlink()
    except OSError:
        return False


def _is_virtualenv(folder: Path) -> bool:
    try:
        return (folder / "pyvenv.cfg").exists()
    except OSError:
        return False


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_source(path: Path, relpath: str, max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> SourceText | Skipped:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return Skipped(relpath, "not a regular file (pipe, socket or device)")
        size = info.st_size
        if size > max_file_size:
            return Skipped(relpath, f"too large ({size:,} bytes > --max-file-size {max_file_size:,})")
        data = path.read_bytes()
    except OSError as exc:
        return Skipped(relpath, f"unreadable: {exc.strerror or exc.__class__.__name__}")
    sha = hashlib.sha256(data).hexdigest()
    if relpath.endswith(".ipynb"):
        return _read_notebook(data, relpath, sha)
    text = decode_source(data)
    if isinstance(text, Skipped):
        return Skipped(relpath, text.reason)
    return SourceText(relpath, text, sha)


def _read_notebook(data: bytes, relpath: str, sha: str) -> SourceText | Skipped:
    from .notebook import NotebookError, notebook_to_source

    try:
        notebook = notebook_to_source(data)
    except NotebookError as exc:
        return Skipped(relpath, f"notebook not readable: {exc}")
    # The cells are parsed as one module: the limit of .py files applies to it (blanked cells,
    # such as %%bash ones, are not parsed and so not counted).
    too_long = _long_line(notebook.text)
    if too_long:
        return Skipped(relpath, too_long)
    return SourceText(relpath, notebook.text, sha, notebook)


def decode_source(data: bytes) -> str | Skipped:
    if b"\x00" in data:
        return Skipped("", "binary file (contains NUL bytes)")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
        encoding = "utf-8"
    else:
        encoding = _declared_encoding(data) or "utf-8"
    try:
        text = data.decode(encoding)
    except LookupError:
        return Skipped("", f"unknown source encoding {encoding!r}")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return Skipped("", f"not valid {encoding} text (line {line}: {exc.reason})")
    except UnicodeError as exc:  # a codec failing without a position, such as `undefined`
        detail = str(exc).split("\n")[0] or exc.__class__.__name__
        return Skipped("", f"not valid {encoding} text ({detail})")
    if not _utf8(text):
        # Codecs such as unicode_escape can produce lone surrogates, which no report can hold.
        return Skipped("", f"not valid text: {encoding} decoding yields unpaired surrogates")
    if "\r" in text:  # a search is much cheaper than two replacements that change nothing
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    too_long = _long_line(text)
    return Skipped("", too_long) if too_long else text


def _long_line(text: str) -> str:
    """Why `text` is skipped for a line over MAX_LINE_LENGTH; empty when it is not."""
    if len(text) > MAX_LINE_LENGTH:
        longest = max(map(len, text.split("\n")))
        if longest > MAX_LINE_LENGTH:
            return f"a line of {longest:,} characters (generated or minified code; limit {MAX_LINE_LENGTH:,})"
    return ""


def _declared_encoding(data: bytes) -> str | None:
    for line in data.split(b"\n", 2)[:2]:
        m = _CODING.match(line)
        if m:
            return m.group(1).decode("ascii", "replace")
    return None
