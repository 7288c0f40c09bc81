"""`#include "file"`: a program spread over files, joined into one text before it is parsed.

Soufflé runs its programs through the C preprocessor; of that, cpq understands the one line
a program split into files needs, `#include "path"` on a line of its own:

* the path is relative to the folder of the file that includes it, and may not leave the folder
  of the entry file (no absolute paths, no `..` out of it), so a program is one folder tree;
* a file is included once: a second `#include` of it is skipped (an include guard for free);
* a cycle, a missing file or a path out of the folder is a DatalogError at the `#include`;
* one folder of the path may be `*` (cpq's own, not the C preprocessor's): every folder there
  that holds the file, in name order (`#include "rules/codes/*/rules.dl"` takes each R-code's
  folder), so that adding a folder adds its rules with no line to edit.  Soufflé is given the
  joined text (`cpq rules --export`), where the pattern is expanded;
* `#include <NAME>` includes a *library*, a program kept elsewhere that the caller names
  (`Library`): `#include <cpq>` in a user's rules file is the shipped rules (rules/program.py).
  Its files are named `<NAME>/FILE` ("<cpq>/rules/arrays.dl"), its includes are relative
  to its own folder and may not leave it, and it is included once like any file.  Any other
  name in angle brackets is an error at the line.

Lines are read as lines, not through the grammar: an `#include` line inside a `/* */` comment
is expanded all the same (cpp would not), and other `#` lines are left to the parser's error.

The parser sees one text, the *joined* text: every line of every file as written, each run
of lines from one file (a *part*) preceded by `// ---- from FILE` between blank lines (so that
a doc comment never runs into the marker); runs of blank lines between includes are left out.
A text without `#include` is its own joined text.
`SourceMap` takes a line of the joined text back to its file and line there: the parser and the
checks work on the joined text alone, and positions are translated where they are shown.
"""

from __future__ import annotations

import os
import posixpath
import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath

from .errors import DatalogError

# Reads a file of the program by its path relative to the entry file's folder ("rules/a.dl");
# raises OSError (or UnicodeDecodeError) when it cannot.
Reader = Callable[[str], str]
# The names in a folder of the program, by its path relative to the entry file's folder
# ([] when there is no such folder): for a `*` in an included path.
Lister = Callable[[str], list[str]]

_INCLUDE = re.compile(r"[ \t]*#[ \t]*include\b")
_TARGET = re.compile(r'[ \t]*"([^"]+)"[ \t]*(//.*)?\r?$')
_LIBRARY_TARGET = re.compile(r"[ \t]*<([^<>]*)>[ \t]*(//.*)?\r?$")
PART_MARKER = "// ---- from "


@dataclass(frozen=True, slots=True)
class Library:
    """A program `#include <NAME>` brings in: its entry file and how to read its files, by
    paths relative to its entry file's folder."""

    name: str  # as written between the brackets: "cpq"
    entry: str  # its entry file: "rules.dl"
    read: Reader
    list_names: Lister
    folder: str  # where its files are, to name them as paths in messages

    @property
    def prefix(self) -> str:
        """How its files are named in the joined program: "<cpq>/"."""
        return f"<{self.name}>/"


def library_of(file: str) -> str | None:
    """The library a program file belongs to ("cpq" for "<cpq>/rules.dl"), or None."""
    top = file.split("/", 1)[0]
    return top[1:-1] if len(top) > 2 and top.startswith("<") and top.endswith(">") else None


@dataclass(frozen=True, slots=True)
class Span:
    """Lines `start` .. `start + length - 1` of the joined text are lines `first` .. of `file`."""

    start: int
    length: int
    file: str
    first: int


