"""Gitignore-style globs matched in time linear in the path, whatever the pattern.

A glob is split at `/` into segments. A segment `**` spans any number of
folders; any other segment matches one path component with `*` (any run of
characters), `?` (one character), `[...]` (a class: `[!...]` or `[^...]`
negates, `a-z` is a range, a `]` right after the opening bracket is a
member) and `\\` (the next character as is).

Regular expressions are not used for whole patterns: a translation such as
`(?:.*/)?` per `**` makes the regex engine backtrack exponentially when a
pattern repeats `**/` against a deep path. Here `**` is matched by following
every position of the pattern at once over the components (an NFA simulation),
and a segment's `*` by finding each star-free chunk at its leftmost place,
which needs no backtracking. Only the star-free chunks are regexes, and those
have no quantifiers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache


class GlobError(ValueError):
    """A glob that cannot be read (an unterminated or reversed `[...]` class)."""


# One component matcher per pattern segment; None stands for a `**` segment.
Segment = Callable[[str], bool] | None


@dataclass(frozen=True)
class Glob:
    segments: tuple[Segment, ...]
    anchored: bool  # has a `/` before its end: matched from the root, not at any depth
    dir_only: bool  # ends in `/`: matches folders only

    def matches(self, relpath: str) -> bool:
        """Whether `relpath` or one of the folders above it matches.

        A `relpath` ending in `/` names a folder, so a walk can prune it early."""
        folder = relpath.endswith("/")
        parts = [p for p in relpath.strip("/").split("/") if p and p != "."]
        if not self.anchored:
            segment = self.segments[0] or _any_name  # compile_glob makes a lone `**` a `*` anyway
            return any(
                (depth < len(parts) or folder or not self.dir_only) and segment(part)
                for depth, part in enumerate(parts, start=1)
            )
        depths = _prefix_matches(self.segments, parts)
        return any(depth < len(parts) or folder or not self.dir_only for depth in depths)

    def matches_exactly(self, relpath: str) -> bool:
        """Whether `relpath` itself (a folder: `relpath/`) matches, the folders above it aside:
        a .gitignore line, tested on each path of a walk that left out the ignored folders."""
        if self.dir_only and not relpath.endswith("/"):
            return False
        parts = [p for p in relpath.strip("/").split("/") if p and p != "."]
        if not parts:
            return False
        if not self.anchored:
            return (self.segments[0] or _any_name)(parts[-1])
        return len(parts) in _prefix_matches(self.segments, parts)


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> Glob:
    """The matcher for one gitignore-style pattern; `GlobError` says why it is not one."""
    dir_only = pattern.endswith("/")
    body = pattern.strip("/") if dir_only else pattern.lstrip("/")
    anchored = "/" in pattern.rstrip("/")
    segments: list[Segment] = []
    for raw in body.split("/"):
        if raw == "**":
            if not segments or segments[-1] is not None:  # `**/**` spans no more than `**`
                segments.append(None)
        elif raw:
            segments.append(_segment(raw))
    if not anchored and segments == [None]:
        segments = [_segment("*")]  # a lone `**` is any one name, as `*`
    if not segments:
        segments = [_segment("")]
    return Glob(tuple(segments), anchored, dir_only)


def _prefix_matches(segments: tuple[Segment, ...], parts: list[str]) -> list[int]:
    """The depths d at which `parts[:d]` matches all of `segments`.

    The set of pattern positions reached so far is carried over the components, so each
    component costs at most one test per segment. A `**` matches zero or more components,
    but a trailing one at least one (`tests/**` is what lies inside tests/, not the folder)."""
    end = len(segments)
    states = _closure({0}, segments)
    depths = []
    for depth, part in enumerate(parts, start=1):
        reached = set()
        for i in states:
            if i == end:
                continue
            segment = segments[i]
            if segment is None:
                reached.add(i)  # `**` takes this component and stays
                if i + 1 == end:
                    reached.add(end)
            elif segment(part):
                reached.add(i + 1)
        states = _closure(reached, segments)
        if not states:
            break
        if end in states:
            depths.append(depth)
    return depths


def _closure(states: set[int], segments: tuple[Segment, ...]) -> set[int]:
    """`states` plus the positions after each non-trailing `**` (which may match nothing)."""
    out = set(states)
    for i in sorted(states):
        while i < len(segments) - 1 and segments[i] is None:
            i += 1
            out.add(i)
    return out


def _any_name(name: str) -> bool:
    return True


def _segment(raw: str) -> Callable[[str], bool]:
    """A matcher of one path component: the star-free chunks, found left to right."""
    chunks: list[list[str]] = [[]]  # regex pieces of each chunk between stars
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "*":
            chunks.append([])
            i += 1
        elif ch == "?":
            chunks[-1].append(".")
            i += 1
        elif ch == "[":
            piece, i = _char_class(raw, i)
            chunks[-1].append(piece)
        elif ch == "\\" and i + 1 < len(raw):
            chunks[-1].append(re.escape(raw[i + 1]))
            i += 2
        else:
            chunks[-1].append(re.escape(ch))
            i += 1
    if len(chunks) == 1:
        whole = re.compile("".join(chunks[0]), re.DOTALL)
        return lambda text: whole.fullmatch(text) is not None
    first = re.compile("".join(chunks[0]), re.DOTALL)
    middle = [re.compile("".join(c), re.DOTALL) for c in chunks[1:-1]]
    last = re.compile("".join(chunks[-1]) + r"\Z", re.DOTALL)
    return lambda name: _starred(first, middle, last, name)


def _starred(first: re.Pattern[str], middle: list[re.Pattern[str]], last: re.Pattern[str], name: str) -> bool:
    """Whether `name` is first * middle[0] * ... * last, each a star-free chunk.

    The first chunk must start the name and the last end it; each middle chunk is taken at
    its leftmost place after the previous one, which leaves the most room for the rest, so
    no other choice needs to be tried. Chunks have a fixed length: each search is linear."""
    head = first.match(name)
    if head is None:
        return False
    pos = head.end()
    for chunk in middle:
        found = chunk.search(name, pos)
        if found is None:
            return False
        pos = found.end()
    return last.search(name, pos) is not None


def _char_class(raw: str, start: int) -> tuple[str, int]:
    """The regex class for the `[...]` at `raw[start]`, and the index after it."""
    i = start + 1
    negate = i < len(raw) and raw[i] in "!^"
    if negate:
        i += 1
    members: list[str] = []
    first = True
    while True:
        if i >= len(raw):
            raise GlobError(f"unterminated character class {raw[start:]!r} (a ']' is missing)")
        ch = raw[i]
        if ch == "]" and not first:
            break
        first = False
        if ch == "\\" and i + 1 < len(raw):
            i += 1
            ch = raw[i]
        i += 1
        if i + 1 < len(raw) and raw[i] == "-" and raw[i + 1] != "]":
            high = raw[i + 1]
            if high == "\\" and i + 2 < len(raw):
                high = raw[i + 2]
                i += 1
            if high < ch:
                raise GlobError(f"reversed range '{ch}-{high}' in a character class")
            members.append(f"{re.escape(ch)}-{re.escape(high)}")
            i += 2
        else:
            members.append(re.escape(ch))
    return "[" + ("^" if negate else "") + "".join(members) + "]", i + 1
