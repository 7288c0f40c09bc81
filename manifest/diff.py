"""Compare two manifests name by name (levels; notes are shown, not compared)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .model import Entry, Manifest
from .upstream_md import parse_file


@dataclass(frozen=True)
class Disagreement:
    name: str
    ours: Entry
    theirs: Entry


@dataclass
class DiffResult:
    both: int = 0
    agree: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    only_ours: list[str] = field(default_factory=list)
    only_theirs: list[str] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        return 100.0 * self.agree / self.both if self.both else 100.0


def _spelled_names(manifest: Manifest) -> set[str]:
    return set(manifest.entries) | {a for a, c in manifest.aliases.items() if c in manifest.entries}


def compare(ours: Manifest, theirs: Manifest) -> DiffResult:
    """Every name either side lists, resolved through each side's own aliases."""
    result = DiffResult()
    for name in sorted(_spelled_names(ours) | _spelled_names(theirs)):
        a, b = ours.lookup(name), theirs.lookup(name)
        if a is None and b is not None:
            result.only_theirs.append(name)
        elif b is None and a is not None:
            result.only_ours.append(name)
        elif a is not None and b is not None:
            result.both += 1
            if a.level == b.level:
                result.agree += 1
            else:
                result.disagreements.append(Disagreement(name, a, b))
    return result


def load_any(path: str | Path) -> Manifest:
    """A manifest JSON, or a Markdown table in the upstream format."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.suffix.lower() in (".md", ".markdown", ".txt"):
        return parse_file(path)
    try:
        return Manifest.from_file(path)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc


def _describe(entry: Entry) -> str:
    return f"{entry.glyph} {entry.level}" + (f" ({entry.note})" if entry.note else "")


def _left_out(manifest: Manifest) -> dict[str, str]:
    """Names a manifest leaves out on purpose (dtype names, ...), with the reason."""
    excluded = manifest.provenance.get("excluded")
    if not isinstance(excluded, dict):
        return {}
    return {name: reason for reason, names in excluded.items() if isinstance(names, list) for name in names}


def report(
    result: DiffResult,
    ours_label: str,
    theirs_label: str,
    list_one_sided: bool,
    ours: Manifest | None = None,
) -> str:
    left_out = _left_out(ours) if ours is not None else {}
    reasons: dict[str, int] = {}
    for name in result.only_theirs:
        if name in left_out:
            reasons[left_out[name]] = reasons.get(left_out[name], 0) + 1
    why = "; ".join(f"{n} left out here on purpose: {r}" for r, n in sorted(reasons.items()))
    lines = [
        f"this:  {ours_label}",
        f"other: {theirs_label}",
        f"names both list: {result.both}",
        f"agreements: {result.agree} ({result.agreement:.2f}%)",
        f"disagreements: {len(result.disagreements)}",
        f"listed only here: {len(result.only_ours)}; only in other: {len(result.only_theirs)}"
        + (f" ({why})" if why else ""),
    ]
    for d in result.disagreements:
        canonical = f" [as {d.ours.api}]" if d.ours.api != d.name else ""
        lines.append(f"  {d.name}{canonical}")
        lines.append(f"      this:  {_describe(d.ours)}")
        lines.append(f"      other: {_describe(d.theirs)}")
    if list_one_sided:
        if result.only_ours:
            lines.append("only here: " + ", ".join(result.only_ours))
        if result.only_theirs:
            lines.append("only in other: " + ", ".join(result.only_theirs))
    return "\n".join(lines)
