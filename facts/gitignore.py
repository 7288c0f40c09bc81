"""What `.gitignore` files leave out of an assessment, as git reads them.

Generated code, vendored copies and build output are what a repository ignores, and what an
assessment of its code should not judge.  The subset of gitignore(5) read here:

- a `.gitignore` in any folder of the walk, its patterns relative to that folder; those of the
  folders above PATH up to the top of the repository (the folder holding `.git`), and the
  repository's `.git/info/exclude`; outside a repository, the `.gitignore` files from PATH down;
- blank lines and `#` comments skipped, trailing spaces dropped unless escaped (`\\ `), `\\#`
  and `\\!` for a literal `#` or `!`;
- `!pattern` re-includes what an earlier pattern ignored (but, as in git, nothing inside an
  ignored folder: the walk never enters it);
- a trailing `/` matches folders only; a `/` at the start or in the middle anchors the pattern
  at the .gitignore's folder, otherwise it matches a name at any depth; `*`, `?`, `[...]` and
  `**` as in git (config.globs matches them);
- the last matching line decides, and a deeper .gitignore over a higher one, over
  `.git/info/exclude`.

Not read: the user's global excludes file (core.excludesFile), which is about one person's
editor files rather than what a repository builds; `git check-ignore` answers for those.
A line that is no glob (an unterminated `[`) is skipped, as git skips it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..config.globs import Glob, GlobError, compile_glob

GITIGNORE = ".gitignore"
# A larger ignore file is not one anybody wrote by hand; it is not read.
MAX_IGNORE_FILE = 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Rule:
    glob: Glob
    negate: bool


@dataclass(frozen=True, slots=True)
class _Group:
    """The lines of one ignore file; a path relative to the walk's root is made relative to
    the file's folder by dropping `strip` characters and putting `prefix` before it."""

    rules: tuple[_Rule, ...]
    prefix: str = ""
    strip: int = 0


def repository_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` (absolute, symlinks kept) holding `.git`."""
    here = Path(os.path.abspath(start))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


class GitIgnore:
    """The ignore files that apply in one folder of a walk (`entering` gives a subfolder's)."""

    def __init__(self, groups: tuple[_Group, ...] = (), hits: list[int] | None = None) -> None:
        self._groups = groups
        self._hits = hits if hits is not None else [0]  # shared with the subfolders' objects

    @classmethod
    def above(cls, root: Path) -> GitIgnore:
        """The ignore files of the repository above the walk's root folder `root` (not
        `root`'s own .gitignore: `entering(root, "")` adds it)."""
        here = Path(os.path.abspath(root))
        top = repository_root(here)
        if top is None:
            return cls()  # not in a repository: the .gitignore files of the tree only
        folders = [here, *here.parents][: len(here.parts) - len(top.parts) + 1]  # here up to top
        groups = []
        exclude = _info_exclude(top / ".git")
        below_top = here.relative_to(top).as_posix()
        if exclude is not None:
            groups.append(_Group(exclude, _prefix(below_top)))
        for folder in reversed(folders[1:]):  # from the top down, `root` itself left out
            rules = _read(folder / GITIGNORE)
            if rules:
                groups.append(_Group(rules, _prefix(here.relative_to(folder).as_posix())))
        return cls(tuple(g for g in groups if g.rules))

    @property
    def hits(self) -> int:
        """How many files and folders were found ignored."""
        return self._hits[0]

    def entering(self, folder: Path, relpath: str) -> GitIgnore:
        """The rules inside `folder` (`relpath`: its path from the walk's root, "" for the root
        itself, else ending in "/"), with its own .gitignore, if any, last."""
        rules = _read(folder / GITIGNORE)
        if not rules:
            return self
        return GitIgnore((*self._groups, _Group(rules, "", len(relpath))), self._hits)

    def ignored(self, relpath: str) -> bool:
        """Whether the path `relpath` from the walk's root (a folder: ending in "/") is ignored."""
        for group in reversed(self._groups):
            path = group.prefix + relpath[group.strip :]
            for rule in reversed(group.rules):
                if rule.glob.matches_exactly(path):
                    if rule.negate:
                        return False
                    self._hits[0] += 1
                    return True
        return False


def _prefix(relpath: str) -> str:
    return "" if relpath in ("", ".") else relpath + "/"


def _info_exclude(dot_git: Path) -> tuple[_Rule, ...] | None:
    """The lines of the repository's info/exclude; `.git` is a folder, or a file naming the
    git folder (a worktree or a submodule), whose shared folder holds info/ for a worktree."""
    git_dir = dot_git
    if dot_git.is_file():
        try:
            line = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None
        if not line.startswith("gitdir:"):
            return None
        git_dir = (dot_git.parent / line.removeprefix("gitdir:").strip()).resolve()
        common = _read_text(git_dir / "commondir")
        if common is not None:
            git_dir = (git_dir / common.strip()).resolve()
    return _read(git_dir / "info" / "exclude")


def _read(path: Path) -> tuple[_Rule, ...]:
    text = _read_text(path)
    return parse_lines(text) if text else ()


def _read_text(path: Path) -> str | None:
    """The text of a regular file of a sensible size; None for anything else (a pipe named
    .gitignore must not be waited on)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_IGNORE_FILE:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def parse_lines(text: str) -> tuple[_Rule, ...]:
    """The rules of an ignore file's text."""
    rules = []
    for raw in text.splitlines():
        line = raw
        while line.endswith(" ") and not line.endswith("\\ "):
            line = line[:-1]
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        if not line.strip("/"):
            continue
        try:
            rules.append(_Rule(compile_glob(line), negate))
        except GlobError:
            continue
    return tuple(rules)
