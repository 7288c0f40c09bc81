"""Write facts in Soufflé's input format: one tab-separated NAME.facts file per relation."""

from __future__ import annotations

from pathlib import Path

from ..facts.packing import FactSet
from ..facts.schema import INPUT_RELATIONS


def _field(value: object) -> str:
    # Soufflé's TSV reader has no quoting: tabs and newlines inside symbols become spaces.
    return str(value).replace("\t", " ").replace("\n", " ").replace("\r", " ")


def write_souffle_facts(
    facts: FactSet, out: Path, extra: dict[str, list[tuple]] | None = None
) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    relations: dict[str, list[tuple]] = {name: facts.rows(name) for name in INPUT_RELATIONS}
    relations.update(extra or {})
    counts = {}
    for name, rows in relations.items():
        with (out / f"{name}.facts").open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write("\t".join(_field(v) for v in row) + "\n")
        counts[name] = len(rows)
    return counts
