"""Baselines: record today's findings so that later runs report only new ones.

A finding is keyed by code, file, function and its *normalised* line text, not
by line number: inserting lines above a finding, re-indenting it or editing its
comment must not make it "new". The baseline is a multiset, so two identical
lines in one function need two entries before both count as known.

The file is JSON with the schema `cpq.baseline/1`:

    {"schema": "cpq.baseline/1", "tool": {...},
     "entries": [{"code": "R104", "file": "solver.py", "function": "solve",
                  "text": "err = float(np.linalg.norm(r))", "count": 1}, ...]}

File paths are those of the findings, i.e. relative to the assessed PATH: a
baseline recorded for `cpq assess src/` matches later runs on `src/`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .. import __version__
from ..config.suppress import comment_start

SCHEMA = "cpq.baseline/1"


class BaselineError(ValueError):
    """A baseline file that cannot be read or written; the message is one line."""


class FindingLike(Protocol):
    """What a baseline needs of a finding (`cpq.pipeline.assessment.Finding` has it)."""

    code: str
    file: str
    function: str
    source_line: str


Key = tuple[str, str, str, str]  # code, file, function, normalised text
F = TypeVar("F", bound=FindingLike)


def strip_comment(line: str) -> str:
    """`line` without its trailing `#` comment; a `#` inside a string literal stays."""
    at = comment_start(line)
    return line if at is None else line[:at]


def normalise_line(line: str) -> str:
    """The line text a finding is recognised by: comment dropped, whitespace collapsed.

    Spaces inside string literals are collapsed too; the key only has to be
    stable and distinctive, not reversible.
    """
    return " ".join(strip_comment(line).split())


def finding_key(f: FindingLike) -> Key:
    return (f.code, f.file, f.function, normalise_line(f.source_line))


def fingerprint(code: str, function: str, line: str) -> str:
    """A stable hash of code, function and normalised line text (no path, no line number)."""
    text = "\0".join((code, function, normalise_line(line)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass
class Baseline:
    """Known findings as a multiset of keys.

    `new_findings` is the pure way to split a run; `is_known` answers one finding
    at a time and consumes a count, so call it once per finding of a run.
    """

    entries: Counter[Key] = field(default_factory=Counter)
    source: Path | None = None
    _left: Counter[Key] = field(default_factory=Counter, init=False, repr=False)

    def __post_init__(self) -> None:
        self._left = Counter(self.entries)

    def is_known(self, finding: FindingLike) -> bool:
        key = finding_key(finding)
        if self._left[key] > 0:
            self._left[key] -= 1
            return True
        return False

    def reset(self) -> None:
        """Restore every count, to classify another run with `is_known`."""
        self._left = Counter(self.entries)

    def new_findings(self, findings: Iterable[F]) -> list[F]:
        """The findings not covered by the baseline, in their given order.

        With more occurrences than entries, the first occurrences are the known ones.
        """
        left = Counter(self.entries)
        out = []
        for f in findings:
            key = finding_key(f)
            if left[key] > 0:
                left[key] -= 1
            else:
                out.append(f)
        return out

    def __len__(self) -> int:
        return sum(self.entries.values())


def baseline_dict(findings: Iterable[FindingLike]) -> dict[str, Any]:
    counts = Counter(finding_key(f) for f in findings)
    entries = [
        {"code": code, "file": file, "function": function, "text": text, "count": n}
        for (code, file, function, text), n in sorted(counts.items())
    ]
    return {"schema": SCHEMA, "tool": {"name": "cpq", "version": __version__}, "entries": entries}


def write_baseline(path: Path, findings: Iterable[FindingLike]) -> int:
    """Write the findings to `path` (sorted, so the file diffs well); returns the number recorded."""
    data = baseline_dict(findings)
    # Written beside it, then renamed into place: a run killed meanwhile (Ctrl-C, a CI timeout)
    # leaves the previous baseline whole, never a truncated one that the next run rejects.
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        raise BaselineError(f"baseline {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return sum(e["count"] for e in data["entries"])


def load_baseline(path: Path) -> Baseline:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"baseline {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"baseline {path}: cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"baseline {path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise BaselineError(f"baseline {path}: expected schema {SCHEMA!r}, found {found!r}")
    raw = data.get("entries")
    if not isinstance(raw, list):
        raise BaselineError(f"baseline {path}: 'entries' must be a list")
    entries: Counter[Key] = Counter()
    for i, e in enumerate(raw):
        if not _valid_entry(e):
            raise BaselineError(
                f"baseline {path}: entry {i} needs string code/file/function/text and a positive count"
            )
        entries[(e["code"], e["file"], e["function"], e["text"])] += e.get("count", 1)
    return Baseline(entries, source=path)


def _valid_entry(e: object) -> bool:
    if not isinstance(e, dict):
        return False
    if not all(isinstance(e.get(k), str) for k in ("code", "file", "function", "text")):
        return False
    count = e.get("count", 1)
    return isinstance(count, int) and not isinstance(count, bool) and count >= 1
