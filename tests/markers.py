"""Markers in test snippets that say what the rules must conclude (see test_rules.py).

* ``# expect: R101`` on a line: a finding R101 at that line, in the enclosing function.
* ``# reject: R101`` on a ``def`` line: no R101 anywhere in that function; on any other
  line: no R101 at that line.
* ``# gap: numpy.X`` / ``# nogap: numpy.X``: the API is (is not) listed as an API support
  gap at that line.
* ``# unresolved: loop`` / ``# resolved: loop``: the site is (is not) counted as unresolved.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_MARK = re.compile(r"#\s*(expect|reject):\s*([R0-9, ]+)")
_GAP = re.compile(r"#\s*(gap|nogap):\s*([\w.,= ]+)")
_UNRESOLVED = re.compile(r"#\s*(unresolved|resolved):\s*(loop|call)")


@dataclass(frozen=True)
class Mark:
    kind: str  # "expect" | "reject" | "gap" | "nogap" | "unresolved" | "resolved"
    file: str
    code: str  # an R-code, an API name, or "loop"/"call"
    line: int
    function: str  # the enclosing function's qualname, "<module>" outside functions
    whole_function: bool  # a reject on a def line: nowhere in the function


def function_spans(text: str) -> list[tuple[int, int, str, int]]:
    """(first line, last line, qualname, def line) of every function, decorators excluded."""
    spans: list[tuple[int, int, str, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qual = prefix + child.name
                spans.append((child.lineno, child.end_lineno or child.lineno, qual, child.lineno))
                walk(child, qual + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(text), "")
    return spans


def read_marks(project: dict[str, str]) -> list[Mark]:
    marks = []
    for file, text in project.items():
        spans = function_spans(text)
        for lineno, line in enumerate(text.splitlines(), start=1):
            inner = [s for s in spans if s[0] <= lineno <= s[1]]
            span = max(inner, key=lambda s: s[0]) if inner else None
            function = span[2] if span else "<module>"
            on_def = span is not None and span[3] == lineno
            match = _MARK.search(line)
            if match:
                for code in re.findall(r"R\d{3}", match.group(2)):
                    marks.append(Mark(match.group(1), file, code, lineno, function, on_def))
            match = _GAP.search(line)
            if match:
                for api in re.findall(r"[\w.=]+", match.group(2)):
                    marks.append(Mark(match.group(1), file, api, lineno, function, False))
            match = _UNRESOLVED.search(line)
            if match:
                marks.append(Mark(match.group(1), file, match.group(2), lineno, function, False))
    return marks
