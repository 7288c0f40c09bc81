"""The manifest as data: entries, the alias table, provenance, lookups and Datalog facts."""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
STALE_AFTER_DAYS = 90
REFRESH_COMMAND = "cpq manifest refresh"

LEVELS: tuple[str, ...] = ("multi", "single", "partial", "none")
GLYPHS: dict[str, str] = {"multi": "✓✓", "single": "✓", "partial": "🟡", "none": "✗"}
LEVEL_OF_GLYPH: dict[str, str] = {glyph: level for level, glyph in GLYPHS.items()}
LEVEL_WORDS: dict[str, str] = {
    "multi": "implemented, multi-GPU",
    "single": "implemented, single-GPU/CPU only",
    "partial": "partial: read the note",
    "none": "not implemented",
}

# Section keys in the order the upstream comparison table uses; "module" is the catch-all.
SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("module", "Module-Level", "numpy."),
    ("ndarray", "Multi-Dimensional Array", "numpy.ndarray."),
    ("linalg", "Linear Algebra", "numpy.linalg."),
    ("fft", "Discrete Fourier Transform", "numpy.fft."),
    ("random", "Random Sampling", "numpy.random."),
)


def section_of(api: str) -> str:
    """The section key of a canonical `numpy.…` name (the longest matching prefix wins)."""
    for key, _title, prefix in reversed(SECTIONS):
        if key != "module" and api.startswith(prefix):
            return key
    return "module"


def normalize_name(name: str) -> str:
    """`cupynumeric.X`, `np.X` and a trailing `()` all mean `numpy.X` for lookups."""
    name = name.strip().removesuffix("()")
    for prefix in ("cupynumeric.", "np."):
        if name.startswith(prefix):
            return "numpy." + name[len(prefix) :]
    if name in ("cupynumeric", "np"):
        return "numpy"
    return name


@dataclass(frozen=True)
class Entry:
    api: str
    level: str
    note: str = ""
    # Where cuPyNumeric defines it ("cupynumeric/fft/fft.py:62"), empty when it does not.
    source: str = ""

    def __post_init__(self) -> None:
        if self.level not in GLYPHS:
            raise ValueError(f"unknown support level {self.level!r} for {self.api}")

    @property
    def glyph(self) -> str:
        return GLYPHS[self.level]

    @property
    def section(self) -> str:
        return section_of(self.api)

    def to_json(self) -> dict[str, str]:
        data = {"api": self.api, "level": self.level, "note": self.note}
        if self.source:
            data["source"] = self.source
        return data


@dataclass
class Manifest:
    entries: dict[str, Entry]
    aliases: dict[str, str] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    # The file it was read from; not part of the data.
    path: str = field(default="", compare=False)

    def lookup(self, name: str) -> Entry | None:
        """The entry for a fully qualified name, or None when the manifest does not list it.

        A name listed in its own right wins over an alias: NumPy aliases can differ in
        cuPyNumeric (it defines `arctan2` but not `atan2`), and those keep their own entry.
        """
        api = normalize_name(name)
        entry = self.entries.get(api)
        if entry is not None:
            return entry
        canonical = self.aliases.get(api)
        return self.entries.get(canonical) if canonical is not None else None

    def canonical(self, name: str) -> str | None:
        entry = self.lookup(name)
        return entry.api if entry is not None else None

    # -- provenance -------------------------------------------------------------------------

    @property
    def date(self) -> _dt.date | None:
        raw = str(self.provenance.get("date", ""))[:10]
        try:
            return _dt.date.fromisoformat(raw)
        except ValueError:
            return None

    def age_days(self, today: _dt.date | None = None) -> int | None:
        made = self.date
        if made is None:
            return None
        return ((today or _dt.date.today()) - made).days

    @property
    def stale(self) -> bool:
        age = self.age_days()
        # An undated manifest cannot prove it is fresh.
        return age is None or age > STALE_AFTER_DAYS

    # -- Datalog ---------------------------------------------------------------------------

    def datalog_facts(self) -> dict[str, list[tuple[str, ...]]]:
        """`api_support(api, level, glyph, note)` and `api_alias(name, canonical)`.

        `api_alias` has an identity row for every listed API and a row for each alias, each
        also under its `cupynumeric.` spelling, so `call → api_alias → api_support` is one join.
        """
        support = [(e.api, e.level, e.glyph, e.note) for e in self.sorted_entries()]
        pairs: set[tuple[str, str]] = {(api, api) for api in self.entries}
        pairs.update(
            (alias, canonical)
            for alias, canonical in self.aliases.items()
            if canonical in self.entries and alias not in self.entries
        )
        rows: set[tuple[str, str]] = set()
        for name, canonical in pairs:
            rows.add((name, canonical))
            rows.add(("cupynumeric." + name.removeprefix("numpy."), canonical))
        return {"api_support": support, "api_alias": sorted(rows)}

    # -- (de)serialisation -----------------------------------------------------------------

    def sorted_entries(self) -> list[Entry]:
        return [self.entries[k] for k in sorted(self.entries)]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(LEVELS, 0)
        for entry in self.entries.values():
            counts[entry.level] += 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "provenance": self.provenance,
            "counts": self.counts(),
            "entries": [e.to_json() for e in self.sorted_entries()],
            "aliases": dict(sorted(self.aliases.items())),
        }

    def dumps(self) -> str:
        """JSON with one entry or alias per line, so that a refresh diffs line by line."""
        data = self.to_json()
        head = {k: v for k, v in data.items() if k not in ("entries", "aliases")}
        text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
        entries = ",\n  ".join(json.dumps(e, ensure_ascii=False) for e in data["entries"])
        aliases = ",\n  ".join(f"{json.dumps(a)}: {json.dumps(c)}" for a, c in data["aliases"].items())
        entries_block = f"[\n  {entries}\n ]" if entries else "[]"
        aliases_block = f"{{\n  {aliases}\n }}" if aliases else "{}"
        return f'{text},\n "entries": {entries_block},\n "aliases": {aliases_block}\n}}\n'

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        if not isinstance(data, dict) or "entries" not in data:
            raise ValueError("not a cpq manifest (no 'entries')")
        entries = {}
        for raw in data["entries"]:
            entry = Entry(raw["api"], raw["level"], raw.get("note", ""), raw.get("source", ""))
            entries[entry.api] = entry
        return cls(entries, dict(data.get("aliases", {})), dict(data.get("provenance", {})))

    @classmethod
    def from_file(cls, path: str | Path) -> Manifest:
        with open(path, encoding="utf-8") as fh:
            manifest = cls.from_json(json.load(fh))
        manifest.path = str(path)
        return manifest
