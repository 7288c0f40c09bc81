"""Whether a command can write where it is told to: checked before any analysis starts, and
written without a traceback.

A report path that cannot be written (`-o /no/such/dir/r.md`, a read-only file, a folder) is a
usage error found in a moment, not after minutes of analysis; a write that fails anyway (a full
disk, a quota) is one line and exit status 2, never a traceback.  `check_writable` is the check
every option naming an output file goes through (`--output`, `--write-baseline`, and the
`FORMAT=PATH` outputs); `check_writable_folder` the one for an output folder (`facts --out`).

Nothing is created or truncated by the checks: a run refused later (a bad option, an
interrupted analysis) leaves an earlier report as it was.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from .options import usage_error


def check_writable(path: Path, option: str) -> None:
    """Exit 2 with one line unless the file `path` can be written: an existing file (or device,
    or pipe) that may be written to, or a new name in a folder that may be written to."""
    problem = writable_problem(path)
    if problem:
        usage_error(f"{option} {path}: {problem}")


def writable_problem(path: Path) -> str:
    """Why the file `path` cannot be written; empty when it can (as far as can be told without
    writing: a full disk shows only when written to)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            return "a broken symlink"
        return _folder_problem(path.parent, creating=False)
    except OSError as exc:
        return _os_problem(exc)
    if stat.S_ISDIR(info.st_mode):
        return "is a folder, not a file"
    if not os.access(path, os.W_OK):
        return "is read-only"
    return ""


def check_writable_folder(path: Path, option: str) -> None:
    """Exit 2 with one line unless `path` is a folder files can be written to, or one that can
    be made (with the folders above it) where the nearest existing folder is writable."""
    problem = _folder_problem(path, creating=True)
    if problem:
        usage_error(f"{option} {path}: {problem}")


def _folder_problem(folder: Path, creating: bool) -> str:
    """Why no file can be made in `folder` (with `creating`, in `folder` or the folders that
    would be made down to it); empty when one can."""
    here = folder
    while True:
        try:
            info = here.stat()
        except FileNotFoundError:
            if not creating:
                return f"no such folder: {here}"
            if here.parent == here:
                return f"no such folder: {here}"
            here = here.parent
            continue
        except OSError as exc:
            return _os_problem(exc)
        break
    if not stat.S_ISDIR(info.st_mode):
        what = "a file" if stat.S_ISREG(info.st_mode) else "not a folder"
        return f"is {what}, not a folder" if here == folder else f"{here} is {what}, not a folder"
    if not os.access(here, os.W_OK | os.X_OK):
        return f"the folder {here} is read-only" if here != folder else "is a read-only folder"
    return ""


def _os_problem(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symlink loop"
    if exc.errno == errno.ENOTDIR:
        return "a file stands where a folder is needed on the way to it"
    return exc.strerror or exc.__class__.__name__


def write_file(path: Path, text: str, option: str) -> None:
    """Write `text` to `path`; a failure (a full disk, a folder gone meanwhile) is one line and
    exit status 2."""
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        usage_error(f"{option} {path}: cannot write: {exc.strerror or exc}")


def write_stdout(text: str) -> None:
    """Write `text` to standard output and flush it, so that a failure shows here, as one line
    with exit status 2 (a full disk behind a redirection); a reader that went away (`| head`)
    is no error: there is no one left to tell."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    except OSError as exc:
        _drop_stdout()
        usage_error(f"cannot write the report to standard output: {exc.strerror or exc}")


def _drop_stdout() -> None:
    """Point standard output at /dev/null, so the flush at exit does not fail a second time on
    what is still buffered."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real descriptor (a test runner's stream)
        pass
