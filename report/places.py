"""Where a finding is, said the way each reader of a report needs it.

- `shown`: PATH as the user typed it joined with the file (`src/solver.py`), for the terminal
  and editors, which open it from where cpq was run.
- `repo_path`: relative to the repository root — the nearest folder above PATH holding `.git`
  (a folder, or a file in a worktree or submodule), found by walking up, without running git —
  so GitHub and GitLab place it in the checkout whatever folder was assessed; relative to PATH
  (its folder, for a file) when PATH is in no repository.
- `line`, `column`: in the file on disk.  In a notebook the line is the line of the `.ipynb`
  JSON that holds the source line (report/notebook_lines.py), what a viewer of the raw file
  counts, and the column is unknown (None); `cell` is then (cell, line in the cell), the
  place a reader of the rendered notebook looks at.

Columns are the first non-blank character of the line, as the SARIF region starts: the facts
hold lines only (columns would cost every run, facts/spans.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..facts.gitignore import repository_root
from ..pipeline.assessment import Assessment, Finding
from .notebook_lines import NotebookLines


@dataclass(frozen=True, slots=True)
class Place:
    shown: str
    repo_path: str
    line: int
    column: int | None
    cell: tuple[int, int] | None = None

    @property
    def cell_label(self) -> str:
        """`cell 3:line 4` in a notebook, else empty."""
        return f"cell {self.cell[0]}:line {self.cell[1]}" if self.cell else ""

    @property
    def terminal(self) -> str:
        """`src/solver.py:12:5`, `nb.ipynb:cell 3:line 4` (what `cpq why` accepts too)."""
        if self.cell is not None:
            return f"{self.shown}:{self.cell_label}"
        return f"{self.shown}:{self.line}:{self.column or 1}"


def assessed_folder(root: Path) -> Path:
    """The folder finding paths are relative to: PATH, or the folder of a single file."""
    return root if root.is_dir() else root.parent


class Places:
    """The places of an assessment's findings (notebooks read again only when asked)."""

    def __init__(self, a: Assessment) -> None:
        self._a = a
        self.folder = assessed_folder(a.root)
        self.repo_root = repository_root(self.folder)
        absolute = Path(os.path.abspath(self.folder))
        if self.repo_root is not None:
            inside = absolute.relative_to(self.repo_root).as_posix()
            self._prefix = "" if inside == "." else inside + "/"
            self.base = self.repo_root
        else:
            self._prefix = ""
            self.base = absolute
        self._notebooks: dict[str, NotebookLines | None] = {}

    def repo_path(self, file: str) -> str:
        return self._prefix + file.replace("\\", "/")

    def shown(self, file: str) -> str:
        return str(self.folder / file)

    def place(self, f: Finding) -> Place:
        return self.at(f.file, f.line)

    def at(self, file: str, line: int) -> Place:
        shown, repo_path = self.shown(file), self.repo_path(file)
        notebook = self._a.notebooks.get(file)
        if notebook is not None:
            try:
                cell = notebook.location(line)
            except ValueError:
                cell = None
            if cell is not None:
                json_line = self.notebook_lines(file)
                found = json_line.json_line(*cell) if json_line is not None else None
                # Unknown (the notebook changed or went since it was read): its first line.
                return Place(shown, repo_path, found or 1, None, cell)
        raw = self._a.raw_line(file, line)
        column = len(raw) - len(raw.lstrip()) + 1 if raw.strip() else 1
        return Place(shown, repo_path, line, column)

    def notebook_lines(self, file: str) -> NotebookLines | None:
        if file not in self._notebooks:
            try:
                text = (self.folder / file).read_text(encoding="utf-8-sig")
            except (OSError, UnicodeDecodeError):
                self._notebooks[file] = None
            else:
                self._notebooks[file] = NotebookLines(text)
        return self._notebooks[file]
