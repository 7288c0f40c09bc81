"""Jupyter notebooks as one Python module, with locations mapped back to cells.

The code cells are joined in notebook order into one module, so names defined
in one cell are known in the next, as when the notebook is run top to bottom.
Every source line keeps exactly one line in the module, so a module line maps
back to (cell, line in cell) without offsets:

- IPython-only lines that Python cannot parse become `pass` at the same
  indentation (it keeps an enclosing block valid): line magics `%...`, shell
  escapes `!...`, help lookups `np.sum?` / `?np.sum`. `%time STMT` and
  `%timeit STMT` keep STMT, because timing lines often hold the hot call.
- A cell magic (`%%bash`, `%%writefile`, ...) makes the cell non-Python: all
  its lines become blank. `%%time`, `%%timeit`, `%%capture` and `%%prun` run
  their body as Python, so only their first line becomes `pass`.
- A code cell that still does not parse (scratch work, a half-written cell) is
  blanked and listed in `skipped_cells`, so one broken cell does not hide the
  rest of the notebook.

Cells are numbered by position among *all* cells (markdown and raw included),
1-based: that is the number a reader finds by counting cells in Jupyter,
VS Code or GitHub's viewer. Execution counts (`In [7]`) are not used; they
change on every run and are absent from unexecuted notebooks.

nbformat 4 (`cells[].source`, a string or a list of strings) and nbformat 3
(`worksheets[].cells[].input`) are read. Notebooks whose kernel language is
not Python raise `NotebookError`.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any


class NotebookError(ValueError):
    """Input that is not a readable Python notebook; the message says why."""


# Cell magics whose body is ordinary Python.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})

_LINE_MAGIC = re.compile(r"^(\s*)(?:[A-Za-z_][\w.]*\s*=\s*)?[%!]")
_TIMED = re.compile(r"^(\s*)%(?:time|timeit)\b((?:\s+-\w+(?:\s+\d\S*)?)*)\s+(\S.*)$")
# Only these end a line for Python (and tree-sitter); str.splitlines also splits at \x0c,
# \u2028 and others, which would move the lines after them and break string literals.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_HELP = re.compile(r"^\s*(?:\?{1,2}[\w.]+|[\w.\[\]()'\"]+\?{1,2})\s*$")


@dataclass
class NotebookSource:
    """The notebook's code as one module, and the way back from module lines to cells."""

    text: str
    line_map: list[tuple[int, int]] = field(default_factory=list)  # module line - 1 -> (cell, line)
    cell_count: int = 0
    skipped_cells: list[tuple[int, str]] = field(default_factory=list)  # (cell, reason)

    def location(self, line: int) -> tuple[int, int]:
        """(cell number, line within the cell), both 1-based, for a 1-based module line."""
        if not 1 <= line <= len(self.line_map):
            raise ValueError(f"line {line} is outside the notebook's {len(self.line_map)} code lines")
        return self.line_map[line - 1]

    def label(self, line: int) -> str:
        """`cell 3:line 4`, the location shown after the notebook's path."""
        cell, within = self.location(line)
        return f"cell {cell}:line {within}"


def notebook_to_source(data: bytes | str) -> NotebookSource:
    """Read a notebook's JSON (bytes or text) into a `NotebookSource`."""
    nb = _load_json(data)
    language = _language(nb)
    if language not in ("", "python", "python3", "ipython", "ipython3"):
        raise NotebookError(f"not a Python notebook (kernel language: {_shown(language)})")
    lines: list[str] = []
    line_map: list[tuple[int, int]] = []
    skipped: list[tuple[int, str]] = []
    cells = _cells(nb)
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        source = _cell_text(cell, number)
        code, reason = _python_lines(_lines(source))
        if reason:
            skipped.append((number, reason))
        lines += code
        line_map += [(number, i) for i in range(1, len(code) + 1)]
    text = "\n".join(lines) + "\n" if lines else ""
    return NotebookSource(text, line_map, len(cells), skipped)


def _load_json(data: bytes | str) -> dict[str, Any]:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise NotebookError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        nb = json.loads(data)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise NotebookError("JSON nested too deeply to read") from None
    except ValueError as exc:  # an integer of more digits than Python converts (sys.int_info)
        raise NotebookError(f"unreadable JSON value: {str(exc).split(';')[0]}") from None
    if not isinstance(nb, dict):
        raise NotebookError(f"not a Jupyter notebook (the JSON is a {type(nb).__name__}, not an object)")
    return nb


def _language(nb: dict[str, Any]) -> str:
    meta = nb.get("metadata")
    if not isinstance(meta, dict):
        return ""
    for key, sub in (("kernelspec", "language"), ("language_info", "name")):
        value = meta.get(key, {})
        name = value.get(sub) if isinstance(value, dict) else None
        if isinstance(name, str):
            return name.strip().lower()
    return ""