@dataclass(frozen=True, slots=True)
class SourceMap:
    """Where each line of a joined text comes from.

    `entry` is the entry file as the caller named it (a path, "rules.dl", "<input>"); files are
    named relative to its folder ("rules/arrays.dl"), the entry file by its name.
    """

    entry: str
    spans: tuple[Span, ...] = ()  # none: the text is the entry file's own
    # (name, folder) of each library included: where its files are, for `path`.
    libraries: tuple[tuple[str, str], ...] = ()
    _ends: tuple[int, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ends", tuple(span.start + span.length - 1 for span in self.spans))

    @property
    def entry_name(self) -> str:
        return Path(self.entry).name or self.entry

    @property
    def files(self) -> list[str]:
        """The files of the program, in the order their first line appears."""
        return list(dict.fromkeys([self.entry_name, *(span.file for span in self.spans)]))

    def locate(self, line: int) -> tuple[str, int]:
        """(file, line in it) of a line of the joined text; a marker line belongs to its part."""
        if not self.spans or line <= 0:
            return self.entry_name, line
        index = min(bisect_left(self._ends, line), len(self.spans) - 1)
        span = self.spans[index]
        return span.file, span.first + max(0, line - span.start)

    def where(self, line: int) -> str:
        """`file:line` of a line of the joined text, as locations are shown ("rules/arrays.dl:12")."""
        file, local = self.locate(line)
        return f"{file}:{local}"

    def where_from(self, line: int, other: int) -> str:
        """`line N` when `line` is in the same file as line `other`, else `file:N`."""
        file, local = self.locate(line)
        return f"line {local}" if file == self.locate(other)[0] else f"{file}:{local}"

    def path(self, file: str) -> str:
        """A program file as a path to open: the entry's folder joined with its name."""
        if file == self.entry_name:
            return self.entry
        library = library_of(file)
        folder = dict(self.libraries).get(library) if library is not None else None
        if folder is not None:
            return os.path.join(folder, *file.split("/")[1:])
        return os.path.join(os.path.dirname(self.entry), *file.split("/"))

    def relocate(self, exc: DatalogError) -> DatalogError:
        """The error at its file and line, for an error positioned in the joined text."""
        if not self.spans or exc.line <= 0 or exc.source != self.entry:
            return exc
        file, local = self.locate(exc.line)
        return DatalogError(exc.message, source=self.path(file), line=local, column=exc.column)


@dataclass(frozen=True, slots=True)
class JoinedText:
    """A program's text with its includes expanded, and where its lines come from."""

    text: str
    source_map: SourceMap


def folder_reader(folder: Path) -> Reader:
    """Reads the program's files from `folder`, the entry file's folder."""

    def read(relative: str) -> str:
        return (folder / relative).read_text(encoding="utf-8")

    return read


def folder_lister(folder: Path) -> Lister:
    """Lists the folders of the program under `folder`, the entry file's folder."""

    def names(relative: str) -> list[str]:
        try:
            return os.listdir(folder / relative)
        except OSError:
            return []

    return names


def join_includes(
    text: str,
    source: str,
    read: Reader | None = None,
    list_names: Lister | None = None,
    libraries: Sequence[Library] = (),
) -> JoinedText:
    """Expand the `#include` lines of `text` (the entry file `source`); `read` reads the files
    it includes and `list_names` lists a folder (for a `*` in a path), by default in the
    folder of `source`; `libraries` are those `#include <NAME>` may name."""
    if not any(_INCLUDE.match(line) for line in text.split("\n")):
        return JoinedText(text, SourceMap(source))
    folder = Path(source).parent
    if read is None:
        read, list_names = folder_reader(folder), list_names or folder_lister(folder)
    joiner = _Joiner(SourceMap(source), read, list_names, {library.name: library for library in libraries})
    joiner.add_file(joiner.names.entry_name, text, ())
    used = tuple(
        (name, library.folder)
        for name, library in joiner.libraries.items()
        if any(library_of(span.file) == name for span in joiner.spans)
    )
    return JoinedText("\n".join(joiner.lines) + "\n", SourceMap(source, tuple(joiner.spans), used))


@dataclass(slots=True)
class _Joiner:
    names: SourceMap  # the entry only: names files and paths for messages
    read_own: Reader  # the files of the entry's folder
    list_own: Lister | None
    libraries: dict[str, Library]
    lines: list[str] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    done: set[str] = field(default_factory=set)

    def add_file(self, file: str, text: str, chain: tuple[str, ...]) -> None:
        chain = (*chain, file)
        self.done.add(file)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the newline that ends the last line
        part_start = 0  # index of the first line of the part not added yet
        for index, line in enumerate(lines):
            if not _INCLUDE.match(line):
                continue
            self.add_part(file, lines, part_start, index)
            part_start = index + 1
            target = self.target(file, index + 1, line)
            for included in self.expand(file, index + 1, line, target):
                if included in chain:
                    cycle = " -> ".join([*chain[chain.index(included) :], included])
                    raise self.error(file, index + 1, line, f"#include cycle: {cycle}")
                if included in self.done:
                    continue  # included before: once is enough
                self.add_file(included, self.read_file(file, index + 1, line, included), chain)
        self.add_part(file, lines, part_start, len(lines))

    def expand(self, file: str, line_no: int, line: str, target: str) -> list[str]:
        """The files an included path names: itself, or for a `*` folder, that file in every
        folder there that has it (in name order)."""
        parts = target.split("/")
        stars = [i for i, part in enumerate(parts) if "*" in part]
        if not stars:
            return [target]
        if len(stars) > 1 or parts[stars[0]] != "*" or stars[0] == len(parts) - 1:
            raise self.error(
                file,
                line_no,
                line,
                f"#include '{target}': only one whole folder name may be '*' (\"rules/codes/*/rules.dl\")",
            )
        at = stars[0]
        parent, rest = "/".join(parts[:at]), "/".join(parts[at + 1 :])
        names = self.list_names(parent)
        if names is None:
            raise self.error(file, line_no, line, f"#include '{target}': the folders cannot be listed")
        found = []
        for name in sorted(names):
            if name.startswith("."):
                continue
            candidate = posixpath.join(parent, name, rest) if parent else posixpath.join(name, rest)
            if self.exists(candidate):
                found.append(candidate)
        return found

    def exists(self, relative: str) -> bool:
        folder, name = posixpath.split(relative)
        return name in (self.list_names(folder) or [])

    def read(self, file: str) -> str:
        """A file of the program: of a library ("<cpq>/rules.dl"), or of the entry's folder."""
        library = library_of(file)
        if library is None:
            return self.read_own(file)
        return self.libraries[library].read(file.split("/", 1)[1])

    def list_names(self, folder: str) -> list[str] | None:
        """The names in a folder of the program; None when folders cannot be listed."""
        library = library_of(folder)
        if library is None:
            return self.list_own(folder) if self.list_own is not None else None
        rest = folder.split("/", 1)[1] if "/" in folder else ""
        return self.libraries[library].list_names(rest)

    def add_part(self, file: str, lines: list[str], start: int, stop: int) -> None:
        """Lines start..stop-1 (0-based) of `file`, unless there is nothing but blanks."""
        part = lines[start:stop]
        if not any(line.strip() for line in part):
            return
        if self.lines and self.lines[-1].strip():
            self.lines.append("")
        self.lines += [PART_MARKER + file, ""]
        self.spans.append(Span(len(self.lines) + 1, len(part), file, start + 1))
        self.lines += part

    def target(self, file: str, line_no: int, line: str) -> str:
        """The included file, named relative to the entry's folder."""
        rest = line[_INCLUDE.match(line).end() :]  # type: ignore[union-attr]
        bracketed = _LIBRARY_TARGET.fullmatch(rest)
        if bracketed is not None:
            return self.library_entry(file, line_no, line, bracketed.group(1).strip())
        found = _TARGET.fullmatch(rest)
        if found is None:
            raise self.error(file, line_no, line, '#include needs a file in double quotes: #include "FILE"')
        name = found.group(1)
        if name.startswith(("/", "\\")) or PureWindowsPath(name).is_absolute() or PureWindowsPath(name).drive:
            raise self.error(
                file,
                line_no,
                line,
                f"#include of an absolute path '{name}': name it relative to the including file",
            )
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(file), name))
        library = library_of(file)
        if library is not None:
            # A library's files stay in its folder: `..` out of it would reach the user's.
            if library_of(joined) != library:
                raise self.error(file, line_no, line, f"#include '{name}' leaves the folder of <{library}>")
            return joined
        if joined == ".." or joined.startswith("../"):
            raise self.error(
                file, line_no, line, f"#include '{name}' leaves the folder of {self.names.entry_name}"
            )
        named = library_of(joined)
        if named is not None:
            message = f"#include '{name}': a library is included by its name alone, #include <{named}>"
            raise self.error(file, line_no, line, message)
        return joined

    def library_entry(self, file: str, line_no: int, line: str, name: str) -> str:
        """The entry file of library `name`, as the program names it ("<cpq>/rules.dl")."""
        library = self.libraries.get(name)
        if library is None:
            known = ", ".join(f"<{known}>" for known in self.libraries)
            what = f"the only one known is {known}" if len(self.libraries) == 1 else f"known: {known}"
            if not self.libraries:
                what = "no library can be included here"
            raise self.error(
                file,
                line_no,
                line,
                f'#include <{name}>: no such library ({what}); include a file as #include "FILE"',
            )
        return library.prefix + library.entry

    def read_file(self, file: str, line_no: int, line: str, included: str) -> str:
        try:
            return self.read(included)
        except FileNotFoundError:
            reason = "no such file"
        except UnicodeDecodeError as exc:
            reason = f"not UTF-8 text ({exc.reason})"
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
        raise self.error(file, line_no, line, f"cannot #include '{included}': {reason}")

    def error(self, file: str, line_no: int, line: str, message: str) -> DatalogError:
        column = len(line) - len(line.lstrip()) + 1
        return DatalogError(message, source=self.names.path(file), line=line_no, column=column)
