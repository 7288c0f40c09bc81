"""The API-support manifest: which NumPy APIs cuPyNumeric implements, and how far they scale.

`load()` reads the shipped `cpq/assets/manifest.json` (produced by `cpq manifest refresh`);
`Manifest.lookup(name)` resolves NumPy aliases and answers an `Entry` or None (unlisted).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .model import GLYPHS, LEVELS, STALE_AFTER_DAYS, Entry, Manifest

__all__ = [
    "GLYPHS",
    "LEVELS",
    "STALE_AFTER_DAYS",
    "Entry",
    "Manifest",
    "clear_cache",
    "default_path",
    "load",
]

_cache: dict[str, Manifest] = {}


def default_path() -> Path:
    """Where the shipped manifest lives (inside the installed `cpq.assets` package)."""
    return Path(str(resources.files("cpq.assets").joinpath("manifest.json")))


def load(path: str | Path | None = None) -> Manifest:
    """The manifest at `path`, or the shipped one; each file is read once per process."""
    target = Path(path) if path is not None else default_path()
    key = str(target.resolve())
    cached = _cache.get(key)
    if cached is None:
        if not target.is_file():
            raise FileNotFoundError(f"no manifest at {target}; run `cpq manifest refresh`")
        cached = Manifest.from_file(target)
        _cache[key] = cached
    return cached


def clear_cache() -> None:
    """Forget loaded manifests (after a refresh rewrote one)."""
    _cache.clear()
