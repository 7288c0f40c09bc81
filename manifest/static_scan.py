"""Statically resolve the public names of a Python package from its sources (ast-grep-py).

The package is never imported (cuPyNumeric's import needs the CUDA driver). Each module's
top-level statements are executed symbolically, in order, into a table of bindings:

* `def` / `class` bind definitions (decorators are assumed to keep the docstring, as
  `functools.wraps` does); `x = y` copies y's binding at that point; `x = f(...)` records
  a value made by a call; string constants are kept (they may be docstring templates);
  `del x` unbinds.
* `from m import a as b` binds lazily (Python looks up the attribute first, then the
  submodule); `from m import *` copies `m.__all__` when m defines it, else every public
  binding of m; importing a submodule from a package's `__init__` also binds the submodule
  name in the package, as the import system does.
* `if TYPE_CHECKING:` bodies never run; for other `if`s the first branch is assumed and the
  other branches only add names it does not bind; `try` bodies run and `except` bodies only
  add names (the fallback import of a name the body already imported is not taken).

Lookups then follow the chain to where a name is defined and report what it is: a function
(with its docstring and whether its body only raises NotImplementedError), a class, a value
made by a factory call (`add = create_binary_ufunc(...)`: its support is stated by the
docstring templates the factory formats, or by string arguments of the call), an object
re-exported from another distribution (`from numpy import iinfo`), a module, or a value.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from ast_grep_py import SgNode, SgRoot

from . import availability

MAX_DEPTH = 40
_NOT_IMPLEMENTED = re.compile(r"^raise\s+NotImplementedError\b")


@dataclass(frozen=True)
class Target:
    """What a public name is, after following imports and aliases to its definition."""

    kind: str  # function | class | property | made | external | module | value
    qualname: str  # where it is defined: "cupynumeric._ufunc.math.absolute"
    path: str = ""  # file relative to the scanned root
    line: int = 0
    # Docstrings that state its support: its own, or the templates a factory formats.
    docs: tuple[str, ...] = ()
    raises_not_implemented: bool = False

    @property
    def defined_name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}" if self.path else ""


# -- bindings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Def:
    module: str
    node: SgNode  # function_definition or class_definition
    decorators: tuple[str, ...] = ()
    owner: str = ""  # the class qualname for methods


@dataclass(frozen=True)
class _Import:
    module: str
    attr: str


@dataclass(frozen=True)
class _ModuleRef:
    module: str


@dataclass(frozen=True)
class _Expr:
    module: str
    node: SgNode
    name: str


@dataclass(frozen=True)
class _Str:
    value: str


_Binding = _Def | _Import | _ModuleRef | _Expr | _Str


@dataclass
class _Module:
    name: str
    path: Path
    is_package: bool
    table: dict[str, _Binding] = field(default_factory=dict)
    all_names: list[str] | None = None


@dataclass
class _Class:
    qualname: str
    table: dict[str, _Binding]
    bases: list[_Binding]


# -- helpers on tree-sitter nodes -----------------------------------------------------------


def _line(node: SgNode) -> int:
    return node.range().start.line + 1


def _string_value(node: SgNode) -> str | None:
    if node.kind() not in ("string", "concatenated_string"):
        return None
    try:
        value = ast.literal_eval(node.text())
    except (ValueError, SyntaxError):
        # f-strings are not literals; their constant text is still worth reading.
        return "".join(c.text() for c in node.find_all(kind="string_content"))
    return value if isinstance(value, str) else None


def _body_statements(node: SgNode) -> list[SgNode]:
    body = node.field("body")
    return [c for c in body.children() if c.is_named()] if body is not None else []


def _docstring(node: SgNode) -> str | None:
    stmts = [s for s in _body_statements(node) if s.kind() != "comment"]
    if stmts and stmts[0].kind() == "expression_statement":
        inner = [c for c in stmts[0].children() if c.is_named()]
        if len(inner) == 1:
            return _string_value(inner[0])
    return None


def raises_not_implemented(node: SgNode) -> bool:
    """True when the body, after its docstring, starts by raising NotImplementedError."""
    stmts = [s for s in _body_statements(node) if s.kind() != "comment"]
    if stmts and _docstring(node) is not None:
        stmts = stmts[1:]
    return bool(stmts) and bool(_NOT_IMPLEMENTED.match(stmts[0].text()))


def _named(node: SgNode) -> list[SgNode]:
    return [c for c in node.children() if c.is_named() and c.kind() != "comment"]


def _decorators(decorated: SgNode) -> tuple[str, ...]:
    """`@add_boilerplate("a")` → "add_boilerplate"; `@property` → "property"."""
    return tuple(
        d.text().lstrip("@").split("(")[0].strip() for d in decorated.children() if d.kind() == "decorator"
    )


# -- the package ----------------------------------------------------------------------------


class PackageScan:
    """Symbol tables of every module under `root/<package>`, built on demand."""

    def __init__(self, root: str | Path, package: str = "cupynumeric") -> None:
        self.root = Path(root)
        self.package = package
        if not (self.root / package).is_dir():
            raise FileNotFoundError(f"no package folder {package!r} under {self.root}")
        self._modules: dict[str, _Module] = {}
        self._classes: dict[int, _Class] = {}
        self.warnings: list[str] = []

    # -- modules ---------------------------------------------------------------------------

    def _module_file(self, modname: str) -> tuple[Path, bool] | None:
        if modname != self.package and not modname.startswith(self.package + "."):
            return None
        rel = Path(*modname.split("."))
        pkg_init = self.root / rel / "__init__.py"
        if pkg_init.is_file():
            return pkg_init, True
        mod_file = self.root / rel.with_suffix(".py")
        if mod_file.is_file():
            return mod_file, False
        return None

    def is_internal(self, modname: str) -> bool:
        return self._module_file(modname) is not None

    def module(self, modname: str) -> _Module | None:
        mod = self._modules.get(modname)
        if mod is not None:
            return mod  # possibly still being built: a circular import sees a partial module
        found = self._module_file(modname)
        if found is None:
            return None
        path, is_package = found
        mod = _Module(modname, path, is_package)
        self._modules[modname] = mod
        source = path.read_text(encoding="utf-8", errors="replace")
        root = SgRoot(source, "python").root()
        self._exec(mod, _named(root), mod.table)
        return mod

    def _package_of(self, mod: _Module) -> str:
        return mod.name if mod.is_package else mod.name.rpartition(".")[0]

    def _absolute(self, mod: _Module, stmt: SgNode) -> str:
        """The absolute module name of an import-from statement."""
        rel = stmt.field("module_name")
        if rel is None:
            return ""
        if rel.kind() != "relative_import":
            return rel.text()
        prefix = rel.find(kind="import_prefix")
        dots = prefix.text().count(".") if prefix is not None else 0
        base = self._package_of(mod)
        for _ in range(dots - 1):
            base = base.rpartition(".")[0]
        tail = next((c.text() for c in _named(rel) if c.kind() == "dotted_name"), "")
        return f"{base}.{tail}" if tail else base

    # -- symbolic execution ----------------------------------------------------------------

    def _exec(self, mod: _Module, stmts: list[SgNode], table: dict[str, _Binding]) -> None:
        for stmt in stmts:
            self._exec_one(mod, stmt, table)

    def _exec_fallback(self, mod: _Module, stmts: list[SgNode], table: dict[str, _Binding]) -> None:
        """Run an alternative branch: it may only add names the main branch did not bind."""
        scratch: dict[str, _Binding] = {}
        self._exec(mod, stmts, scratch)
        for name, binding in scratch.items():
            table.setdefault(name, binding)

    def _exec_one(self, mod: _Module, stmt: SgNode, table: dict[str, _Binding]) -> None:
        kind = stmt.kind()
        if kind == "import_statement":
            for item in _named(stmt):
                if item.kind() == "aliased_import":
                    dotted = item.field("name")
                    alias = item.field("alias")
                    if dotted is not None and alias is not None:
                        table[alias.text()] = _ModuleRef(dotted.text())
                elif item.kind() == "dotted_name":
                    top = item.text().split(".")[0]
                    table[top] = _ModuleRef(top)
        elif kind == "import_from_statement":
            self._exec_import_from(mod, stmt, table)
        elif kind in ("function_definition", "class_definition"):
            self._bind_def(mod, stmt, (), table)
        elif kind == "decorated_definition":
            definition = stmt.field("definition")
            if definition is not None:
                self._bind_def(mod, definition, _decorators(stmt), table)
        elif kind == "expression_statement":
            for inner in _named(stmt):
                self._exec_expression(mod, inner, table)
        elif kind == "if_statement":
            self._exec_if(mod, stmt, table)
        elif kind == "try_statement":
            body = stmt.field("body")
            if body is not None:
                self._exec(mod, _named(body), table)
            for clause in _named(stmt):
                block = next((c for c in _named(clause) if c.kind() == "block"), None)
                if block is None:
                    continue
                if clause.kind() == "except_clause":
                    self._exec_fallback(mod, _named(block), table)
                elif clause.kind() in ("else_clause", "finally_clause"):
                    self._exec(mod, _named(block), table)
        elif kind == "with_statement":
            body = stmt.field("body")
            if body is not None:
                self._exec(mod, _named(body), table)
        elif kind == "delete_statement":
            for target in stmt.find_all(kind="identifier"):
                table.pop(target.text(), None)

    def _exec_if(self, mod: _Module, stmt: SgNode, table: dict[str, _Binding]) -> None:
        condition = stmt.field("condition")
        cond = condition.text() if condition is not None else ""
        consequence = stmt.field("consequence")
        alternatives = [c for c in _named(stmt) if c.kind() in ("elif_clause", "else_clause")]
        if cond in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for alt in alternatives:
                block = alt.field("body") or alt.field("consequence")
                if alt.kind() == "else_clause" and block is not None:
                    self._exec(mod, _named(block), table)
            return
        if consequence is not None:
            self._exec(mod, _named(consequence), table)
        for alt in alternatives:
            block = alt.field("consequence") or alt.field("body")
            if block is not None:
                self._exec_fallback(mod, _named(block), table)

    def _exec_import_from(self, mod: _Module, stmt: SgNode, table: dict[str, _Binding]) -> None:
        target = self._absolute(mod, stmt)
        if not target:
            return
        package = self._package_of(mod)
        if mod.is_package and target.startswith(package + ".") and table is mod.table:
            # Importing a submodule sets it as an attribute of its parent package.
            child = target[len(package) + 1 :].split(".")[0]
            table.setdefault(child, _ModuleRef(f"{package}.{child}"))
        if stmt.find(kind="wildcard_import") is not None:
            self._star_import(target, table)
            return
        module_field = stmt.field("module_name")
        for item in _named(stmt):
            if module_field is not None and item.range() == module_field.range():
                continue
            if item.kind() == "aliased_import":
                name_node, alias_node = item.field("name"), item.field("alias")
                if name_node is not None and alias_node is not None:
                    table[alias_node.text()] = _Import(target, name_node.text())
            elif item.kind() == "dotted_name":
                table[item.text()] = _Import(target, item.text())

    def _star_import(self, target: str, table: dict[str, _Binding]) -> None:
        source = self.module(target)
        if source is None:
            self.warnings.append(f"cannot follow 'from {target} import *' (not in the package)")
            return
        if source.all_names is not None:
            for name in source.all_names:
                table[name] = _Import(target, name)
            return
        for name, binding in list(source.table.items()):
            if not name.startswith("_"):
                table[name] = binding

    def _bind_def(
        self,
        mod: _Module,
        node: SgNode,
        decorators: tuple[str, ...],
        table: dict[str, _Binding],
        owner: str = "",
    ) -> None:
        name = node.field("name")
        if name is not None:
            table[name.text()] = _Def(mod.name, node, decorators, owner)

    def _exec_expression(self, mod: _Module, node: SgNode, table: dict[str, _Binding]) -> None:
        kind = node.kind()
        if kind == "assignment":
            targets: list[SgNode] = []
            value: SgNode | None = node
            # `a = b = value` nests assignments on the right.
            while value is not None and value.kind() == "assignment":
                left = value.field("left")
                if left is not None:
                    targets.append(left)
                value = value.field("right")
            if value is None:
                return
            for left in targets:
                if left.kind() == "identifier":
                    self._assign(mod, left.text(), value, table)
        elif kind == "augmented_assignment":
            left, right = node.field("left"), node.field("right")
            if left is not None and right is not None and left.text() == "__all__":
                extra = self._eval_all(mod, right, table)
                if extra is not None and table is mod.table:
                    mod.all_names = (mod.all_names or []) + extra
        elif kind == "call":
            func = node.field("function")
            if func is not None and func.text() in ("__all__.extend", "__all__.append"):
                args = node.field("arguments")
                arg = _named(args)[0] if args is not None and _named(args) else None
                if arg is None:
                    return
                if func.text().endswith("append"):
                    value = _string_value(arg)
                    extra = [value] if value is not None else None
                else:
                    extra = self._eval_all(mod, arg, table)
                if extra is not None and table is mod.table:
                    mod.all_names = (mod.all_names or []) + extra

    def _assign(self, mod: _Module, name: str, value: SgNode, table: dict[str, _Binding]) -> None:
        if name == "__all__" and table is mod.table:
            mod.all_names = self._eval_all(mod, value, table)
            return
        text = _string_value(value)
        if text is not None:
            table[name] = _Str(text)
        elif value.kind() == "identifier" and value.text() in table:
            table[name] = table[value.text()]
        else:
            table[name] = _Expr(mod.name, value, name)

    def _eval_all(self, mod: _Module, node: SgNode, table: dict[str, _Binding]) -> list[str] | None:
        kind = node.kind()
        if kind in ("list", "tuple", "set"):
            values = [_string_value(c) for c in _named(node)]
            return [v for v in values if v is not None]
        if kind == "parenthesized_expression":
            inner = _named(node)
            return self._eval_all(mod, inner[0], table) if inner else None
        if kind == "binary_operator":
            left, right = node.field("left"), node.field("right")
            if left is None or right is None:
                return None
            a, b = self._eval_all(mod, left, table), self._eval_all(mod, right, table)
            return None if a is None or b is None else a + b
        if kind == "attribute" and node.text().endswith(".__all__"):
            obj = node.field("object")
            binding = table.get(obj.text()) if obj is not None else None
            target = self._resolve(binding, 0) if binding is not None else None
            if target is not None and target.kind == "module":
                other = self.module(target.qualname)
                if other is not None and other.all_names is not None:
                    return list(other.all_names)
        if kind == "identifier" and node.text() == "__all__":
            return list(mod.all_names or [])
        self.warnings.append(f"{mod.name}: cannot read __all__ from {node.text()[:60]!r}")
        return None

    # -- classes ---------------------------------------------------------------------------

    def _class(self, binding: _Def) -> _Class:
        key = id(binding.node)
        cls = self._classes.get(key)
        if cls is not None:
            return cls
        name = binding.node.field("name")
        qualname = f"{binding.module}.{name.text() if name is not None else '?'}"
        cls = _Class(qualname, {}, [])
        self._classes[key] = cls
        mod = self.module(binding.module)
        if mod is None:
            return cls
        # Only the class body's own statements: methods, nested classes, `alias = method`.
        for stmt in _body_statements(binding.node):
            kind = stmt.kind()
            if kind in ("function_definition", "class_definition"):
                self._bind_def(mod, stmt, (), cls.table, qualname)
            elif kind == "decorated_definition":
                definition = stmt.field("definition")
                if definition is not None:
                    self._bind_def(mod, definition, _decorators(stmt), cls.table, qualname)
            elif kind == "expression_statement":
                for inner in _named(stmt):
                    left, right = inner.field("left"), inner.field("right")
                    if inner.kind() == "assignment" and left is not None and right is not None:
                        if left.kind() == "identifier":
                            self._assign(mod, left.text(), right, cls.table)
        superclasses = binding.node.field("superclasses")
        if superclasses is not None:
            for base in _named(superclasses):
                if base.kind() in ("identifier", "attribute"):
                    cls.bases.append(_Expr(binding.module, base, base.text()))
        return cls

    def _member(self, binding: _Def, attr: str, depth: int) -> _Binding | None:
        cls = self._class(binding)
        if attr in cls.table:
            return cls.table[attr]
        for base in cls.bases:
            base_def = self._definition(base, depth + 1)
            if base_def is not None and base_def.node.kind() == "class_definition":
                found = self._member(base_def, attr, depth + 1)
                if found is not None:
                    return found
        return None

    def _made_class(self, binding: _Expr, depth: int) -> _Def | None:
        """The class of the value a call makes: the class called, or the class a factory
        function returns an instance of (`return binary_ufunc(...)`)."""
        func = binding.node.field("function")
        callee_binding = self._lookup_expr(binding.module, func, depth + 1) if func is not None else None
        callee = self._definition(callee_binding, depth + 1) if callee_binding is not None else None
        if callee is None or depth > MAX_DEPTH:
            return None
        if callee.node.kind() == "class_definition":
            return callee
        for ret in callee.node.find_all(kind="return_statement"):
            value = next(iter(_named(ret)), None)
            fn = value.field("function") if value is not None and value.kind() == "call" else None
            if fn is None:
                continue
            made = self._lookup_expr(callee.module, fn, depth + 1)
            found = self._definition(made, depth + 1) if made is not None else None
            if found is not None and found.node.kind() == "class_definition":
                return found
        return None

    # -- resolution ------------------------------------------------------------------------

    def _definition(self, binding: _Binding, depth: int) -> _Def | None:
        """Follow imports and aliases to a `def`/`class`, if that is where it leads."""
        seen = 0
        current: _Binding | None = binding
        while current is not None and seen < MAX_DEPTH:
            seen += 1
            if isinstance(current, _Def):
                return current
            current = self._step(current, depth + seen)
        return None

    def _step(self, binding: _Binding, depth: int) -> _Binding | None:
        """One hop along an import or a name/attribute alias; None when it ends elsewhere."""
        if isinstance(binding, _Import):
            mod = self.module(binding.module)
            if mod is None:
                return None
            found = mod.table.get(binding.attr)
            # `from . import fft` in a package binds `fft` to an import of itself.
            if found is not None and found != binding:
                return found
            sub = f"{binding.module}.{binding.attr}"
            return _ModuleRef(sub) if self.is_internal(sub) else None
        if isinstance(binding, _Expr) and binding.node.kind() in ("identifier", "attribute"):
            return self._lookup_expr(binding.module, binding.node, depth)
        return None

    def _lookup_expr(self, module: str, node: SgNode, depth: int) -> _Binding | None:
        mod = self.module(module)
        if mod is None or depth > MAX_DEPTH:
            return None
        if node.kind() == "identifier":
            return mod.table.get(node.text())
        obj, attr = node.field("object"), node.field("attribute")
        if obj is None or attr is None:
            return None
        base = self._lookup_expr(module, obj, depth + 1)
        if base is None:
            return None
        return self._attribute(base, attr.text(), depth + 1)

    def _attribute(self, base: _Binding, attr: str, depth: int) -> _Binding | None:
        for _ in range(MAX_DEPTH):
            if isinstance(base, _ModuleRef):
                return _Import(base.module, attr)
            if isinstance(base, _Def):
                if base.node.kind() == "class_definition":
                    return self._member(base, attr, depth)
                return None
            if isinstance(base, _Expr) and base.node.kind() == "call":
                # A value a factory made (`subtract = create_binary_ufunc(...)`): its
                # attributes are those of the class the factory instantiates.
                made = self._made_class(base, depth)
                return self._member(made, attr, depth) if made is not None else None
            nxt = self._step(base, depth)
            if nxt is None:
                if isinstance(base, _Import) and not self.is_internal(base.module):
                    return _Import(f"{base.module}.{base.attr}", attr)
                return None
            base = nxt
        return None

    def _resolve(self, binding: _Binding, depth: int) -> Target | None:
        for _ in range(MAX_DEPTH):
            if isinstance(binding, _Def):
                return self._target_of_def(binding)
            if isinstance(binding, _ModuleRef):
                return Target("module", binding.module)
            if isinstance(binding, _Str):
                return Target("value", "")
            if isinstance(binding, _Import) and not self.is_internal(binding.module):
                return Target("external", f"{binding.module}.{binding.attr}")
            if isinstance(binding, _Expr) and binding.node.kind() == "call":
                return self._target_of_call(binding, depth)
            nxt = self._step(binding, depth)
            if nxt is None:
                if isinstance(binding, _Expr):
                    return self._value(binding)
                return None
            binding = nxt
        return None

    def _value(self, binding: _Expr) -> Target:
        mod = self.module(binding.module)
        return Target(
            "value",
            f"{binding.module}.{binding.name}",
            self._rel(mod.path) if mod is not None else "",
            _line(binding.node),
        )

    def _rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()

    def _target_of_def(self, binding: _Def) -> Target:
        node = binding.node
        mod = self.module(binding.module)
        path = self._rel(mod.path) if mod is not None else ""
        name = node.field("name")
        owner = binding.owner or binding.module
        qualname = f"{owner}.{name.text() if name is not None else '?'}"
        doc = _docstring(node)
        if node.kind() == "class_definition":
            if doc is None:
                # Sphinx shows `__init__`'s docstring for a class without one; so does
                # cuPyNumeric (random.Generator states its Availability there).
                init = self._member(binding, "__init__", 0)
                if isinstance(init, _Def):
                    doc = _docstring(init.node)
            return Target("class", qualname, path, _line(node), (doc,) if doc else ())
        kind = "property" if "property" in binding.decorators else "function"
        return Target(
            kind,
            qualname,
            path,
            _line(node),
            (doc,) if doc else (),
            raises_not_implemented(node),
        )

    def _target_of_call(self, binding: _Expr, depth: int) -> Target:
        call = binding.node
        made = self._value(binding)
        func = call.field("function")
        callee_binding = self._lookup_expr(binding.module, func, depth) if func else None
        callee = self._definition(callee_binding, depth) if callee_binding else None
        docs: list[str] = []
        args = call.field("arguments")
        for arg in _named(args) if args is not None else []:
            text = _string_value(arg)
            if text and availability.availability_statement(text) is not None:
                docs.append(text)
        if callee is not None and callee.node.kind() == "function_definition":
            docs.extend(self._templates(callee))
        return Target("made", made.qualname, made.path, made.line, tuple(docs))

    def _templates(self, factory: _Def) -> list[str]:
        """Module-level strings with an Availability section that a factory's body uses."""
        mod = self.module(factory.module)
        if mod is None:
            return []
        found: list[str] = []
        body = factory.node.field("body")
        names = {n.text() for n in body.find_all(kind="identifier")} if body is not None else set()
        for name in sorted(names):
            binding = mod.table.get(name)
            if isinstance(binding, _Str) and availability.availability_statement(binding.value):
                found.append(binding.value)
        return found

    # -- public ----------------------------------------------------------------------------

    def lookup(self, qualified: str) -> Target | None:
        """What `cupynumeric.a.b` is, or None when the package does not define it. For
        `cupynumeric.ndarray.shape=` (an assignment to the attribute): the attribute, when
        its class lets it be set (a property with a setter, or a plain class attribute)."""
        if qualified.endswith("="):
            return self._settable(qualified[:-1])
        parts = qualified.split(".")
        if parts[0] != self.package:
            return None
        binding: _Binding = _ModuleRef(self.package)
        for part in parts[1:]:
            nxt = self._attribute(binding, part, 0)
            if nxt is None:
                return None
            if isinstance(nxt, _Import) and self.is_internal(nxt.module):
                if self._step(nxt, 0) is None:
                    return None
            binding = nxt
        return self._resolve(binding, 0)

    def _settable(self, qualified: str) -> Target | None:
        owner, _, attr = qualified.rpartition(".")
        cls_target = self.lookup(owner)
        if cls_target is None or cls_target.kind != "class":
            return None
        parts = owner.split(".")
        binding: _Binding | None = _ModuleRef(self.package)
        for part in parts[1:]:
            binding = self._attribute(binding, part, 0) if binding is not None else None
        cls = self._definition(binding, 0) if binding is not None else None
        member = self._member(cls, attr, 0) if cls is not None else None
        if isinstance(member, _Def) and f"{attr}.setter" in member.decorators:
            return self.lookup(qualified)
        if isinstance(member, (_Expr, _Str)):
            return self.lookup(qualified)
        return None

    def version(self) -> str | None:
        """The package version from `_version.py` / `__init__.py`, read without importing."""
        for modname in (f"{self.package}._version", self.package):
            mod = self.module(modname)
            if mod is None:
                continue
            binding = mod.table.get("__version__")
            if isinstance(binding, _Str):
                return binding.value
        return None
