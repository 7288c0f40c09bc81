"""Ctrl-C and SIGTERM end the command at once: status 130 or 143, one line on stderr, no
traceback, whatever it was doing.

Python runs a signal handler in the main thread only, once that thread is back in the
interpreter; while it waits for the evaluation threads, a signal that the kernel gave to
another thread (a DuckDB thread, as often as not) does not wake it, so a handler that raised
would wait for the running statements to finish: seconds, minutes on a large tree (and one
that raises while DuckDB runs a statement in the main thread has its exception turned into
DuckDB's "Query interrupted", once the statement is over).  The C-level handler, though,
writes the signal's number to the wakeup fd at once, whichever thread took it: a thread
reading that fd ends the process.

It ends the process as `kill -9` would, without unwinding (which would close, and so
checkpoint, databases about to be thrown away): what cpq writes survives that (DuckDB files
are crash-safe, results and cached programs are renamed into place whole, the baseline is
replaced whole), and extraction workers die with their parent (see facts/parallel.py).
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import NoReturn

_WORDS: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
_owner = 0  # the process that installed the handlers (a forked child inherits them)
_watcher: threading.Thread | None = None


def install() -> None:
    """Handle SIGINT and SIGTERM for the rest of the process (from the main thread only: no
    other may set signal handlers)."""
    global _owner, _watcher
    if _owner == os.getpid() or threading.current_thread() is not threading.main_thread():
        return
    try:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (OSError, ValueError):  # then the main thread ends the process, once it can
        pass
    else:
        _watcher = threading.Thread(target=_watch, args=(read_fd,), name="cpq-signals", daemon=True)
        _watcher.start()
    _owner = os.getpid()
    for signum in _WORDS:
        signal.signal(signum, _on_signal)
    os.register_at_fork(after_in_child=_in_forked_child)


def _in_forked_child() -> None:
    """A forked child (an extraction worker) leaves Ctrl-C, which reaches the whole process
    group, to its parent, takes the default action of SIGTERM (as the pool ends a worker), and
    must never write to the parent's wakeup fd: the parent would take a signal sent to the
    child for its own."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: with it the signal reaches the wakeup fd (the default handlers
    do not write to it), and the watching thread acts; without that thread, this one does."""
    if os.getpid() != _owner:
        # A forked child that took the signal before its handlers were reset (the Python code
        # of earlier at-fork hooks runs signal handlers).
        _in_forked_child()
        if signum == signal.SIGTERM:
            os._exit(128 + signum)
        return
    if _watcher is None or not _watcher.is_alive():
        end(signum)


def _watch(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum in _WORDS:
                end(signum)


def end(signum: int) -> NoReturn:
    """Say why, and exit with status 128 + signum (as a shell reports a process the signal
    killed) straight away."""
    try:
        os.write(2, f"cpq: {_WORDS.get(signum, 'stopped')}\n".encode())
    except OSError:  # stderr closed: nothing more can be said
        pass
    os._exit(128 + signum)
