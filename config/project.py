"""`[tool.cpq]` in the assessed project's `pyproject.toml`.

    [tool.cpq]
    elements = "16M"            # default context; the command line wins
    gpus = 4
    nodes = 1
    gpu = "H100"
    cpu-only = false
    pattern = "stencil"
    exclude = ["build/"]        # replaces the default (empty) list
    extend-exclude = ["*_pb2.py", "tests/**"]
    select = ["R1", "R2"]       # codes or prefixes; default: every code
    ignore = ["R106"]
    per-file-ignores = { "scripts/*.py" = ["R104"] }

Keys are kebab-case as in ruff; the snake_case spelling is accepted too. An
unknown key, a wrong type or an unknown code is a `ConfigError` naming it:
a typo in a config file should fail loudly, not be silently ignored.

Globs follow .gitignore: a pattern without a slash (`*_pb2.py`, `build/`)
matches a file or folder name at any depth, a pattern with a slash
(`tests/**`, `src/gen/*.py`) is anchored at the folder holding pyproject.toml,
`**` spans folders, and a trailing `/` matches folders only (`globs.py`
matches them in linear time; a malformed `[...]` class is a `ConfigError`).
Paths given to `is_excluded` and `code_enabled` are POSIX paths relative to
that folder (`Config.relpath` converts).

Code selection follows ruff: `select` (default: all) enables codes or
prefixes, `ignore` disables them; when both match, the more specific prefix
wins and `ignore` wins a tie; `per-file-ignores` then disables codes for the
files its glob matches.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..rules.catalogue import catalogue_rows
from .context import ContextError, parse_elements, parse_gpu, parse_pattern
from .globs import GlobError, compile_glob

PYPROJECT = "pyproject.toml"


class ConfigError(ValueError):
    """A `[tool.cpq]` table that cannot be used; the message names the file and the key."""


@dataclass
class Config:
    elements: str | None = None
    gpus: int | None = None
    nodes: int | None = None
    gpu: str | None = None
    cpu_only: bool | None = None
    pattern: str | None = None
    exclude: list[str] = field(default_factory=list)
    extend_exclude: list[str] = field(default_factory=list)
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    source: Path | None = None  # the pyproject.toml read, None when there was none

    @property
    def root(self) -> Path | None:
        """The folder the globs are relative to."""
        return self.source.parent if self.source is not None else None

    def relpath(self, path: Path) -> str | None:
        """`path` as a POSIX path relative to `root`, None when it lies outside (or no config)."""
        if self.root is None:
            return None
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return None

    def is_excluded(self, relpath: str) -> bool:
        """Whether the file at `relpath` (a folder: `relpath/`) is left out by the exclude globs."""
        return any(_glob_matches(p, relpath) for p in [*self.exclude, *self.extend_exclude])

    def code_enabled(self, code: str, relpath: str | None = None) -> bool:
        """Whether findings of `code` in the file at `relpath` are reported."""
        # Without `select`, every code is on: the shipped R-codes and a --rules file's own.
        if not _selected(code, self.select or [""], self.ignore):
            return False
        if relpath is not None:
            for pattern, codes in self.per_file_ignores.items():
                if _glob_matches(pattern, relpath) and any(code.startswith(c) for c in codes):
                    return False
        return True

    def context_options(
        self,
        *,
        elements: str | None = None,
        gpus: int | None = None,
        nodes: int | None = None,
        gpu: str | None = None,
        cpu_only: bool | None = None,
        pattern: str | None = None,
    ) -> dict[str, Any]:
        """Keyword arguments for `Context.from_options`: each option given on the command line
        (not None) wins over the config value. `cpu_only=None` means the flag was not given."""
        cli = {"elements": elements, "gpus": gpus, "nodes": nodes, "gpu": gpu, "pattern": pattern}
        out: dict[str, Any] = {k: v if v is not None else getattr(self, k) for k, v in cli.items()}
        out["cpu_only"] = bool(cpu_only if cpu_only is not None else self.cpu_only)
        return out


# key -> (attribute, expected type as words)
_KEYS: dict[str, tuple[str, str]] = {
    "elements": ("elements", 'a string such as "16M" or an integer'),
    "gpus": ("gpus", "an integer"),
    "nodes": ("nodes", "an integer"),
    "gpu": ("gpu", "a string"),
    "cpu-only": ("cpu_only", "a boolean"),
    "pattern": ("pattern", "a string"),
    "exclude": ("exclude", "a list of strings"),
    "extend-exclude": ("extend_exclude", "a list of strings"),
    "select": ("select", "a list of strings"),
    "ignore": ("ignore", "a list of strings"),
    "per-file-ignores": ("per_file_ignores", "a table of glob = [codes]"),
}


def find_pyproject(path: Path) -> Path | None:
    """The nearest `pyproject.toml` at or above `path` (a file's folder for a file).

    The walk stops at the top of the repository (a folder holding `.git`) or
    the filesystem root, so a project is never configured by a pyproject.toml
    outside its own repository.
    """
    here = path.resolve()
    if not here.is_dir():
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / PYPROJECT
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists():
            return None
    return None


def load_config(path: Path, codes: Iterable[str] | None = None) -> Config:
    """Read `[tool.cpq]` from the pyproject.toml at `path`; an absent table gives the defaults.
    The codes it lists are checked against `codes`, those of the rules to run (by default the
    shipped catalogue; with a --rules file, its own codes too)."""
    name = str(path)
    known = known_codes() if codes is None else frozenset(codes)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{name}: invalid TOML {_toml_error(str(exc), text)}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{name}: invalid TOML: arrays or tables nested too deeply to read") from None
    except ValueError as exc:  # an integer of more digits than Python converts (sys.int_info)
        raise ConfigError(f"{name}: invalid TOML: {str(exc).split(';')[0]}") from None
    table = data.get("tool", {}).get("cpq") if isinstance(data.get("tool"), dict) else None
    if table is None:
        return Config()
    if not isinstance(table, dict):
        raise ConfigError(f"{name}: [tool.cpq] must be a table")
    config = Config(source=path)
    seen: dict[str, str] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        if key not in _KEYS:
            known = ", ".join(_KEYS)
            raise ConfigError(f"{name}: [tool.cpq] unknown key {raw_key!r} (known: {known})")
        if key in seen:
            raise ConfigError(f"{name}: [tool.cpq] {raw_key!r} and {seen[key]!r} are the same key")
        seen[key] = raw_key
        attr, expected = _KEYS[key]
        setattr(config, attr, _checked(name, raw_key, key, value, expected, known))
    return config


def _toml_error(message: str, text: str) -> str:
    """`at line L, column C: what` from tomllib's "what (at line L, column C)" message."""
    m = re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", message, re.DOTALL)
    if m:
        return f"at line {m.group(2)}, column {m.group(3)}: {m.group(1)}"
    what = message.removesuffix(" (at end of document)")
    # tomllib gives no position at the end of the file; the last line is where it gave up.
    lines = text.splitlines() or [""]
    return f"at line {len(lines)}, column {len(lines[-1]) + 1} (end of file): {what}"


def config_for(path: Path, codes: Iterable[str] | None = None) -> Config:
    """The configuration that applies to an assessment of `path` (defaults when there is none);
    `codes` as for load_config."""
    found = find_pyproject(path)
    return load_config(found, codes) if found is not None else Config()


def _checked(name: str, raw_key: str, key: str, value: Any, expected: str, known: frozenset[str]) -> Any:
    def bad(detail: str = "") -> ConfigError:
        got = type(value).__name__
        return ConfigError(
            f"{name}: [tool.cpq] {raw_key} must be {expected}, got {got}{': ' + detail if detail else ''}"
        )

    if key == "elements":
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise bad()
        text = str(value)
        try:
            parse_elements(text)
        except ContextError as exc:
            raise bad(str(exc)) from None
        return text
    if key in ("gpus", "nodes"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
        if value < 1:
            raise ConfigError(f"{name}: [tool.cpq] {raw_key} must be at least 1, got {value}")
        return value
    if key == "gpu":
        if not isinstance(value, str):
            raise bad()
        try:
            parse_gpu(value)
        except ContextError as exc:
            raise bad(str(exc)) from None
        return value
    if key == "cpu-only":
        if not isinstance(value, bool):
            raise bad()
        return value
    if key == "pattern":
        if not isinstance(value, str):
            raise bad()
        try:
            return parse_pattern(value)
        except ContextError as exc:
            detail = str(exc).removeprefix("--pattern: ")
            raise ConfigError(f"{name}: [tool.cpq] {raw_key}: {detail}") from None
    if key == "per-file-ignores":
        if not isinstance(value, dict):
            raise bad()
        out: dict[str, list[str]] = {}
        for glob, codes in value.items():
            if not _str_list(codes):
                raise ConfigError(
                    f"{name}: [tool.cpq] {raw_key} {glob!r} must be a list of strings, "
                    f"got {type(codes).__name__}"
                )
            out[glob] = _codes(name, f"{raw_key} {glob!r}", codes, known)
        _checked_globs(name, raw_key, out)
        return out
    if not _str_list(value):
        raise bad()
    if key in ("select", "ignore"):
        return _codes(name, raw_key, value, known)
    _checked_globs(name, raw_key, value)
    return list(value)


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


@lru_cache(maxsize=1)
def known_codes() -> frozenset[str]:
    return frozenset(row[0] for row in catalogue_rows())


def _codes(name: str, where: str, codes: Iterable[str], known: frozenset[str]) -> list[str]:
    """The codes or prefixes listed, each a prefix of a `known` code (those of the rules run)."""
    out = []
    for raw in codes:
        code = raw.strip().upper()
        if not re.fullmatch(r"[A-Z]+\d{0,3}", code) or not any(k.startswith(code) for k in known):
            raise ConfigError(
                f"{name}: [tool.cpq] {where}: unknown code {raw!r} "
                "(use a code such as R104, or a prefix such as R1; `cpq rules` lists them)"
            )
        out.append(code)
    return out


def _selected(code: str, select: list[str], ignore: list[str]) -> bool:
    best_select = max((len(p) for p in select if code.startswith(p)), default=-1)
    best_ignore = max((len(p) for p in ignore if code.startswith(p)), default=-1)
    if best_select < 0:
        return False
    return best_select > best_ignore


def _glob_matches(pattern: str, relpath: str) -> bool:
    """Whether `relpath` (a folder: `relpath/`) or a folder above it matches `pattern`."""
    try:
        return compile_glob(pattern).matches(relpath)
    except GlobError as exc:  # a Config built in code, not read by load_config (which checks)
        raise ConfigError(f"glob {pattern!r}: {exc}") from None


def _checked_globs(name: str, where: str, globs: Iterable[str]) -> None:
    for glob in globs:
        try:
            compile_glob(glob)
        except GlobError as exc:
            raise ConfigError(f"{name}: [tool.cpq] {where}: bad glob {glob!r}: {exc}") from None
