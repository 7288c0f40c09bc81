"""Work done in a thread of its own while the caller goes on: DuckDB's and hashlib's work,
which leaves the interpreter to the caller meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Background:
    """`work()` run in a thread of its own from the start; `wait` returns once it is done and
    raises what it raised, in the thread that waits."""

    def __init__(self, work: Callable[[], None], name: str) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), name=name)
        self._thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:  # raised again in the thread that waits
            self._error = exc

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error