def _cells(nb: dict[str, Any]) -> list[dict[str, Any]]:
    major = nb.get("nbformat")
    if "cells" in nb:
        cells = nb["cells"]
    elif "worksheets" in nb:
        sheets = nb["worksheets"]
        if not isinstance(sheets, list) or not all(isinstance(w, dict) for w in sheets):
            raise NotebookError("not a Jupyter notebook ('worksheets' is not a list of objects)")
        listed = [w.get("cells", []) for w in sheets]
        if not all(isinstance(c, list) for c in listed):
            raise NotebookError("not a Jupyter notebook (a worksheet's 'cells' is not a list)")
        cells = [c for sheet in listed for c in sheet]
    else:
        raise NotebookError("not a Jupyter notebook (no 'cells' list)")
    if isinstance(major, int) and major < 3:
        raise NotebookError(f"nbformat {major} is not supported (3 and 4 are)")
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise NotebookError("not a Jupyter notebook ('cells' is not a list of objects)")
    return cells


def _cell_text(cell: dict[str, Any], number: int) -> str:
    # nbformat 4 keeps code in `source`, nbformat 3 in `input`.
    source = cell.get("source", cell.get("input", ""))
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise NotebookError(f"cell {number}: source is neither a string nor a list of strings")
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        # JSON escapes such as \ud800 decode to lone surrogates, which no report can hold.
        raise NotebookError(f"cell {number}: source holds an unpaired surrogate (not valid text)") from None
    return source


def _lines(source: str) -> list[str]:
    lines = _LINE_BREAK.split(source)
    return lines[:-1] if lines[-1] == "" else lines


def _shown(text: str) -> str:
    """`text` for a one-line message: as is when short and printable, else quoted and cut."""
    return text if len(text) <= 40 and text.isprintable() else repr(text[:40])


def _python_lines(lines: list[str]) -> tuple[list[str], str]:
    """The cell as Python lines (same count), and why it was blanked, if it was."""
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].lstrip()[2:].split(maxsplit=1)[0] if lines[0].strip() != "%%" else ""
        if name not in PYTHON_CELL_MAGICS:
            return [""] * len(lines), ""
        lines = ["pass"] + lines[1:]
    out: list[str] = []
    statement = OpenStatement()
    for line in lines:
        out.append(_python_line(line, statement.open))
        statement.feed(out[-1])
    try:
        ast.parse("\n".join(out))
    except SyntaxError as exc:
        return [""] * len(out), (f"line {exc.lineno}: " if exc.lineno else "") + exc.msg
    except ValueError as exc:  # NUL characters: a ValueError in some Python versions
        return [""] * len(out), str(exc)
    except (RecursionError, MemoryError):
        # Python's parser gives up on an expression some thousand operators deep (a+b+...,
        # -(-(...)), lambda: lambda: ...; MemoryError is its stack overflowing), which the
        # extractor handles, as in a .py file: the cell is kept, for it to judge.
        pass
    return out, ""


def _python_line(line: str, continued: bool) -> str:
    """`line` as Python; `continued`: the lines before leave a statement open."""
    stripped = line.lstrip()
    if not stripped or stripped[0] not in "%!?" and not _LINE_MAGIC.match(line) and not _HELP.match(line):
        return line
    if continued:
        return line  # inside brackets, a string or after a backslash: ordinary Python text
    timed = _TIMED.match(line)
    if timed:
        return timed.group(1) + timed.group(3)
    if _LINE_MAGIC.match(line) or _HELP.match(line):
        return line[: len(line) - len(stripped)] + "pass"
    return line


_CODE_MARK = re.compile(r"""[#'"\\()\[\]{}]""")
_STRING_END = {q: re.compile(r"\\.|\\$|" + q, re.DOTALL) for q in ("'", '"', "'''", '"""')}


class OpenStatement:
    """Whether the lines fed so far leave a statement open: inside brackets, inside a string
    or after a backslash.

    Python's lexical rules for just these (comments, quotes, escapes, brackets) are followed
    a line at a time, so a cell costs time linear in its length: tokenizing every line before
    each magic-looking line, as before, took minutes on a cell of some 10,000 `!` lines."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""  # the open string's delimiter
        self.backslash = False

    @property
    def open(self) -> bool:
        return self.depth != 0 or bool(self.quote) or self.backslash

    def feed(self, line: str) -> None:
        self.backslash = False
        opened = -1  # where on this line the open string started
        i = 0
        while i < len(line) or len(self.quote) == 1:
            if self.quote:
                end = _STRING_END[self.quote].search(line, i) if i < len(line) else None
                if end is None:
                    if len(self.quote) == 3:
                        break
                    # An unterminated one-line string: as Python's tokenizer does, the quote is
                    # an error and the rest of the line is read as code (if it began here).
                    self.quote = ""
                    if opened < 0:
                        break
                    i = opened + 1
                    continue
                i = end.end()
                if end.group() == "\\":
                    return  # a backslash ending the line continues the string
                if end.group()[0] != "\\":
                    self.quote = ""
                continue
            mark = _CODE_MARK.search(line, i)
            if mark is None or mark.group() == "#":
                break
            ch, i = mark.group(), mark.end()
            if ch == "\\":
                self.backslash = i == len(line)
            elif ch in "'\"":
                opened = i - 1
                self.quote = ch * 3 if line.startswith(ch * 3, opened) else ch
                i = opened + len(self.quote)
            elif ch in "([{":
                self.depth += 1
            else:
                self.depth -= 1  # a stray closer (an error) leaves it open, as for the tokenizer
