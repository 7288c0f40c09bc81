"""A progress bar on stderr for long runs, and nothing at all for short ones.

It draws only when stderr is a terminal (CI logs and pipes stay clean), the run
is not quiet, and more than `delay` seconds have passed (a run that finishes
in a second should not flicker). Results go to stdout, so the bar erases its
line when done.

    with Progress(total=len(files), label="assessing", quiet=quiet) as p:
        for f in files:
            ...
            p.advance()
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

REDRAW_EVERY = 0.1  # seconds; redrawing on every file would cost more than small files do


class Progress:
    def __init__(
        self,
        total: int | None,
        label: str = "",
        quiet: bool = False,
        *,
        stream: TextIO | None = None,
        delay: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total if total and total > 0 else None
        self.label = label
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        self._delay = delay
        self._clock = clock
        self._start = clock()
        self._last_draw = float("-inf")
        self._drawn_width = 0
        self._enabled = not quiet and _is_tty(self._stream)

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

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self._enabled:
            return
        now = self._clock()
        if now - self._start < self._delay or now - self._last_draw < REDRAW_EVERY:
            return
        self._last_draw = now
        self._draw(self._line())

    def close(self) -> None:
        """Erase the bar, so the terminal shows only what the run printed."""
        if self._drawn_width:
            self._stream.write("\r" + " " * self._drawn_width + "\r")
            self._stream.flush()
            self._drawn_width = 0
        self._enabled = False

    def _line(self) -> str:
        label = f"cpq: {self.label} " if self.label else "cpq: "
        if self.total is None:
            return f"{label}{self.done}"
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


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False  # a closed or unusual stream: no bar
