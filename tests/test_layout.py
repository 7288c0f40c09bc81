"""The package's layout: every module sits in the folder of its pipeline stage (the root holds
only `__init__.py` and `__main__.py`), the modules import one another without cycles, and no
import of a cpq module is wrapped in a handler that would hide its failure.

The import graph is read from the source with `ast`: every `import` and `from ... import` of a
cpq module anywhere in a module (at module level and inside functions, since a function-level
import only moves a cycle to run time), except those under `if TYPE_CHECKING:`, which never run.
`from pkg import name` is an edge to the submodule `pkg.name` when there is one, otherwise to
`pkg` (its `__init__`).  Importing `pkg.sub.mod` from outside `pkg.sub` runs `pkg/sub/__init__`
first, so it is an edge to `pkg.sub` too: a package whose `__init__` sits above the pipeline
cannot hold a module used below it.  From inside the package that `__init__` has already run,
so a package re-exporting its own submodules is no cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import cpq

PACKAGE = "cpq"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    file: Path
    line: int


def package_modules(root: Path, package: str) -> dict[str, Path]:
    """Module name -> file, for the package at `root` and every subpackage (a folder with an
    `__init__.py`) below it."""
    modules: dict[str, Path] = {}
    for path in sorted(root.glob("*.py")):
        modules[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    for folder in sorted(p for p in root.iterdir() if (p / "__init__.py").is_file()):
        modules.update(package_modules(folder, f"{package}.{folder.name}"))
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _running_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of `tree` except the bodies of `if TYPE_CHECKING:` (their `else` does run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


class ImportResolver:
    """The cpq modules an import statement in one module loads."""

    def __init__(self, modules: dict[str, Path], package: str) -> None:
        self.modules = modules
        self.package = package

    def _base(self, module: str, node: ast.ImportFrom) -> str | None:
        if node.level == 0:
            return node.module
        is_package = self.modules[module].name == "__init__.py"
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))

    def named(self, module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
        """The modules the statement names."""
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names if alias.name in self.modules]
        base = self._base(module, node)
        if base is None or base.split(".")[0] != self.package:
            return []
        named = [f"{base}.{alias.name}" for alias in node.names]
        return [name if name in self.modules else base for name in named]

    def targets(self, module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
        """The modules named, and the packages above them that `module` is not inside: their
        `__init__` runs first."""
        found: list[str] = []
        for name in self.named(module, node):
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):
                target = ".".join(parts[:depth])
                inside = module == target or module.startswith(target + ".")
                if target in self.modules and target not in found and (target == name or not inside):
                    found.append(target)
        return found


def import_edges(modules: dict[str, Path], package: str) -> list[Edge]:
    resolver = ImportResolver(modules, package)
    edges: list[Edge] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _running_nodes(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in resolver.targets(module, node):
                    if target != module:
                        edges.append(Edge(module, target, path, node.lineno))
    return edges


def strongly_connected(nodes: list[str], edges: list[Edge]) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative)."""
    successors: dict[str, list[str]] = {n: [] for n in nodes}
    for edge in edges:
        successors[edge.source].append(edge.target)
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in nodes:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(successors[start]))]
        index[start] = lowlink[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    lowlink[parent] = min(lowlink[parent], lowlink[node])
                if lowlink[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
            elif child not in index:
                index[child] = lowlink[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(successors[child])))
            elif child in on_stack:
                lowlink[node] = min(lowlink[node], index[child])
    return sorted(components)


def describe(component: list[str], edges: list[Edge], root: Path) -> str:
    members = set(component)
    lines = [" <-> ".join(component)]
    for edge in sorted(edges, key=lambda e: (e.source, e.target, e.line)):
        if edge.source in members and edge.target in members:
            where = edge.file.relative_to(root)
            lines.append(f"    {edge.source} -> {edge.target}  ({where}:{edge.line})")
    return "\n".join(lines)


_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _swallows_import_error(handler: ast.ExceptHandler) -> bool:
    """Whether the handler takes an ImportError and does not raise again."""
    if any(isinstance(node, ast.Raise) for node in ast.walk(handler)):
        return False
    if handler.type is None:
        return True
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in _IMPORT_ERRORS for t in caught)


