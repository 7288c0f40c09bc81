"""Where each line of a notebook's code cells is written in the notebook's JSON file.

A finding in a notebook is at `cell 3:line 4`; a viewer that shows the `.ipynb` file as text
(GitHub's code scanning alert, a merge request's diff) counts lines of the JSON.  Jupyter,
VS Code and nbformat write a cell's `source` as a list of strings, one source line each, on a
JSON line of its own, so that JSON line is where the source line is.  Python's JSON reader
keeps no positions, so the document is walked here: strings and skipped values are read by
the json module itself (`JSONDecoder.raw_decode`), only the way down to each cell's source
is followed by hand.  Cells are numbered as `cpq.facts.notebook` numbers them: by position
among all cells, nbformat 4 `cells[]` or nbformat 3 `worksheets[].cells[]`, from 1.
"""

from __future__ import annotations

import itertools
import json
import re
from bisect import bisect_right
from collections.abc import Callable

_SPACE = re.compile(r"[ \t\n\r]*")
# The line breaks facts.notebook splits a cell's source at (Python's own).
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_DECODER = json.JSONDecoder()


class _Unreadable(ValueError):
    """Not the JSON of a notebook this walk can follow."""


class NotebookLines:
    """For each code line of each cell, the 1-based line of the JSON file where it is written."""

    def __init__(self, text: str) -> None:
        self._breaks = [m.start() for m in re.finditer("\n", text)]
        # cell number -> (offset of each source string in the file, its text)
        self._cells: dict[int, list[tuple[int, str]]] = {}
        try:
            self._read_document(text)
        except (_Unreadable, ValueError, IndexError, RecursionError):
            self._cells = {}

    def json_line(self, cell: int, line: int) -> int | None:
        """The file line holding the start of line `line` of cell `cell`; None when unknown."""
        strings = self._cells.get(cell)
        if not strings or line < 1:
            return None
        joined = "".join(value for _, value in strings)
        start = 0
        if line > 1:
            # Breaks are found in the joined source: a "\r" ending one string and a "\n"
            # starting the next are one break, as when the cell is read.
            breaks = list(itertools.islice(_LINE_BREAK.finditer(joined), line - 1))
            if len(breaks) < line - 1:
                return None
            start = breaks[-1].end()
        if start >= len(joined):
            return None
        starts = list(itertools.accumulate((len(value) for _, value in strings[:-1]), initial=0))
        # The last string starting at or before `start`: empty strings before it start there too.
        offset = strings[bisect_right(starts, start) - 1][0]
        return self._line_at(offset)

    def _line_at(self, offset: int) -> int:
        return bisect_right(self._breaks, offset) + 1

    # -- the walk ---------------------------------------------------------------------------

    def _read_document(self, text: str) -> None:
        start = _SPACE.match(text, 1 if text.startswith("\ufeff") else 0).end()  # type: ignore[union-attr]
        members = _object_members(text, start)
        if "cells" in members:
            cells = _array_items(text, members["cells"])
        elif "worksheets" in members:
            cells = []
            for sheet in _array_items(text, members["worksheets"]):
                sheet_members = _object_members(text, sheet)
                if "cells" in sheet_members:
                    cells += _array_items(text, sheet_members["cells"])
        else:
            raise _Unreadable("no cells")
        for number, cell in enumerate(cells, start=1):
            fields = _object_members(text, cell)
            at = fields.get("source", fields.get("input"))
            if at is None:
                continue
            if text.startswith('"', at):
                value, _ = _string(text, at)
                self._cells[number] = [(at, value)]
            elif text.startswith("[", at):
                items = _array_items(text, at)
                # A list holding anything but strings is no source (facts.notebook refuses it).
                if all(text.startswith('"', item) for item in items):
                    self._cells[number] = [(item, _string(text, item)[0]) for item in items]


def _object_members(text: str, at: int) -> dict[str, int]:
    """The members of the object at `at`: key -> offset of its value (the last of a repeated
    key, as json.loads keeps it)."""
    members: dict[str, int] = {}

    def member(i: int) -> int:
        if not text.startswith('"', i):
            raise _Unreadable("an object key that is not a string")
        key, i = _string(text, i)
        i = _skip_space(text, i)
        if not text.startswith(":", i):
            raise _Unreadable("no ':' after a key")
        value = _skip_space(text, i + 1)
        members[key] = value
        return _after_value(text, value)

    _walk_items(text, at, "{}", "object", member)
    return members


def _array_items(text: str, at: int) -> list[int]:
    """The offsets of the items of the array at `at`."""
    items: list[int] = []

    def item(i: int) -> int:
        items.append(i)
        return _after_value(text, i)

    _walk_items(text, at, "[]", "array", item)
    return items


def _walk_items(text: str, at: int, brackets: str, what: str, read: Callable[[int], int]) -> None:
    """Call `read` on the offset of each item of the container at `at` (`brackets`: its opening
    and closing characters); `read` returns the offset after the item."""
    opening, closing = brackets
    if not text.startswith(opening, at):
        raise _Unreadable(f"not an {what}")
    i = _skip_space(text, at + 1)
    if text.startswith(closing, i):
        return
    while True:
        i = read(i)
        if text.startswith(",", i):
            i = _skip_space(text, i + 1)
        elif text.startswith(closing, i):
            return
        else:
            raise _Unreadable(f"an {what} not closed")


def _string(text: str, at: int) -> tuple[str, int]:
    """The string whose opening quote is at `at`, and the offset after it."""
    value, end = _DECODER.raw_decode(text, at)
    if not isinstance(value, str):
        raise _Unreadable("not a string")
    return value, end


def _after_value(text: str, at: int) -> int:
    """The offset after the value at `at` and the blanks that follow it."""
    _, end = _DECODER.raw_decode(text, at)
    return _skip_space(text, end)


def _skip_space(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]
