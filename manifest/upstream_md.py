"""Read a support table in the upstream comparison table's Markdown format.

The format (also what `render_md` writes): glyph-led lines under `## Section` headings,
either a comma-separated run of names (`✓✓ numpy.absolute, numpy.add`) or one name with a
note (`🟡 numpy.fft.fft — multi-GPU partial: ...`). Names may carry Markdown escapes
(`numpy.ix\\_`) and a trailing `()` for methods. Anything else is ignored.
"""

from __future__ import annotations

import re
from pathlib import Path

from .model import GLYPHS, LEVEL_OF_GLYPH, Entry, Manifest, normalize_name

# Longest glyph first, so "✓✓" is not read as "✓".
_GLYPH_LINE = re.compile(
    "^(?P<glyph>"
    + "|".join(sorted(map(re.escape, GLYPHS.values()), key=len, reverse=True))
    + r")\uFE0F?\s+(?P<rest>.+)$"
)
_HEADER = re.compile(r"^(?P<key>Source|Fetched|Counts|Generated|Method|cuPyNumeric|NumPy):\s*(?P<v>.+)$")
_NOTE_SEPARATOR = " — "


def _clean(name: str) -> str:
    return normalize_name(name.replace("\\", "").strip().strip("`").strip())


def parse_text(text: str, source: str = "") -> Manifest:
    entries: dict[str, Entry] = {}
    provenance: dict[str, object] = {"source": source, "method": "markdown table"}
    for raw in text.splitlines():
        line = raw.strip()
        header = _HEADER.match(line)
        if header:
            provenance[header.group("key").lower()] = header.group("v").strip()
            continue
        match = _GLYPH_LINE.match(line)
        if not match:
            continue
        level = LEVEL_OF_GLYPH[match.group("glyph")]
        rest = match.group("rest")
        if _NOTE_SEPARATOR in rest:
            name, note = rest.split(_NOTE_SEPARATOR, 1)
            pairs = [(name, note.strip())]
        else:
            pairs = [(name, "") for name in rest.split(",")]
        for name, note in pairs:
            api = _clean(name)
            if api.startswith("numpy.") and " " not in api:
                entries[api] = Entry(api, level, note)
    for key in ("fetched", "generated"):
        if key in provenance and "date" not in provenance:
            provenance["date"] = str(provenance[key])[:10]
    if "cupynumeric" in provenance:
        provenance["cupynumeric_version"] = provenance.pop("cupynumeric")
    if "numpy" in provenance:
        provenance["numpy_version"] = provenance.pop("numpy")
    return Manifest(entries, {}, provenance)


def parse_file(path: str | Path) -> Manifest:
    path = Path(path)
    manifest = parse_text(path.read_text(encoding="utf-8"), source=str(path))
    manifest.path = str(path)
    return manifest