def swallowed_imports(modules: dict[str, Path], package: str) -> list[str]:
    """`file:line imports module` for each import of a cpq module inside a `try` whose handler
    would take its ImportError and carry on: a module that fails to import must fail loudly,
    not vanish (as `cpq why` would have, its commands left unregistered)."""
    resolver = ImportResolver(modules, package)
    found: list[str] = []
    root = modules[package].parent
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try | ast.TryStar):
                continue
            if not any(map(_swallows_import_error, node.handlers)):
                continue
            for stmt in node.body:
                for inner in ast.walk(stmt):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        for target in resolver.named(module, inner):
                            found.append(f"{path.relative_to(root)}:{inner.lineno} imports {target}")
    return found


ROOT = Path(cpq.__file__).resolve().parent


# The package's modules, its import edges, and the strongly connected components of more than one.
Graph = tuple[dict[str, Path], list[Edge], list[list[str]]]


@pytest.fixture(scope="module")
def graph() -> Graph:
    modules = package_modules(ROOT, PACKAGE)
    edges = import_edges(modules, PACKAGE)
    return modules, edges, strongly_connected(list(modules), edges)


def test_no_import_cycles(graph: Graph) -> None:
    _, edges, components = graph
    assert not components, "import cycles:\n" + "\n".join(describe(c, edges, ROOT) for c in components)


# The only modules at the package root: every other one sits in the folder of its stage
# (facts/, engine/, rules/, pipeline/, report/, config/, explain/, manifest/, cli/).
ROOT_MODULES = {"__init__.py", "__main__.py"}


def test_the_package_root_holds_no_loose_module() -> None:
    loose = sorted(p.name for p in ROOT.glob("*.py") if p.name not in ROOT_MODULES)
    assert not loose, f"modules at the package root, to move into a stage's folder: {loose}"


def test_no_import_of_a_cpq_module_is_swallowed() -> None:
    found = swallowed_imports(package_modules(ROOT, PACKAGE), PACKAGE)
    assert not found, "imports whose failure is caught and hidden:\n" + "\n".join(found)


def test_the_graph_sees_what_runs(tmp_path: Path) -> None:
    """The reader itself: function-level and relative imports count, `from pkg import sub` is an
    edge to the submodule and `from pkg import name` one to `pkg`, importing `pkg.sub.b` from
    outside `pkg.sub` runs `pkg.sub`'s `__init__` too, TYPE_CHECKING imports do not count, and a
    swallowed import is found."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("VERSION = 1\n")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from ..a import f\nfrom .. import VERSION\n")
    (pkg / "sub" / "d.py").write_text("from . import b\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
        "try:\n    import pkg.sub.b\nexcept ImportError:\n    pass\n"
        "try:\n    from .sub import b\nexcept ImportError as exc:\n    raise SystemExit(str(exc))\n"
    )
    modules = package_modules(pkg, "pkg")
    edges = import_edges(modules, "pkg")
    assert {(e.source, e.target) for e in edges} == {
        ("pkg.a", "pkg.sub"),
        ("pkg.a", "pkg.sub.b"),
        ("pkg.sub.b", "pkg.a"),
        ("pkg.sub.b", "pkg"),
        ("pkg.sub.d", "pkg.sub.b"),
        ("pkg.c", "pkg.sub"),
        ("pkg.c", "pkg.sub.b"),
    }
    assert strongly_connected(list(modules), edges) == [["pkg.a", "pkg.sub.b"]]
    assert swallowed_imports(modules, "pkg") == ["c.py:5 imports pkg.sub.b"]
