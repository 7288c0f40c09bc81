"""What a question points at: the finding tuples at FILE:LINE, the verdict, a gate.

Every failure is a TargetError with a one-line message that says what does exist instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..engine import Database

NEAR = 3  # lines either side searched for "findings near that line"


class TargetError(ValueError):
    """The question names nothing that exists; the message says what does."""


class NotebookLines(Protocol):
    """What a notebook's locations are read from (facts.notebook.NotebookSource)."""

    line_map: list[tuple[int, int]]  # module line - 1 -> (cell, line within the cell)


# A notebook location as the reports write it: `nb.ipynb:cell 17:line 7`.
_NOTEBOOK_LOCATION = re.compile(r"(?P<file>.+):\s*cell\s+(?P<cell>\d+)\s*:\s*line\s+(?P<line>\d+)\s*", re.I)


@dataclass(frozen=True)
class Target:
    """FILE:LINE as asked: `line` is a line of the file, or of cell `cell` of a notebook."""

    file: str
    line: int
    cell: int | None = None


def parse_file_line(text: str) -> Target:
    """FILE:LINE, or a notebook's FILE:cell N:line M."""
    notebook = _NOTEBOOK_LOCATION.fullmatch(text)
    if notebook is not None:
        cell, line = int(notebook["cell"]), int(notebook["line"])
        if cell < 1 or line < 1:
            raise TargetError(f"cells and lines count from 1, got {text!r}")
        return Target(notebook["file"], line, cell)
    file, sep, line_text = text.rpartition(":")
    if not sep or not file or not line_text.strip().isdigit() or int(line_text) < 1:
        raise TargetError(f"expected FILE:LINE (e.g. solver.py:52) or NOTEBOOK:cell N:line M, got {text!r}")
    return Target(file, int(line_text))


def module_line(target: Target, file: str, notebooks: Mapping[str, NotebookLines]) -> int:
    """The line of the assessed `file` that `target` names: a notebook's cells are assessed as
    one module, so `cell N:line M` becomes the module line the reports map back to it."""
    notebook = notebooks.get(file)
    if target.cell is None:  # a notebook's joined module lines are accepted too
        return target.line
    if notebook is None:
        raise TargetError(f"{file} is not a notebook: give FILE:LINE")
    for index, (cell, within) in enumerate(notebook.line_map, start=1):
        if (cell, within) == (target.cell, target.line):
            return index
    cells = sorted({cell for cell, _ in notebook.line_map})
    if target.cell not in cells:
        shown = ", ".join(map(str, cells[:12])) + (", ..." if len(cells) > 12 else "")
        raise TargetError(f"{file} has no code cell {target.cell}; its code cells are {shown or 'none'}")
    count = sum(1 for cell, _ in notebook.line_map if cell == target.cell)
    raise TargetError(f"cell {target.cell} of {file} has {count} lines; there is no line {target.line}")


def assessed_files(db: Database) -> list[str]:
    return [file for (file,) in db.con.execute('SELECT "file" FROM "source_file"').fetchall()]


def resolve_file(text: str, files: Sequence[str]) -> str:
    """The assessed file meant by `text`: exact, or the one whose path ends (or starts) with it."""
    path = text.replace("\\", "/").removeprefix("./")
    if path in files:
        return path
    matches = [f for f in files if f.endswith("/" + path) or path.endswith("/" + f)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise TargetError(f"{text!r} is ambiguous: {', '.join(sorted(matches)[:6])}")
    shown = ", ".join(sorted(files)[:8]) + (", ..." if len(files) > 8 else "")
    raise TargetError(f"no assessed file {text!r}; files are relative to PATH: {shown or 'none'}")


def check_line(db: Database, file: str, line: int) -> None:
    """A TargetError when `line` is past the end of `file` (its length is in source_file)."""
    row = db.con.execute('SELECT "lines" FROM "source_file" WHERE "file" = ?', [file]).fetchone()
    if row is not None and line > int(row[0]):
        raise TargetError(f"{file} has {row[0]} lines; there is no line {line}")


def known_codes(db: Database) -> list[str]:
    return sorted(code for code, *_ in db.rows("code_info"))


def code_titles(db: Database) -> dict[str, tuple[str, str]]:
    """code -> (title, kind), as code_info says."""
    return {code: (title, kind) for code, kind, title, *_ in db.rows("code_info")}


def find_findings(db: Database, code: str, file: str, line: int) -> list[tuple]:
    return db.con.execute(
        'SELECT "code", "file", "line", "func" FROM "finding" WHERE "code" = ? AND "file" = ? AND "line" = ? '
        'ORDER BY "func"',
        [code, file, line],
    ).fetchall()


def nearby_findings(db: Database, file: str, line: int, radius: int = NEAR) -> list[tuple]:
    return db.con.execute(
        'SELECT "code", "file", "line", "func" FROM "finding" WHERE "file" = ? AND abs("line" - ?) <= ? '
        'ORDER BY abs("line" - ?), "line", "code"',
        [file, line, radius, line],
    ).fetchall()


def describe_nearby(db: Database, file: str, line: int) -> str:
    near = nearby_findings(db, file, line)
    if not near:
        return f"no finding within {NEAR} lines of {file}:{line}"
    items = [f"{code} {f}:{ln} ({func})" for code, f, ln, func in near[:10]]
    return "on or near that line: " + ", ".join(items)


def finding_tuples(db: Database, code: str, file: str, line: int) -> list[tuple]:
    """The finding tuples to prove, or a TargetError naming the findings that do exist nearby."""
    code = code.upper()
    check_line(db, file, line)
    codes = known_codes(db)
    if code not in codes:
        raise TargetError(
            f"unknown code {code!r} (known: {codes[0]}..{codes[-1]}); {describe_nearby(db, file, line)}"
        )
    found = find_findings(db, code, file, line)
    if not found and is_disabled(db, code, file):
        raise TargetError(
            f"{code} is turned off for {file} by the select/ignore of [tool.cpq] (pyproject.toml): "
            "no finding of it is derived there"
        )
    if not found:
        hint = f"; `cpq why not {code} {file}:{line}` shows what is missing"
        raise TargetError(f"no {code} finding at {file}:{line}; {describe_nearby(db, file, line)}{hint}")
    return found


def is_disabled(db: Database, code: str, file: str) -> bool:
    """Whether [tool.cpq] turns `code` off for `file` (the input relation `disabled`)."""
    if "disabled" not in db.program.relations:  # a user's --rules file may do without it
        return False
    query = 'SELECT 1 FROM "disabled" WHERE "code" = ? AND "file" = ? LIMIT 1'
    return db.con.execute(query, [code, file]).fetchone() is not None


def verdict_tuples(db: Database) -> list[tuple]:
    rows = db.rows("verdict")
    if not rows:
        raise TargetError("no verdict was derived (is the rules file complete?)")
    return rows


def gate_tuples(db: Database, number: int) -> list[tuple]:
    rows = [row for row in db.rows("gate_status") if row[0] == number]
    if not rows:
        known = sorted({row[0] for row in db.rows("gate_status")})
        raise TargetError(f"no gate {number}; gates are {', '.join(map(str, known)) or 'none'}")
    return rows
