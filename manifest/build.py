"""Join the NumPy side and the cuPyNumeric side into a manifest.

Rules (each NumPy name is looked up under the same path in `cupynumeric`):

* not defined → ✗ with no note (the package raises AttributeError; it no longer falls back
  to NumPy), except for an alias whose other spelling works (see below);
* defined, but the body starts by raising NotImplementedError → ✗;
* defined with an Availability section → the level it states (see `availability.parse`);
  a value made by a factory (`add = create_binary_ufunc(...)`) takes the level stated by
  the docstring templates the factory formats; if several disagree the weakest wins;
* NumPy's own object re-exported by cuPyNumeric (`from numpy import iinfo`) → 🟡, it runs
  on the host;
* defined without any Availability statement → 🟡 "states no Availability".

NumPy aliases (same object, or documented by NumPy as an alias) share one entry when
cuPyNumeric supports them identically; the canonical name is the one NumPy's object calls
itself (`absolute`, not `abs`), and where NumPy has two objects (`max`/`amax`) the one
cuPyNumeric defines (`amax`). Aliases that cuPyNumeric does not define (`atan2`) keep an
entry of their own with a note naming the spelling that works.
"""

from __future__ import annotations

from collections.abc import Callable

from .availability import Support, parse
from .model import GLYPHS, Entry, Manifest
from .numpy_side import NumpySide
from .static_scan import Target

Resolver = Callable[[str], Target | None]
_RANK = {"none": 0, "partial": 1, "single": 2, "multi": 3}


def cupynumeric_name(api: str) -> str:
    return "cupynumeric." + api.removeprefix("numpy.")


def classify(target: Target | None) -> tuple[str, str]:
    """(level, note) for what cuPyNumeric has under a name."""
    if target is None:
        return "none", ""
    if target.raises_not_implemented:
        return "none", "defined by cuPyNumeric, but it raises NotImplementedError"
    if target.kind == "external":
        return "partial", f"NumPy's own {target.qualname}, re-exported: runs on the host"
    if target.kind == "module":
        return "none", f"cuPyNumeric has a module {target.qualname} under this name"
    supports: list[Support] = [s for s in (parse(doc) for doc in target.docs) if s is not None]
    if supports:
        weakest = min(supports, key=lambda s: _RANK[s.level])
        return weakest.level, weakest.note
    return "partial", "defined by cuPyNumeric; its docstring states no Availability"


def _canonical(bucket: list[str], numpy_side: NumpySide, targets: dict[str, Target | None]) -> str:
    self_named = [api for api in bucket if numpy_side.names[api].self_named]
    if len(self_named) == 1:
        return self_named[0]
    defined = {t.defined_name for api in bucket if (t := targets[api]) is not None}
    chosen = [api for api in bucket if numpy_side.names[api].name in defined]
    if len(chosen) == 1:
        return chosen[0]
    return sorted(bucket, key=lambda api: (len(api), api))[0]


def build(resolve: Resolver, numpy_side: NumpySide, provenance: dict[str, object]) -> Manifest:
    targets = {api: resolve(cupynumeric_name(api)) for api in numpy_side.names}
    support = {api: classify(targets[api]) for api in numpy_side.names}
    sources = {api: (t.location if (t := targets[api]) is not None else "") for api in targets}

    aliases: dict[str, str] = {}
    notes = {api: note for api, (_level, note) in support.items()}
    for group in numpy_side.groups:
        buckets: dict[tuple[str, str], list[str]] = {}
        for api in sorted(group):
            buckets.setdefault(support[api], []).append(api)
        canon_of: dict[str, str] = {}
        for bucket in buckets.values():
            canonical = _canonical(bucket, numpy_side, targets)
            for api in bucket:
                canon_of[api] = canonical
                if api != canonical:
                    aliases[api] = canonical
        best = max(group, key=lambda api: _RANK[support[api][0]])
        best_level = support[best][0]
        for api in group:
            if targets[api] is None and best_level != "none":
                spelled = canon_of[best]
                notes[api] = f"cuPyNumeric does not define this alias; use {spelled} ({GLYPHS[best_level]})"

    entries: dict[str, Entry] = {}
    for api, (level, _note) in support.items():
        if api in aliases:
            continue
        entries[api] = Entry(api, level, notes[api], sources[api])
    prov = dict(provenance)
    prov.setdefault("numpy_version", numpy_side.version)
    prov["excluded"] = _summarise_exclusions(numpy_side.excluded)
    return Manifest(entries, aliases, prov)


def _summarise_exclusions(excluded: dict[str, str]) -> dict[str, list[str]]:
    """The NumPy names left out on purpose, by reason (so a diff can tell them apart)."""
    by_reason: dict[str, list[str]] = {}
    for api, reason in sorted(excluded.items()):
        by_reason.setdefault(reason, []).append(api)
    return dict(sorted(by_reason.items()))
