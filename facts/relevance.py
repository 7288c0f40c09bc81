"""Which files need deep extraction.

A file is deep when its text mentions an array library (or another library
the rules judge: SciPy, MPI, ML frameworks), or when it is linked through
imports to a deep file — in either direction, since a caller decides whether
code is hot and a helper can return arrays. Files outside that set cannot
carry a finding; they are still counted as assessed. When no file is deep
(a tree with no array code at all), every file is.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

from .extract import module_name_for

_LIBRARIES = re.compile(
    r"\b(numpy|cupynumeric|cupy|scipy|mpi4py|sklearn|torch|tensorflow|keras|networkx|legate"
    r"|ndarray|NDArray)\b"
)
# An import statement at the start of a line (matched from the line's first character).
# No two quantifiers in a row can match the same characters (`++` keeps the blanks it took):
# `from[ \t]+(\.*[\w.]*)` backtracked quadratically, seven seconds on a line of dots.
_IMPORT = re.compile(r"[ \t]*(?:from[ \t]++([\w.]*)[ \t]+import|import[ \t]+([\w., \t]+))")


def _import_statements(text: str) -> Iterator[re.Match[str]]:
    """The import statements of `text`, one per line at most.  Only lines holding the word
    `import` are tried (found with str.find, six times faster than a multi-line regex over
    the whole text, which tries every line)."""
    pos = text.find("import")
    tried = -1
    while pos >= 0:
        start = text.rfind("\n", 0, pos) + 1
        if start != tried:
            tried = start
            m = _IMPORT.match(text, start)
            if m is not None:
                yield m
        pos = text.find("import", pos + len("import"))


def imported_modules(text: str, module: str, is_package: bool) -> set[str]:
    """Module names a file imports, relative imports resolved against `module`."""
    out: set[str] = set()
    for m in _import_statements(text):
        if m.group(1) is not None:
            name = m.group(1)
            dots = len(name) - len(name.lstrip("."))
            if dots:
                base = module.split(".") if module else []
                if not is_package and base:
                    base = base[:-1]
                base = base[: max(0, len(base) - (dots - 1))]
                rest = name[dots:]
                name = ".".join([*base, rest] if rest else base)
            out.add(name)
        else:
            for part in m.group(2).split(","):
                word = part.strip().split()
                if word:
                    out.add(word[0])
    return out


def deep_files(texts: dict[str, str]) -> set[str]:
    """The relative paths (keys of `texts`) to extract in full."""
    modules = {module_name_for(rel): rel for rel in texts}
    deep = {rel for rel, text in texts.items() if _LIBRARIES.search(text)}
    if not deep:
        return set(texts)
    links: dict[str, set[str]] = defaultdict(set)
    for rel, text in texts.items():
        for name in imported_modules(text, module_name_for(rel), rel.endswith("__init__.py")):
            # `import pkg.mod` and `from pkg import mod` both link to pkg.mod when it is ours.
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                target = modules.get(".".join(parts[:end]))
                if target is not None and target != rel:
                    links[rel].add(target)
                    links[target].add(rel)
                    break
    frontier = list(deep)
    while frontier:
        rel = frontier.pop()
        for other in links.get(rel, ()):
            if other not in deep:
                deep.add(other)
                frontier.append(other)
    return deep
