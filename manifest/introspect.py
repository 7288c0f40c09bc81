"""The cuPyNumeric side read by importing the package: only where it imports.

The real package needs the CUDA driver library to import, so this is the alternative to
the static scan, not the default; it answers with the same `Target`s, so both feed the
same build rules and can be checked against each other.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ast_grep_py import SgRoot

from .static_scan import Target, raises_not_implemented

_MISSING = object()


class IntrospectionError(RuntimeError):
    pass


def _import_from(root: Path, package: str) -> types.ModuleType:
    """Import `package` from `root` rather than from wherever it may also be installed."""
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module(package)
    except Exception as exc:  # any import-time failure means: cannot introspect here
        raise IntrospectionError(f"cannot import {package}: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(root))


def _location(obj: Any, root: Path) -> tuple[str, int]:
    try:
        path = Path(inspect.getsourcefile(obj) or "")
        line = inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return "", 0
    try:
        return path.resolve().relative_to(root.resolve()).as_posix(), line
    except ValueError:
        return path.as_posix(), line


def _body_raises(func: Any) -> bool:
    try:
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(func)))
    except (TypeError, OSError):
        return False
    node = SgRoot(source, "python").root().find(kind="function_definition")
    return node is not None and raises_not_implemented(node)


def _target(obj: Any, attr: str, package: str, root: Path) -> Target:
    if isinstance(obj, types.ModuleType):
        return Target("module", obj.__name__)
    module = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__name__", attr)
    if not (module == package or module.startswith(package + ".")):
        return Target("external", f"{module}.{name}")
    path, line = _location(obj, root)
    if isinstance(obj, type):
        doc = obj.__dict__.get("__doc__")
        if not doc and "__init__" in obj.__dict__:
            doc = obj.__init__.__doc__
        return Target("class", f"{module}.{obj.__qualname__}", path, line, (doc,) if doc else ())
    if isinstance(obj, property):
        doc = obj.__doc__
        return Target("property", f"{module}.{attr}", path, line, (doc,) if doc else ())
    doc = getattr(obj, "__doc__", None)
    if inspect.isfunction(inspect.unwrap(obj)) or inspect.ismethod(obj):
        qualname = f"{module}.{getattr(obj, '__qualname__', name)}"
        return Target("function", qualname, path, line, (doc,) if doc else (), _body_raises(obj))
    return Target("made", f"{module}.{name}", path, line, (doc,) if doc else ())


def resolver(root: Path, package: str) -> tuple[Callable[[str], Target | None], str | None, list]:
    top = _import_from(root, package)

    def resolve(qualified: str) -> Target | None:
        parts = qualified.split(".")
        if parts[0] != package:
            return None
        obj: Any = top
        for part in parts[1:]:
            # Class attributes are read raw so that properties stay properties.
            if isinstance(obj, type):
                raw = inspect.getattr_static(obj, part, _MISSING)
                if raw is _MISSING:
                    return None
                obj = raw if isinstance(raw, property) else getattr(obj, part)
            else:
                obj = getattr(obj, part, _MISSING)
                if obj is _MISSING:
                    return None
        return _target(obj, parts[-1], package, root)

    version = getattr(top, "__version__", None)
    return resolve, str(version) if version is not None else None, []
