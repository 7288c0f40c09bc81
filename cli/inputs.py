"""The PATHs a command reads: refused in one line when they are no file or folder, and several
of them brought under one root.

A PATH must be a regular file or a folder (through symlinks).  A named pipe, a device or a
socket would be read forever or not at all, a symlink loop or a dangling link names nothing:
each is a usage error (exit status 2) saying what the PATH is.  Standard input (`-`) is not
read: cpq reads files, whose names the findings cite.

Several PATHs (`cpq assess src/ scripts/run.py`) are assessed as one tree: the root is the
deepest folder holding them all, and files are named relative to it, as assessing that folder
would name them (`src/solver.py`, `scripts/run.py`).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_NOT_SOURCE = "cpq reads files and folders only"


def input_problem(path: Path) -> str:
    """What is wrong with `path` as a PATH to read; empty when it is a file or a folder."""
    if str(path) == "-":
        return "reading source from standard input is not supported: give the files or folders to assess"
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            return f"a broken symlink (to {os.readlink(path)}, which does not exist)"
        return "no such file or directory"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop: it leads back to itself, never to a file or folder"
        if exc.errno == errno.ENOTDIR:
            return "no such file or directory (a file stands where a folder is on the way to it)"
        return exc.strerror or exc.__class__.__name__
    mode = info.st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return ""
    if stat.S_ISFIFO(mode):
        return f"a named pipe (FIFO), not a file or folder: {_NOT_SOURCE}"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return f"a device, not a file or folder: {_NOT_SOURCE}"
    if stat.S_ISSOCK(mode):
        return f"a socket, not a file or folder: {_NOT_SOURCE}"
    return f"not a file or folder: {_NOT_SOURCE}"


def common_root(paths: list[Path]) -> tuple[Path, list[Path] | None]:
    """The root to assess `paths` under, and the paths themselves relative to it (None when
    there is one PATH, which is then the root, as it always was).

    The root is relative to the working folder when it lies inside it (reports show `.` or
    `src`, not an absolute path), absolute otherwise."""
    unique = list(dict.fromkeys(Path(os.path.abspath(p)) for p in paths))
    if len(unique) == 1:
        return paths[0], None
    common = Path(os.path.commonpath(unique))
    if not common.is_dir():
        common = common.parent
    members = [p.relative_to(common) for p in unique]
    shown = os.path.relpath(common)
    root = Path(shown) if not shown.startswith(os.pardir) else common
    return root, members
