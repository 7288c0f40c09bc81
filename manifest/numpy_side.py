"""The NumPy side of the manifest: which names exist, and which of them are aliases.

Both are read from the installed numpy at refresh time, so the manifest follows the NumPy
version the user actually has rather than a list frozen in cpq.
"""

from __future__ import annotations

import importlib
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

NAMESPACES: tuple[str, ...] = (
    "numpy",
    "numpy.ndarray",
    "numpy.linalg",
    "numpy.fft",
    "numpy.random",
    # Submodules calls reach as `np.ma.masked_where(...)`: cuPyNumeric has none of them.
    "numpy.ma",
    "numpy.char",
    "numpy.strings",
    "numpy.rec",
    "numpy.emath",
    "numpy.polynomial",
)
# The methods of a binary ufunc (`np.add.outer(a, b)`), listed as numpy.<ufunc>.<method>.
UFUNC_METHODS: tuple[str, ...] = ("reduce", "accumulate", "reduceat", "outer", "at")
# An assignment to an array attribute (`a.shape = (n, m)`) is listed as numpy.ndarray.<name>=.
SETTER_SUFFIX = "="

# NumPy documents some aliases only in prose ("`amax` is an alias of `~numpy.max`"), because
# since NumPy 2 they are separate function objects; the docstring is NumPy's own statement.
_SELF_ALIAS = re.compile(r"``?(?P<alias>\w+)``? is an alias (?:of|for) ``?~?(?P<target>[\w.]+)``?")
_THIS_ALIAS = re.compile(r"This (?:function )?is an alias (?:of|for) ``?~?(?P<target>[\w.]+)``?")


@dataclass(frozen=True)
class NumpyName:
    api: str
    namespace: str
    name: str
    # The object's own `__name__` is this name (absolute, not abs): NumPy's canonical spelling.
    self_named: bool


@dataclass
class NumpySide:
    version: str
    names: dict[str, NumpyName]
    # Alias groups with two or more names; every name of a group is in `names`.
    groups: list[frozenset[str]]
    excluded: dict[str, str] = field(default_factory=dict)


def _namespace_object(numpy: Any, namespace: str) -> Any:
    obj = numpy
    for part in namespace.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _exclusion(numpy: Any, value: Any) -> str | None:
    """Why a callable public name is not an API the manifest lists, or None."""
    # The spec passes dtype names over silently: `np.float32(x)` is not a port blocker.
    if isinstance(value, type) and issubclass(value, (numpy.generic, numpy.dtype)):
        return "dtype name"
    if type(value).__name__ == "PytestTester":
        return "NumPy's own test-suite runner"
    return None


def _doc_alias_target(name: str, doc: str) -> str | None:
    for match in _SELF_ALIAS.finditer(doc):
        if match.group("alias") == name:
            return match.group("target")
    match = _THIS_ALIAS.search(doc)
    return match.group("target") if match else None


def _settable_attributes(numpy: Any) -> list[str]:
    """The public attributes of an array that an assignment may change (`a.shape = ...`):
    tried on a small array, each set to the value it has."""
    found = []
    for name in sorted(dir(numpy.ndarray)):
        if name.startswith("_") or callable(getattr(numpy.ndarray, name, None)):
            continue
        probe = numpy.zeros((2, 2))
        try:
            setattr(probe, name, getattr(probe, name))
        except (AttributeError, TypeError, ValueError):
            continue
        found.append(name)
    return found


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


def collect(numpy: Any | None = None) -> NumpySide:
    """Read the callable public names of the five namespaces and their alias groups."""
    if numpy is None:
        numpy = importlib.import_module("numpy")
    names: dict[str, NumpyName] = {}
    excluded: dict[str, str] = {}
    objects: dict[str, Any] = {}
    uf = _UnionFind()
    doc_aliases: list[tuple[str, str]] = []
    with warnings.catch_warnings():
        # Touching deprecated NumPy names warns; reading them is all we do.
        warnings.simplefilter("ignore")
        for namespace in NAMESPACES:
            ns = _namespace_object(numpy, namespace)
            by_identity: dict[int, str] = {}
            for name in sorted(dir(ns)):
                if name.startswith("_"):
                    continue
                try:
                    value = getattr(ns, name)
                except AttributeError:
                    continue
                if not callable(value):
                    continue
                api = f"{namespace}.{name}"
                reason = _exclusion(numpy, value)
                if reason is not None:
                    excluded[api] = reason
                    continue
                own = getattr(value, "__name__", None)
                names[api] = NumpyName(api, namespace, name, own == name)
                objects[api] = value
                # Bound methods (numpy.random's legacy functions) are new objects on every
                # getattr; their underlying function is the stable identity.
                key = id(getattr(value, "__func__", value))
                if key in by_identity:
                    uf.union(api, by_identity[key])
                else:
                    by_identity[key] = api
                target = _doc_alias_target(name, getattr(value, "__doc__", None) or "")
                if target is not None:
                    qualified = target if target.startswith("numpy.") else f"{namespace}.{target}"
                    doc_aliases.append((api, qualified))
        for api, value in list(objects.items()):
            if isinstance(value, numpy.ufunc) and value.nin == 2 and value.nout == 1 and "." not in api[6:]:
                for method in UFUNC_METHODS:
                    names[f"{api}.{method}"] = NumpyName(f"{api}.{method}", api, method, False)
        for name in _settable_attributes(numpy):
            api = f"numpy.ndarray.{name}{SETTER_SUFFIX}"
            names[api] = NumpyName(api, "numpy.ndarray", name + SETTER_SUFFIX, False)
    for api, target in doc_aliases:
        if target in names and target != api:
            uf.union(api, target)
    members: dict[str, set[str]] = {}
    for api in names:
        members.setdefault(uf.find(api), set()).add(api)
    groups = sorted((frozenset(g) for g in members.values() if len(g) > 1), key=sorted)
    return NumpySide(str(numpy.__version__), names, groups, excluded)
