"""Inline suppressions: `# cpq: ignore[R104, R105] -- reviewed: boundary value`.

A suppression sits in a comment on the finding's own line. `# cpq: ignore`
without codes silences every code on that line; the text after `--` is the
reason, kept for the report and for SARIF's `justification`. Spacing is
tolerant (`#cpq:ignore[R104]`) and `cpq`/`ignore` are case-insensitive.

Only real comments count: the source is tokenized, so a `"# cpq: ignore"`
inside a string literal suppresses nothing. Code that does not tokenize (a
file cpq skips as broken, or a fragment) is scanned line by line from the
point where tokenizing failed.

A suppression that silences nothing is "unused" (like ruff's RUF100): stale
ignores hide future regressions, so the report lists them.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

FindingKey = tuple[str, str, int]  # code, file, line

_DIRECTIVE = re.compile(
    r"#\s*cpq\s*:\s*ignore(?![\w-])"
    r"(?:\s*\[(?P<codes>[^\]]*)\])?"
    r"(?:\s*--\s*(?P<reason>.*))?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Suppression:
    line: int  # 1-based
    codes: tuple[str, ...] | None  # None: every code on the line
    reason: str = ""

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes

    def describe(self) -> str:
        """The directive as it would be written, e.g. `cpq: ignore[R104, R105]`."""
        return "cpq: ignore" if self.codes is None else f"cpq: ignore[{', '.join(self.codes)}]"


def _parse_comment(comment: str, line: int) -> Suppression | None:
    m = _DIRECTIVE.search(comment)
    if m is None:
        return None
    codes: tuple[str, ...] | None = None
    if m.group("codes") is not None:
        listed = tuple(c.upper() for c in re.split(r"[\s,]+", m.group("codes")) if c)
        # `ignore[]` reads as a bare ignore rather than as "ignore nothing".
        codes = listed or None
    reason = (m.group("reason") or "").strip()
    return Suppression(line, codes, reason)


def _comments(text: str) -> Iterable[tuple[int, str]]:
    """(line, comment text) for each comment in `text`, tokenizing as far as the code allows."""
    reached = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            reached = tok.start[0]
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.string
    except (tokenize.TokenError, SyntaxError):
        # Broken code: beyond the failure point, take anything after a `#` that is
        # not inside a quote on the same line.
        for number, line in enumerate(text.splitlines(), start=1):
            if number <= reached:
                continue
            at = comment_start(line)
            if at is not None:
                yield number, line[at:]


def comment_start(line: str) -> int | None:
    """Where the `#` comment of a source line starts (a `#` inside a string literal does not)."""
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return i
        i += 1
    return None


def parse_suppressions(text: str) -> list[Suppression]:
    """Every `cpq: ignore` directive in the comments of `text`, in line order."""
    out = []
    for line, comment in _comments(text):
        s = _parse_comment(comment, line)
        if s is not None:
            out.append(s)
    return out


_MENTIONS_CPQ = re.compile(r"cpq\s*:", re.IGNORECASE)


def suppressions_by_file(sources: Mapping[str, str | list[str]]) -> dict[str, list[Suppression]]:
    """Parse every file of an assessment (`Assessment.sources`: text, or lists of lines)."""
    out: dict[str, list[Suppression]] = {}
    for file, text in sources.items():
        text = text if isinstance(text, str) else "\n".join(text)
        # Tokenizing is slow, and most files hold no directive at all; `in` on the lowered
        # text is three times faster than a case-blind regex over it.
        if "cpq" not in text.lower() or not _MENTIONS_CPQ.search(text):
            continue
        found = parse_suppressions(text)
        if found:
            out[file] = found
    return out


def match_suppressions(
    findings: Iterable[FindingKey], suppressions: Mapping[str, list[Suppression]]
) -> tuple[set[FindingKey], list[tuple[str, Suppression]]]:
    """Which findings are suppressed, and which suppressions (or listed codes) matched nothing.

    A bare ignore is unused when no finding is on its line. A listed code is
    unused when that code has no finding on the line; the unused entry then
    carries only those codes, e.g. `ignore[R104, R999]` with an R104 finding
    reports `(file, Suppression(line, ("R999",), reason))`.
    """
    on_line: dict[tuple[str, int], set[str]] = {}
    keys = list(findings)
    for code, file, line in keys:
        on_line.setdefault((file, line), set()).add(code)
    index = {(file, s.line): s for file, subs in suppressions.items() for s in subs}
    suppressed = {
        (code, file, line)
        for code, file, line in keys
        if (s := index.get((file, line))) is not None and s.covers(code)
    }
    unused: list[tuple[str, Suppression]] = []
    for file in sorted(suppressions):
        for s in suppressions[file]:
            present = on_line.get((file, s.line), set())
            if s.codes is None:
                if not present:
                    unused.append((file, s))
                continue
            missing = tuple(c for c in s.codes if c not in present)
            if missing:
                unused.append((file, s if missing == s.codes else replace(s, codes=missing)))
    return suppressed, unused


def find_suppression(key: FindingKey, suppressions: Mapping[str, list[Suppression]]) -> Suppression | None:
    """The suppression that silences `key`, to read its reason."""
    code, file, line = key
    for s in suppressions.get(file, ()):
        if s.line == line and s.covers(code):
            return s
    return None
