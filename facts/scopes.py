"""Scopes and name bindings: what each name in a file refers to.

A first pass over the tree records, per scope, which names are imported,
defined (def/class) or assigned. Lookups then follow Python's rules (local,
enclosing functions, module, builtins) so that `np.zeros`, `zeros` after
`from numpy import zeros`, and `xp.zeros` after `xp = np` all resolve to the
qualified name `numpy.zeros`. A name that is also bound some other way in the
scope (a parameter, a loop target, a second assignment) resolves to nothing:
the extractor never guesses.
"""

from __future__ import annotations

import builtins

from .flow import Flow
from .tree import PNode

BUILTIN_NAMES = frozenset(dir(builtins))

_LOCAL = "<local>"  # a binding that is a plain variable, not an import or def


class Scope:
    __slots__ = (
        "kind",
        "name",
        "qualname",
        "parent",
        "bindings",
        "alias_values",
        "global_names",
        "node",
        "first_param",
        "nid",
        "flow",
    )

    def __init__(self, kind: str, name: str, qualname: str, parent: Scope | None, node: PNode):
        self.kind = kind  # "module" | "function" | "class"
        self.name = name
        self.qualname = qualname
        self.parent = parent
        self.node = node
        # name -> qualified name, or _LOCAL; a name bound twice in different ways is _LOCAL
        self.bindings: dict[str, str] = {}
        # name -> the expression of its single `name = <expr>` binding (for `xp = np`)
        self.alias_values: dict[str, PNode] = {}
        self.global_names: set[str] = set()
        self.first_param: str | None = None
        self.nid = -1
        self.flow: Flow = Flow()  # the extractor's, while it walks the scope

    def bind(self, name: str, qualified: str) -> None:
        old = self.bindings.get(name)
        if old is None:
            self.bindings[name] = qualified
        elif old != qualified:
            self.bindings[name] = _LOCAL
            self.alias_values.pop(name, None)

    def bind_local(self, name: str, value: PNode | None = None) -> None:
        # `try: import cupy as cp` / `except ImportError: cp = None` keeps the import's meaning.
        if value is not None and value.kind == "none" and self.bindings.get(name, _LOCAL) != _LOCAL:
            return
        if name in self.bindings:
            self.bindings[name] = _LOCAL
            self.alias_values.pop(name, None)
            return
        self.bindings[name] = _LOCAL
        if value is not None and value.kind in ("identifier", "attribute"):
            self.alias_values[name] = value


def module_scope_of(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


class Resolver:
    """Answers "what qualified object does this name / attribute chain denote?"."""

    def __init__(self) -> None:
        self._resolving: set[tuple[int, str]] = set()

    def lookup(self, name: str, scope: Scope) -> str | None:
        if name in scope.global_names:
            scope = module_scope_of(scope)
        current: Scope | None = scope
        first = True
        while current is not None:
            # Class bodies are not enclosing scopes for the functions inside them.
            if first or current.kind != "class":
                bound = current.bindings.get(name)
                if bound is not None:
                    if bound != _LOCAL:
                        return bound
                    value = current.alias_values.get(name)
                    if value is None:
                        return None
                    key = (id(current), name)
                    if key in self._resolving:
                        return None
                    self._resolving.add(key)
                    try:
                        return self.resolve(value, current)
                    finally:
                        self._resolving.discard(key)
            first = False
            current = current.parent
        if name in BUILTIN_NAMES:
            return "builtins." + name
        return None

    def resolve(self, node: PNode, scope: Scope) -> str | None:
        if node.kind == "identifier":
            return self.lookup(node.text or "", scope)
        if node.kind == "attribute":
            named = node.named_children()
            if len(named) != 2:
                return None
            obj, attr = named
            return self.attribute(obj, attr.text, self.resolve(obj, scope), scope)
        if node.kind == "parenthesized_expression":
            inner = node.named_children()
            return self.resolve(inner[0], scope) if len(inner) == 1 else None
        return None

    def attribute(self, obj: PNode, attr: str | None, base: str | None, scope: Scope) -> str | None:
        """What `obj.attr` denotes, `obj` denoting `base` (as `resolve` would say of it): for
        a caller that resolved the object already."""
        if obj.kind == "identifier" and obj.text == scope.first_param:
            return self._method_of_enclosing_class(attr or "", scope)
        if base is None or base.startswith("builtins."):
            return None
        return f"{base}.{attr}"

    @staticmethod
    def _method_of_enclosing_class(attr: str, scope: Scope) -> str | None:
        cls = scope.parent
        if cls is None or cls.kind != "class":
            return None
        bound = cls.bindings.get(attr)
        return bound if bound not in (None, _LOCAL) else None
