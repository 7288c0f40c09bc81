"""What a long run is doing, on one line of stderr, and nothing at all for short ones.

The line names the phase (discovering, extracting, loading, evaluating, rendering): a bar
where the work is counted (files), a spinner with the phase's elapsed seconds where it is not
(the evaluation holds the main thread in DuckDB for seconds, so a thread redraws the line
meanwhile), with a detail the pipeline gives (strata done).

It draws only when stderr is a terminal, the run is not quiet, not in CI (`CI=true` or
`CI=1`: a CI log keeps every redraw a terminal would overwrite) and `TERM` is not `dumb`, and
only once `delay` seconds have passed (a run that finishes in a second should not flicker).
Results go to stdout, so the line is erased when done.

    progress = Progress.for_run(quiet)
    progress.phase("extracting", total=len(files))
    for f in files:
        ...
        progress.advance()
    progress.phase("evaluating rules")
    ...
    progress.close()
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TextIO

REDRAW_EVERY = 0.1  # seconds; redrawing on every file would cost more than small files do
DEFAULT_DELAY = 1.0  # seconds of a run with nothing drawn
SPINNER = "-\\|/"  # ASCII: any terminal encoding draws it


def in_ci(environ: Mapping[str, str]) -> bool:
    """Whether the run is in CI: `CI=true` (GitHub, GitLab, most others) or `CI=1`."""
    return environ.get("CI", "").strip().lower() in ("true", "1")


def wanted(stream: TextIO, quiet: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Whether progress may be drawn on `stream`."""
    environ = os.environ if environ is None else environ
    if quiet or in_ci(environ) or environ.get("TERM") == "dumb":
        return False
    return _is_tty(stream)


class Progress:
    def __init__(
        self,
        total: int | None = None,
        label: str = "",
        quiet: bool = False,
        *,
        stream: TextIO | None = None,
        delay: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        environ: Mapping[str, str] | None = None,
        ticking: bool = False,
    ) -> None:
        """`ticking`: a thread redraws the line while nothing else does (a spinner's phase)."""
        self._stream = stream if stream is not None else sys.stderr
        self._delay = DEFAULT_DELAY if delay is None else delay
        self._clock = clock
        self._start = clock()
        self._last_draw = float("-inf")
        self._drawn_width = 0
        # Drawing is from the caller's thread and the ticking thread: one at a time.
        self._lock = threading.RLock()
        self._enabled = wanted(self._stream, quiet, environ)
        self.phases: list[str] = []  # every phase this run went through, in order
        self._set_phase(label, total)
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if ticking and self._enabled:
            self._ticker = threading.Thread(target=self._tick_until_closed, name="cpq-progress", daemon=True)
            self._ticker.start()

    @classmethod
    def for_run(cls, quiet: bool) -> Progress:
        """The progress of a command on stderr, redrawn while a phase counts nothing."""
        return cls(quiet=quiet, ticking=True)

    @classmethod
    def silent(cls) -> Progress:
        """One that never draws (for callers that asked for none)."""
        return cls(quiet=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def drawn(self) -> bool:
        return self._drawn_width > 0

    def phase(self, label: str, total: int | None = None) -> None:
        """Start the next phase: counted up to `total`, or a spinner with elapsed seconds.
        Drawn at once (past the delay), so even a short phase shows."""
        with self._lock:
            self._set_phase(label, total)
            if self._due(self._clock(), throttle=False):
                self._draw(self._line())

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            if self._due(self._clock()):
                self._draw(self._line())

    def detail(self, text: str) -> None:
        """What the phase has got to, beside its name (e.g. `12/87 strata`)."""
        with self._lock:
            self._detail = text
            if self._due(self._clock()):
                self._draw(self._line())

    def say(self, line: str) -> None:
        """A line for the user (a warning) on the same stream: the status line is erased
        first and comes back at the next redraw."""
        with self._lock:
            self._erase()
            self._stream.write(line + "\n")
            self._stream.flush()

    def close(self) -> None:
        """Erase the line, so the terminal shows only what the run printed."""
        self._stop.set()
        ticker = self._ticker
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join()
        with self._lock:
            self._erase()
            self._enabled = False

    # -- drawing ---------------------------------------------------------------------------

    def _set_phase(self, label: str, total: int | None) -> None:
        self.label = label
        self.total = total if total and total > 0 else None
        self.done = 0
        self._detail = ""
        self._phase_start = self._clock()
        if label:
            self.phases.append(label)

    def _due(self, now: float, throttle: bool = True) -> bool:
        if not self._enabled or now - self._start < self._delay:
            return False
        if throttle and now - self._last_draw < REDRAW_EVERY:
            return False
        self._last_draw = now
        return True

    def _tick_until_closed(self) -> None:
        while not self._stop.wait(REDRAW_EVERY):
            with self._lock:
                # A counted phase redraws as it advances; only a spinner needs the thread. (So
                # this thread is idle while extraction forks its workers.)
                if self.total is None and self._due(self._clock(), throttle=False):
                    self._draw(self._line())

    def _line(self) -> str:
        label = f"cpq: {self.label} " if self.label else "cpq: "
        if self.total is None:
            elapsed = self._clock() - self._phase_start
            spin = SPINNER[int(elapsed / REDRAW_EVERY) % len(SPINNER)]
            what = self._detail or (str(self.done) if self.done else "")
            return f"{label}{spin} " + (f"{what}, " if what else "") + f"{elapsed:.1f}s"
        width = max(10, min(40, shutil.get_terminal_size((80, 24)).columns - len(label) - 20))
        frac = min(1.0, self.done / self.total)
        filled = int(frac * width)
        bar = "#" * filled + "-" * (width - filled)
        return f"{label}[{bar}] {min(self.done, self.total)}/{self.total}"

    def _draw(self, text: str) -> None:
        pad = max(0, self._drawn_width - len(text))
        self._stream.write("\r" + text + " " * pad)
        self._stream.flush()
        self._drawn_width = len(text)

    def _erase(self) -> None:
        if self._drawn_width:
            self._stream.write("\r" + " " * self._drawn_width + "\r")
            self._stream.flush()
            self._drawn_width = 0


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False  # a closed or unusual stream: no progress
