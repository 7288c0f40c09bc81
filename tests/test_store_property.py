"""The store never changes an answer: a stateful property test, black-box through the CLI.

A random small tree (NumPy code, pure Python, cross-file imports and calls, notebooks, broken
files, files with no facts, suppressions, a `[tool.cpq]` table) goes through random edits. After
each step, `cpq assess TREE --format json` with the store must print exactly what `--no-cache`
prints (only `stats.seconds`, the timing, is left out), and `cpq why` / `cpq query` on the tree
must answer what they answer on a fresh copy of it (no `.cpq/`: they have no `--no-cache`).

Only the command line is used, so the test stays valid whatever the store looks like inside.
Most runs are in-process (typer's CliRunner on `cpq.cli.app.app`, fast); a quarter go through
`python -m cpq`, so that module-level caches of a long-lived process cannot hide a bug of the
one-run-per-process case. The user cache ($XDG_CACHE_HOME/cpq: parsed program, tables
template) is a temporary folder per sequence, one for the runs with the store and another one
for the reference runs.

Environment knobs (the soak, bench/soak_store.py, sets them too):

* CPQ_PROPERTY_EXAMPLES: sequences (default 10); CPQ_PROPERTY_STEPS: steps per sequence
  (default 7).
* CPQ_PROPERTY_IDS=canonical: compare node ids in `why`/`query` answers as (file, offset in the
  file) instead of as numbers, to look past that difference for others (default: exact).
* CPQ_PROPERTY_RECORD=1: record mismatches in MISMATCHES and go on instead of failing.
* CPQ_PROPERTY_SHRINK=1: let Hypothesis shrink a failing sequence (minutes: off by default).

A failure prints the steps, a shell script that rebuilds the tree and replays the runs, and
the difference between the two answers.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)

import cpq

EXAMPLES = int(os.environ.get("CPQ_PROPERTY_EXAMPLES", "10"))
STEPS = int(os.environ.get("CPQ_PROPERTY_STEPS", "7"))
# The folder that holds the `cpq` package, for subprocesses (not resolved: in a development
# checkout `cpq` may be a symlink whose target is not named cpq).
PACKAGE_PARENT = str(Path(cpq.__file__).parent.parent)

# Figures for bench/soak_store.py (and anyone curious), summed over every sequence run.
STATS: Counter[str] = Counter()
MISMATCHES: list[dict[str, Any]] = []


def _ids_mode() -> str:
    return os.environ.get("CPQ_PROPERTY_IDS", "exact")


def _record_only() -> bool:
    return os.environ.get("CPQ_PROPERTY_RECORD") == "1"


# -- running cpq ---------------------------------------------------------------------------------


@dataclass
class Run:
    argv: list[str]
    code: int
    stdout: str
    stderr: str
    how: str  # "in-process" or "subprocess"


def run_cpq(args: list[str], xdg: Path, subprocess_run: bool, cwd: Path | None = None) -> Run:
    """`cpq ARGS` with XDG_CACHE_HOME=xdg, in this process or in a new one."""
    if subprocess_run:
        env = dict(os.environ)
        env["XDG_CACHE_HOME"] = str(xdg)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
        done = subprocess.run(
            [sys.executable, "-m", "cpq", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=cwd,
        )
        return Run(args, done.returncode, done.stdout, done.stderr, "subprocess")
    from typer.testing import CliRunner

    from cpq.cli.app import app
    from cpq.engine.storage import close_all_databases

    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()
    try:
        result = runner.invoke(app, args, env={"XDG_CACHE_HOME": str(xdg)})
    finally:
        # What `cpq.cli.app.run` does before its exit: why/query leave their database open.
        close_all_databases()
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert result.exc_info is not None
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return Run(args, result.exit_code, result.stdout, stderr, "in-process")


# `cpq -v assess`: "cpq: 2 files, 18 lines, 262 facts (0 files from the cache); extract ..."
VERBOSE = re.compile(r"^cpq: (\d+) files, ([\d,]+) lines, ([\d,]+) facts \((.*)\); extract")


def reuse_path(run: Run) -> str:
    """Which way the store served a cached `cpq -v assess` run, from its verbose line."""
    for line in run.stderr.splitlines():
        m = VERBOSE.match(line)
        if m is None:
            continue
        source = m.group(4)
        if source.startswith("saved results reused,"):
            return "early cutoff (saved results reused, changed files parsed)"
        if source == "saved results reused":
            return "saved results reused"
        if source.endswith("saved results updated"):
            return "saved results updated"
        if source == "0 files from the cache":
            return "evaluated, no file from the cache"
        if source.endswith("files from the cache"):
            return "evaluated, files from the cache"
        return source
    if run.code == 0:
        return "no verbose line"
    # The message, without the tree's folder: a usage error (exit 2) says what it is.
    message = re.sub(r"/\S*/tree/", "", (run.stderr.strip().splitlines() or [""])[-1])
    return f"exit {run.code}: {message[:100]}"


def _assess_outcome(run: Run) -> dict[str, Any]:
    """What a run of `cpq -v assess --format json` answers: everything but the timing."""
    counts = None
    other: list[str] = []
    for line in run.stderr.splitlines():
        m = VERBOSE.match(line)
        if m is not None:
            counts = {"files": m.group(1), "lines": m.group(2), "facts": m.group(3)}
        else:
            other.append(line)
    report: Any = run.stdout
    if run.code in (0, 1, 3) and run.stdout.strip():  # 3: nothing to assess, a report still
        try:
            report = json.loads(run.stdout)
            report.get("stats", {}).pop("seconds", None)
        except ValueError:
            pass
    return {"exit": run.code, "report": report, "verbose counts": counts, "stderr": other}


def _pretty(value: Any, path: str = "") -> list[str]:
    """`path = value` lines, a list's items one a line (without their index, so that one
    finding more shifts nothing in a diff)."""
    if isinstance(value, dict) and value:
        return [line for key in sorted(value) for line in _pretty(value[key], f"{path}.{key}".lstrip("."))]
    if isinstance(value, list) and value and path:
        return [f"{path}[] = {json.dumps(item, sort_keys=True, ensure_ascii=False)}" for item in value]
    if isinstance(value, list):
        return [line for item in value for line in _pretty(item, path)]
    if isinstance(value, str) and "\n" in value:
        return [f"{path}: {line}" if path else line for line in value.splitlines()]
    text = json.dumps(value, ensure_ascii=False)
    return [f"{path} = {text}" if path else text]


def difference(cached: Any, reference: Any, names: tuple[str, str]) -> str:
    lines = list(difflib.unified_diff(_pretty(reference), _pretty(cached), *names, lineterm="", n=2))
    if len(lines) > 120:
        lines = lines[:120] + [f"... ({len(lines) - 120} more lines)"]
    return "\n".join(lines)


# -- the code the trees are made of --------------------------------------------------------------

# `{f}` is a fresh function name, `{callee}` a function the file can call.
NUMPY_SNIPPETS = {
    "array loop": """
def {f}(a):
    for i in range(a.shape[0]):
        a[i] = a[i] * 2.0
    return a
""",
    ".item() in a loop": """
def {f}(a):
    total = 0.0
    for i in range(len(a)):
        total += a[i].item()
    return total
""",
    "stencil loop": """
def {f}(u):
    out = np.zeros_like(u)
    for i in range(1, u.shape[0] - 1):
        out[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0
    return out
""",
    "stencil slices": """
def {f}(u):
    out = np.empty_like(u)
    out[1:-1] = u[:-2] - 2.0 * u[1:-1] + u[2:]
    return out
""",
    "called in a loop": """
def {f}(n):
    a = np.ones(n)
    for step in range(20):
        a = {callee}(a)
    return a
""",
    "converge": """
def {f}(a):
    while np.max(np.abs(a)) > 1e-3:
        a = a * 0.5
    return a
""",
    "vectorised": """
def {f}(a, b):
    return np.sqrt(a * a + b * b) + np.sum(a @ b)
""",
    "sized by a constant": """
N = 4096
grid = np.zeros((N, N))
""",
    "suppressed": """
def {f}(a):
    out = []
    for row in a:
        out.append(float(row.sum()))  # cpq: ignore[R104]
    return out
""",
    "allocation in a loop": """
def {f}(a):
    for k in range(10):
        tmp = np.zeros(a.shape)
        a = np.concatenate([a, tmp])
    return a
""",
}
PURE_SNIPPETS = {
    "bfs": """
def {f}(graph, start):
    seen = {start}
    queue = [start]
    while queue:
        node = queue.pop()
        for nxt in graph.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen
""",
    "comprehension": """
def {f}(xs):
    return [x * 2 for x in xs if x % 3]
""",
    "calls in a loop": """
def {f}(items):
    total = 0
    for item in items:
        total = {callee}(item)
    return total
""",
}
BROKEN_SNIPPETS = {
    "syntax error": "\ndef {f}(:\n    pass\n",
    "unclosed bracket": "\nvalues = [1, 2,\n",
    "python 2": '\nprint "hello"\n',
}
NO_FACTS = {"empty": "", "comment only": "# nothing to see here\n", "blank lines": "\n\n\n"}
SUPPRESSIONS = ["# cpq: ignore[R104]", "# cpq: ignore[R101]", "# cpq: ignore[R105, R201]", "# cpq: ignore"]
MAGICS = ["%timeit {callee}(a)", "%matplotlib inline", "!ls", "%%time"]

PY_NAMES = ["a.py", "b.py", "c.py", "d.py", "sub/__init__.py", "sub/e.py", "sub/f.py"]
NB_NAMES = ["nb1.ipynb", "nb2.ipynb"]

CONTEXT_VALUES: dict[str, list[str | None]] = {
    "--elements": [None, "8192", "16M", "16384x16384", "2.5e8"],
    "--gpus": [None, "1", "4", "8"],
    "--pattern": [None, "stencil", "elementwise", "reduction", "sparse", "sequential"],
}

# (query, its variables that hold node ids)
QUERIES: list[tuple[str, tuple[str, ...]]] = [
    ("finding(C, F, L, Fn)", ()),
    ("call(C, Fn, Callee), node(C, K, S, L, _)", ("C", "Fn", "S")),
    ("node(N, K, S, L, _)", ("N", "S")),
    ("hot_function(G), function_def(G, Name, Q)", ("G",)),
    ("scope(S, K, Q, F, L, E)", ("S",)),
    ("innermost_loop(N, Lp), node(N, K, S, L, _)", ("N", "Lp", "S")),
    ("source_file(F, M, L)", ()),
    ("finding_hot(C, F, L), finding_counts(C, F, L)", ()),
    ("suppressed(C, F, L)", ()),
    ("disabled(C, F)", ()),
    ("import_module(F, M, L)", ()),
]


def module_name(relpath: str) -> str:
    name = relpath.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def defined_functions(text: str) -> list[str]:
    return re.findall(r"^def (\w+)\(", text, flags=re.MULTILINE)


@dataclass
class Doc:
    """A file of the tree: a .py file is one cell, a notebook its code cells in order."""

    cells: list[str]
    notebook: bool = False
    markdown_first: bool = True

    def text(self) -> str:
        return "".join(self.cells)

    def render(self) -> str:
        if not self.notebook:
            return self.cells[0]
        cells: list[dict[str, Any]] = []
        if self.markdown_first:
            cells.append({"cell_type": "markdown", "metadata": {}, "source": ["# Notes\n", "about the run"]})
        for cell in self.cells:
            cells.append(
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": cell.splitlines(keepends=True),
                }
            )
        notebook = {
            "cells": cells,
            "metadata": {
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                "language_info": {"name": "python"},
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        return json.dumps(notebook, indent=1) + "\n"


def edit_lines(text: str, index: int, op: str, extra: str = "") -> str:
    """One line edit of `text`; an empty text gets the line appended."""
    lines = text.splitlines()
    if not lines:
        lines = [extra or "x = 1"]
    else:
        i = index % len(lines)
        line = lines[i]
        if op == "change a number":
            m = re.search(r"\d", line)
            digit = str((int(m.group()) + 1) % 10) if m else ""
            lines[i] = line[: m.start()] + digit + line[m.end() :] if m else line + "  # edited"
        elif op == "trailing comment":
            lines[i] = line + "  # reviewed"
        elif op == "suppress":
            lines[i] = line + "  " + (extra or SUPPRESSIONS[0])
        elif op == "unsuppress":
            lines[i] = re.sub(r"\s*#\s*cpq:.*$", "", line)
        elif op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, line)
        elif op == "dedent":
            lines[i] = line[4:] if line.startswith("    ") else "    " + line
        elif op == "replace":
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = indent + (extra or "pass")
        else:
            raise ValueError(op)
    return "\n".join(lines) + "\n" if lines else ""


LINE_OPS = [
    "change a number",
    "trailing comment",
    "suppress",
    "unsuppress",
    "delete",
    "duplicate",
    "dedent",
    "replace",
]
MODES = st.integers(0, 3).map(lambda i: i == 3)  # True: a subprocess run
PICK = st.integers(0, 1_000)


# -- the state machine -----------------------------------------------------------------------------


@dataclass
class Log:
    steps: list[str] = field(default_factory=list)
    script: list[str] = field(default_factory=list)  # shell commands that replay the sequence

    def write(self, relpath: str, text: str) -> None:
        target = shlex.quote(relpath)
        folder = os.path.dirname(relpath)
        if folder:
            self.script.append(f"mkdir -p {shlex.quote(folder)}")
        if not text:
            self.script.append(f": > {target}")
        else:
            assert text.endswith("\n")
            self.script.append(f"cat > {target} <<'CPQ_EOF'\n{text}CPQ_EOF")


class StoreMachine(RuleBasedStateMachine):
    """A tree, its store, and the edits a user makes between runs."""

    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="cpq-prop-"))
        self.tree = self.base / "tree"
        self.tree.mkdir()
        self.xdg = self.base / "xdg-store"
        self.reference_xdg = self.base / "xdg-reference"
        self.docs: dict[str, Doc] = {}
        self.pure_before: dict[str, str] = {}  # a pure file turned into NumPy code: its text before
        self.context: dict[str, str | None] = dict.fromkeys(CONTEXT_VALUES)
        self.config: str | None = None
        self.counter = 0
        self.log = Log()
        self.last_findings: list[dict[str, Any]] = []
        self.mismatched = False
        STATS["sequences"] += 1

    def teardown(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    # -- the tree ---------------------------------------------------------------------------------

    def _fresh_name(self) -> str:
        self.counter += 1
        return f"f{self.counter}"

    def _write(self, relpath: str) -> None:
        text = self.docs[relpath].render()
        target = self.tree / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        self.log.write(relpath, text)

    def _write_config(self) -> None:
        target = self.tree / "pyproject.toml"
        if self.config is None:
            target.unlink(missing_ok=True)
            self.log.script.append("rm -f pyproject.toml")
        else:
            target.write_text(self.config, encoding="utf-8")
            self.log.write("pyproject.toml", self.config)

    def _py_files(self) -> list[str]:
        return sorted(p for p, d in self.docs.items() if not d.notebook)

    def _notebooks(self) -> list[str]:
        return sorted(p for p, d in self.docs.items() if d.notebook)

    def _pick(self, data: st.DataObject, choices: list[str], label: str) -> str:
        return data.draw(st.sampled_from(sorted(choices)), label=label)

    def _callable(self, data: st.DataObject, relpath: str, text: str) -> tuple[str, str]:
        """(import line or "", callee) for a call from `relpath`: a function of its own, one of
        another module of the tree (imported), or a NumPy function."""
        options = [("", f) for f in defined_functions(text)]
        for other in self._py_files():
            if other != relpath:
                for f in defined_functions(self.docs[other].text()):
                    options.append((f"from {module_name(other)} import {f}\n", f))
                    options.append((f"import {module_name(other)}\n", f"{module_name(other)}.{f}"))
        options.append(("", "np.cumsum"))
        return options[data.draw(st.integers(0, len(options) - 1), label="callee")]

    def _snippet(self, data: st.DataObject, family: str, relpath: str, text: str) -> tuple[str, str, str]:
        """(import line, code, description) of a snippet of `family` for the file."""
        table = {"numpy": NUMPY_SNIPPETS, "pure": PURE_SNIPPETS, "broken": BROKEN_SNIPPETS}[family]
        name = self._pick(data, list(table), f"{family} snippet")
        code = table[name].replace("{f}", self._fresh_name())
        header = ""
        if "{callee}" in code:
            header, callee = self._callable(data, relpath, text)
            code = code.replace("{callee}", callee)
        return header, code, f"{family}: {name}" + (f" ({header.strip()})" if header else "")

    def _new_text(self, data: st.DataObject, relpath: str, kind: str) -> tuple[str, str]:
        if kind == "no facts":
            name = self._pick(data, list(NO_FACTS), "no-facts text")
            return NO_FACTS[name], name
        family = "pure" if kind == "pure" else "numpy"
        head = "import numpy as np\n" if family == "numpy" else ""
        body, described = "", []
        for _ in range(data.draw(st.integers(1, 3), label="snippets")):
            header, code, what = self._snippet(data, family, relpath, head + body)
            head, body = (head + header if header not in head else head), body + code
            described.append(what)
        if kind == "broken":
            _, code, what = self._snippet(data, "broken", relpath, body)
            body += code
            described.append(what)
        return head + body, "; ".join(described)

    def _add_file(self, data: st.DataObject) -> str:
        kind = self._pick(data, ["numpy", "pure", "broken", "no facts", "notebook"], "file kind")
        if kind == "notebook":
            free = [n for n in NB_NAMES if n not in self.docs]
            if not free:
                kind = "numpy"
        free = [n for n in (NB_NAMES if kind == "notebook" else PY_NAMES) if n not in self.docs]
        if not free:
            return self._edit_line(data)
        relpath = self._pick(data, free, "new file")
        if kind == "notebook":
            cells = ["import numpy as np\n"]
            header, code, what = self._snippet(data, "numpy", relpath, "")
            cells[0] += header
            cells.append(code.lstrip("\n"))
            fs = defined_functions(code)
            if fs:
                cells.append(f"a = np.ones(1000)\nfor _ in range(5):\n    a = {fs[0]}(a)\n")
            self.docs[relpath] = Doc(cells, notebook=True, markdown_first=data.draw(st.booleans()))
        else:
            text, what = self._new_text(data, relpath, kind)
            self.docs[relpath] = Doc([text])
        self._write(relpath)
        return f"add {relpath} ({kind}: {what})"

    def _remove_file(self, data: st.DataObject) -> str:
        if not self.docs:
            return self._add_file(data)
        relpath = self._pick(data, list(self.docs), "file to remove")
        del self.docs[relpath]
        self.pure_before.pop(relpath, None)
        (self.tree / relpath).unlink()
        self.log.script.append(f"rm {shlex.quote(relpath)}")
        return f"remove {relpath}"

    def _rename_file(self, data: st.DataObject) -> str:
        if not self.docs:
            return self._add_file(data)
        relpath = self._pick(data, list(self.docs), "file to rename")
        names = NB_NAMES if self.docs[relpath].notebook else PY_NAMES
        free = [n for n in names if n not in self.docs]
        if not free:
            return self._edit_line(data)
        new = self._pick(data, free, "new name")
        self.docs[new] = self.docs.pop(relpath)
        if relpath in self.pure_before:
            self.pure_before[new] = self.pure_before.pop(relpath)
        (self.tree / new).parent.mkdir(parents=True, exist_ok=True)
        (self.tree / relpath).rename(self.tree / new)
        self.log.script.append(f"mkdir -p {shlex.quote(os.path.dirname(new) or '.')}")
        self.log.script.append(f"mv {shlex.quote(relpath)} {shlex.quote(new)}")
        return f"rename {relpath} -> {new}"

    def _cell(self, data: st.DataObject, relpath: str) -> int:
        doc = self.docs[relpath]
        return data.draw(st.integers(0, len(doc.cells) - 1), label="cell") if doc.notebook else 0

    def _edit_line(self, data: st.DataObject) -> str:
        if not self.docs:
            return self._add_file(data)
        relpath = self._pick(data, list(self.docs), "file to edit")
        doc = self.docs[relpath]
        cell = self._cell(data, relpath)
        op = data.draw(st.sampled_from(LINE_OPS), label="line edit")
        index = data.draw(PICK, label="line")
        extra = ""
        if op == "suppress":
            extra = data.draw(st.sampled_from(SUPPRESSIONS), label="suppression")
        elif op == "replace":
            extra = data.draw(st.sampled_from(["pass", "x = a.item()", "value = 1", "return a"]), label="by")
        doc.cells[cell] = edit_lines(doc.cells[cell], index, op, extra)
        self._write(relpath)
        lines = max(len(doc.cells[cell].splitlines()), 1)
        where = f"cell {cell + 1} of {relpath}" if doc.notebook else relpath
        return f"edit {where}: {op} {extra!r} at line {index % lines + 1}"

    def _append(self, data: st.DataObject) -> str:
        if not self.docs:
            return self._add_file(data)
        relpath = self._pick(data, list(self.docs), "file to append to")
        doc = self.docs[relpath]
        cell = len(doc.cells) - 1
        what = self._pick(data, ["numpy", "pure", "broken", "comment", "blank lines"], "append")
        if what == "comment":
            doc.cells[cell] += "# a comment at the end\n"
        elif what == "blank lines":
            doc.cells[cell] += "\n\n"
        else:
            header, code, what = self._snippet(data, what, relpath, doc.text())
            if header:
                doc.cells[0] = header + doc.cells[0]
            doc.cells[cell] += code
        self._write(relpath)
        return f"append to {relpath}: {what}"

    def _insert_top(self, data: st.DataObject) -> str:
        if not self.docs:
            return self._add_file(data)
        pure = [p for p in self._py_files() if "numpy" not in self.docs[p].text()]
        # Mostly into a pure-Python file (a file without facts gaining some), mostly an import.
        prefer_pure = bool(pure) and data.draw(st.sampled_from([True, True, False]), label="into pure Python")
        relpath = self._pick(data, pure if prefer_pure else list(self.docs), "file")
        inserts = ["import numpy as np\n", "import", "# a header comment\n", "\n", "import numpy as np\n"]
        what = data.draw(st.sampled_from(inserts), label="insert")
        doc = self.docs[relpath]
        if what == "import":
            what, _ = self._callable(data, relpath, doc.text())
            what = what or "import numpy as np\n"
        doc.cells[0] = what + doc.cells[0]
        self._write(relpath)
        return f"insert {what.strip() or 'a blank line'!r} at the top of {relpath}"

    def _numpy_toggle(self, data: st.DataObject) -> str:
        if self.pure_before and data.draw(st.booleans(), label="back to pure Python"):
            relpath = self._pick(data, list(self.pure_before), "file")
            self.docs[relpath].cells = [self.pure_before.pop(relpath)]
            self._write(relpath)
            return f"turn {relpath} back into pure Python"
        pure = [
            p for p in self._py_files() if "numpy" not in self.docs[p].text() and p not in self.pure_before
        ]
        if not pure:
            return self._insert_top(data)
        relpath = self._pick(data, pure, "file")
        doc = self.docs[relpath]
        self.pure_before[relpath] = doc.cells[0]
        header, code, what = self._snippet(data, "numpy", relpath, doc.text())
        doc.cells[0] = "import numpy as np\n" + header + doc.cells[0] + code
        self._write(relpath)
        return f"turn {relpath} into NumPy code ({what})"

    def _empty_file(self, data: st.DataObject) -> str:
        if not self.docs:
            return self._add_file(data)
        relpath = self._pick(data, list(self.docs), "file to empty")
        doc = self.docs[relpath]
        doc.cells = ["\n"] if doc.notebook else [""]
        self._write(relpath)
        return f"empty {relpath}"

    def _touch(self, data: st.DataObject) -> str:
        if not self.docs:
            return self._add_file(data)
        relpath = self._pick(data, list(self.docs), "file to rewrite")
        self._write(relpath)
        return f"rewrite {relpath} unchanged"

    def _edit_notebook(self, data: st.DataObject) -> str:
        if not self._notebooks():
            return self._add_file(data)
        relpath = self._pick(data, self._notebooks(), "notebook")
        doc = self.docs[relpath]
        ops = ["add cell", "remove cell", "swap cells", "magic", "broken cell", "markdown"]
        op = self._pick(data, ops, "notebook edit")
        if op == "add cell":
            header, code, what = self._snippet(data, "numpy", relpath, doc.text())
            doc.cells[0] = doc.cells[0] + header
            doc.cells.append(code.lstrip("\n"))
            op += f" ({what})"
        elif op == "remove cell" and len(doc.cells) > 1:
            del doc.cells[self._cell(data, relpath)]
        elif op == "swap cells" and len(doc.cells) > 1:
            i = self._cell(data, relpath)
            j = (i + 1) % len(doc.cells)
            doc.cells[i], doc.cells[j] = doc.cells[j], doc.cells[i]
        elif op == "magic":
            magic = data.draw(st.sampled_from(MAGICS), label="magic")
            functions = defined_functions(doc.text())
            magic = magic.replace("{callee}", functions[0] if functions else "np.sum")
            cell = self._cell(data, relpath)
            doc.cells[cell] = magic + "\n" + doc.cells[cell]
            op += f" {magic!r}"
        elif op == "broken cell":
            doc.cells.append("def broken(:\n    pass\n")
        else:
            doc.markdown_first = not doc.markdown_first  # every cell number moves by one
        self._write(relpath)
        return f"notebook {relpath}: {op}"

    def _set_context(self, data: st.DataObject) -> str:
        option = self._pick(data, list(CONTEXT_VALUES), "option")
        self.context[option] = data.draw(st.sampled_from(CONTEXT_VALUES[option]), label=option)
        return f"context {option} {self.context[option]}"

    def _set_config(self, data: st.DataObject) -> str:
        # Mostly a [tool.cpq] table; now and then none, one without it, or one cpq rejects.
        form = ["tool.cpq"] * 3 + ["none", "no tool.cpq", "invalid"]
        form = form[data.draw(st.integers(0, len(form) - 1), label="config")]
        if form == "none":
            self.config = None
        elif form == "no tool.cpq":
            self.config = '[project]\nname = "tree"\n'
        elif form == "invalid":
            # A typo, seen by one run (both exit 2), then undone: it persisting would only
            # make the following runs exit 2 as well.
            previous, self.config = self.config, "[tool.cpq]\nno-such-key = 1\n"
            self._write_config()
            self._step("pyproject.toml: a [tool.cpq] key cpq rejects")
            self._check_assess(False)
            self.config = previous
            self._write_config()
            return "pyproject.toml: the previous one back"
        else:
            entries = []
            draws: list[tuple[str, list[str]]] = [
                ("elements", ['"8192"', '"1G"', "100000"]),
                ("gpus", ["2", "8"]),
                ("select", ['["R1"]', '["R1", "R2"]', '["R104", "R3"]']),
                ("ignore", ['["R104"]', '["R2"]', '["R10"]']),
                ("exclude", ['["sub/"]', '["b.py"]', '["*.ipynb"]']),
                ("extend-exclude", ['["c.py"]', '["sub/**"]']),
                (
                    "per-file-ignores",
                    ['{"sub/*.py" = ["R1"]}', '{"a.py" = ["R104", "R101"]}', '{"*.ipynb" = ["R"]}'],
                ),
            ]
            for key, values in draws:
                if data.draw(st.integers(0, 2), label=f"use {key}") == 0:
                    entries.append(f"{key} = {data.draw(st.sampled_from(values), label=key)}")
            self.config = "[tool.cpq]\n" + "".join(e + "\n" for e in entries)
        self._write_config()
        return "pyproject.toml: " + (" | ".join(self.config.splitlines()) if self.config else "removed")

    def _forget(self, data: st.DataObject) -> str:
        which = data.draw(st.sampled_from(["the tree's .cpq/", "the user cache", "both"]), label="delete")
        if which != "the user cache":
            shutil.rmtree(self.tree / ".cpq", ignore_errors=True)
            self.log.script.append("rm -rf .cpq")
        if which != "the tree's .cpq/":
            shutil.rmtree(self.xdg / "cpq", ignore_errors=True)
            self.log.script.append('rm -rf "$XDG_CACHE_HOME/cpq"')
        return f"delete {which}"

    EDITS = {
        "add a file": _add_file,
        "remove a file": _remove_file,
        "rename a file": _rename_file,
        "edit a line": _edit_line,
        "append": _append,
        "insert at the top": _insert_top,
        "NumPy <-> pure Python": _numpy_toggle,
        "empty a file": _empty_file,
        "rewrite unchanged": _touch,
        "edit a notebook": _edit_notebook,
        "context options": _set_context,
        "configuration": _set_config,
        "delete caches": _forget,
    }
    # The edits to draw from, the ones that change which files have facts and how many (where
    # the store has gone wrong) more often than the others, and first: Hypothesis shrinks
    # towards the first.
    EDIT_CHOICES = [
        "insert at the top",
        "NumPy <-> pure Python",
        "add a file",
        "append",
        "edit a line",
        "insert at the top",
        "NumPy <-> pure Python",
        "add a file",
        "append",
        "edit a line",
        "remove a file",
        "rename a file",
        "empty a file",
        "rewrite unchanged",
        "edit a notebook",
        "context options",
        "configuration",
        "delete caches",
    ]

    # -- runs and checks ----------------------------------------------------------------------------

    def _context_args(self) -> list[str]:
        return [arg for option, value in self.context.items() if value is not None for arg in (option, value)]

    def _cpq(self, args: list[str], subprocess_run: bool, root: Path, xdg: Path) -> Run:
        """cpq with ROOT for the tree; the script records runs of the tree with the store."""
        argv = [str(root) if a == "ROOT" else a for a in args]
        if root == self.tree and "--no-cache" not in args:
            self.log.script.append(
                "cpq " + " ".join(shlex.quote("." if a == "ROOT" else a) for a in args) + " > /dev/null"
            )
        return run_cpq(argv, xdg, subprocess_run)

    def _fail(self, what: str, kind: str, detail: str) -> None:
        """A mismatch of `kind` (the reuse path, or why/query). Recorded, a sequence goes on, but
        only its first mismatch counts as one: later ones may only repeat what the store got
        wrong first (wrong saved results are reused, or their facts copied)."""
        if self.mismatched:
            STATS["later mismatches in a sequence"] += 1
            return
        self.mismatched = True
        STATS["mismatches"] += 1
        STATS[f"mismatch: {kind}"] += 1
        steps = "\n".join(f"  {i}. {s}" for i, s in enumerate(self.log.steps, 1))
        script = "\n".join(self.log.script)
        message = (
            f"{what}\n\nsteps:\n{steps}\n\n"
            f"replay (bash, in an empty folder, with cpq on the PATH):\n"
            f"export XDG_CACHE_HOME=$(mktemp -d)\n{script}\n\n{detail}"
        )
        if _record_only():
            MISMATCHES.append({"what": what, "kind": kind, "steps": list(self.log.steps), "message": message})
            return
        raise AssertionError(message)

    def _step(self, description: str) -> None:
        self.log.steps.append(description)
        STATS["steps"] += 1

    def _check_assess(self, subprocess_run: bool) -> None:
        args = ["-v", "assess", "ROOT", "--format", "json", *self._context_args()]
        cached = self._cpq(args, subprocess_run, self.tree, self.xdg)
        reference = self._cpq([*args, "--no-cache"], subprocess_run, self.tree, self.reference_xdg)
        path = reuse_path(cached)
        STATS["compared"] += 1
        STATS[f"path: {path}"] += 1
        got, expected = _assess_outcome(cached), _assess_outcome(reference)
        if isinstance(expected["report"], dict):
            self.last_findings = expected["report"].get("findings", [])
        if got == expected:
            return
        again = _assess_outcome(
            self._cpq([*args, "--no-cache"], subprocess_run, self.tree, self.reference_xdg)
        )
        if again != expected:
            self._fail(
                "two --no-cache runs of the same tree differ",
                "--no-cache itself",
                difference(again, expected, ("--no-cache", "--no-cache, again")),
            )
            return
        self._fail(
            f"cpq assess with the store ({cached.how}, {path}) differs from --no-cache",
            path,
            difference(got, expected, ("--no-cache", "with the store"))
            + f"\n\nstderr with the store:\n{cached.stderr[-3000:]}",
        )

    def _fresh_copy(self) -> Path:
        copy = Path(tempfile.mkdtemp(prefix="fresh-", dir=self.base)) / "tree"
        shutil.copytree(self.tree, copy, ignore=shutil.ignore_patterns(".cpq"))
        return copy

    def _node_files(self, root: Path, xdg: Path) -> list[tuple[int, str]]:
        """(first node id, file) of every module: a node id as (file, offset) does not depend
        on how the ids were laid out."""
        args = ["query", 'scope(S, "module", Q, F, L, E)', "ROOT", "--format", "json", *self._context_args()]
        run = self._cpq(args, False, root, xdg)
        rows = json.loads(run.stdout) if run.code == 0 else []
        return sorted((row["S"], row["F"]) for row in rows)

    @staticmethod
    def _canonical_id(value: Any, modules: list[tuple[int, str]]) -> Any:
        if not isinstance(value, int) or value < 0:
            return value
        below = [(base, file) for base, file in modules if base <= value]
        if not below:
            return f"?+{value}"
        base, file = below[-1]
        return f"{file}+{value - base}"

    def _compare_on_fresh_copy(
        self, args: list[str], subprocess_run: bool, ids: tuple[str, ...] | None
    ) -> None:
        """`cpq ARGS` on the tree (with its store) and on a fresh copy: the same answer.
        `ids`: for `query --format json`, the columns that hold node ids; None for `why`."""
        full = [*args, *self._context_args()]
        cached = self._cpq(full, subprocess_run, self.tree, self.xdg)
        copy = self._fresh_copy()
        fresh = self._cpq(full, subprocess_run, copy, self.reference_xdg)
        STATS["compared"] += 1
        STATS[f"compared: {args[0]}"] += 1

        def answer(run: Run, root: Path, xdg: Path) -> Any:
            if run.code != 0:
                return {"exit": run.code, "stderr": run.stderr.replace(str(root), "ROOT")}
            canonical = _ids_mode() == "canonical"
            modules = self._node_files(root, xdg) if canonical else []
            if ids is None:
                if canonical:
                    return re.sub(
                        r"\bn(\d+)\b", lambda m: f"n[{self._canonical_id(int(m[1]), modules)}]", run.stdout
                    )
                return run.stdout
            rows = json.loads(run.stdout)
            if not isinstance(rows, list):
                return rows
            # As a sorted set, a row a line: a difference then reads row by row.
            return sorted(
                {
                    " ".join(
                        f"{k}={self._canonical_id(v, modules) if canonical and k in ids else v!r}"
                        for k, v in row.items()
                    )
                    for row in rows
                }
            )

        got, expected = answer(cached, self.tree, self.xdg), answer(fresh, copy, self.reference_xdg)
        shutil.rmtree(copy.parent, ignore_errors=True)
        if got != expected:
            shown = " ".join(shlex.quote("." if a == "ROOT" else a) for a in full)
            self._fail(
                f"cpq {shown} ({cached.how}) differs between the tree with its store and a fresh copy",
                args[0],
                difference(got, expected, ("fresh copy", "with the store")),
            )

    # -- rules -------------------------------------------------------------------------------------

    @initialize(data=st.data(), files=st.integers(1, 4), subprocess_run=MODES)
    def start(self, data: st.DataObject, files: int, subprocess_run: bool) -> None:
        described = [self._add_file(data) for _ in range(files)]
        if data.draw(st.integers(0, 2), label="start with a pyproject.toml") == 0:
            described.append(self._set_config(data))
        self._step("start: " + "; ".join(described))
        self._check_assess(subprocess_run)

    @rule(data=st.data(), edit=st.sampled_from(EDIT_CHOICES), subprocess_run=MODES)
    def edit(self, data: st.DataObject, edit: str, subprocess_run: bool) -> None:
        self._step(self.EDITS[edit](self, data))
        self._check_assess(subprocess_run)

    @rule(data=st.data(), count=st.integers(2, 4), subprocess_run=MODES)
    def several_edits(self, data: st.DataObject, count: int, subprocess_run: bool) -> None:
        for i in range(count):
            edit = data.draw(st.sampled_from(self.EDIT_CHOICES), label="edit")
            described = self.EDITS[edit](self, data)
            if i < count - 1:
                self.log.steps.append(f"{described} (no run yet)")
        self._step(described)
        self._check_assess(subprocess_run)

    @rule(data=st.data(), subprocess_run=MODES)
    def ask(self, data: st.DataObject, subprocess_run: bool) -> None:
        if data.draw(st.sampled_from(["query", "why"]), label="question") == "query":
            text, ids = data.draw(st.sampled_from(QUERIES), label="query")
            self._step(f"cpq query {text!r}")
            self._compare_on_fresh_copy(["query", text, "ROOT", "--format", "json"], subprocess_run, ids)
            return
        question = data.draw(st.sampled_from(["finding", "verdict", "gate", "not"]), label="why")
        findings = self.last_findings
        if question in ("finding", "not") and findings:
            finding = findings[data.draw(st.integers(0, len(findings) - 1), label="finding")]
            words = [finding["code"], f"{finding['file']}:{finding['line']}"]
            if question == "not":
                code = data.draw(st.sampled_from(["R101", "R104", "R105", "R201"]), label="code")
                words = ["not", code, words[1]]
        elif question == "gate":
            words = ["gate", str(data.draw(st.integers(1, 6), label="gate"))]
        else:
            words = ["verdict"]
        self._step("cpq why " + " ".join(words))
        self._compare_on_fresh_copy(["why", *words, "ROOT"], subprocess_run, None)


def machine_settings(examples: int = EXAMPLES, steps: int = STEPS, **extra: Any) -> settings:
    if os.environ.get("CPQ_PROPERTY_SHRINK") != "1":
        # A step costs a second or two: shrinking a failure can take many minutes, and the
        # unshrunk sequence is short, with its steps and a replay script printed anyway.
        extra.setdefault("phases", [Phase.explicit, Phase.reuse, Phase.generate])
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        **extra,
    )


def test_a_run_with_the_store_answers_what_a_run_without_it_answers() -> None:
    run_state_machine_as_test(StoreMachine, settings=machine_settings())


# -- sequences found by the machine, kept as plain examples ---------------------------------------

STENCIL = """import numpy as np

def stencil(u):
    out = np.zeros_like(u)
    for i in range(1, u.shape[0] - 1):
        out[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0
    return out
"""
ITEM_LOOP = """import numpy as np

def total(a):
    s = 0.0
    for i in range(len(a)):
        s += a[i].item()
    return s
"""
RUN = """
def run(n):
    a = np.ones(n)
    for _ in range(10):
        a = stencil(a)
    return a
"""
BFS = """def bfs(graph, start):
    seen = {start}
    queue = [start]
    while queue:
        queue.pop()
"""

# Each step: files to write (None: remove), then `cpq assess` with the store against --no-cache,
# and the queries against a fresh copy.
KNOWN_SEQUENCES: dict[str, list[dict[str, str | None]]] = {
    # A file without facts (pure Python, linked to no array code) gains some.
    "import numpy inserted into a pure-Python file": [
        {"kernel.py": STENCIL + RUN, "bfs.py": BFS},
        {"bfs.py": "import numpy as np\n" + BFS},
    ],
    # The same, then the file after it goes: the facts of both go with it.
    "an empty file filled, then the next file removed": [
        {"a.py": "\n", "b.py": STENCIL},
        {"a.py": ITEM_LOOP},
        {"b.py": None},
    ],
    # Node ids are part of `cpq query`'s answers.
    "a line appended to the first of two files": [
        {"a.py": STENCIL, "b.py": ITEM_LOOP},
        {"a.py": STENCIL + "x = 1\n"},
    ],
}


def test_known_sequences_answer_what_a_run_without_the_store_answers(tmp_path: Path) -> None:
    failures = []
    reference_xdg = tmp_path / "xdg-reference"
    for name, steps in KNOWN_SEQUENCES.items():
        tree, xdg = tmp_path / name.replace(" ", "-") / "tree", tmp_path / "xdg"
        tree.mkdir(parents=True)
        for i, files in enumerate(steps, 1):
            for relpath, text in files.items():
                if text is None:
                    (tree / relpath).unlink()
                else:
                    (tree / relpath).write_text(text)
            args = ["-v", "assess", str(tree), "--format", "json"]
            cached = _assess_outcome(run_cpq(args, xdg, False))
            reference = _assess_outcome(run_cpq([*args, "--no-cache"], reference_xdg, False))
            if cached != reference:
                diff = difference(cached, reference, ("--no-cache", "with the store"))
                failures.append(f"{name}, step {i}: cpq assess\n{diff}")
            fresh = tree.parent / f"fresh-{i}"
            shutil.copytree(tree, fresh, ignore=shutil.ignore_patterns(".cpq"))
            for query in ("function_def(F, Name, Q)", "scope(S, K, Q, F, L, E)"):
                answers = []
                for root, cache in ((tree, xdg), (fresh, reference_xdg)):
                    done = run_cpq(["query", query, str(root), "--format", "json"], cache, False)
                    rows = json.loads(done.stdout)
                    answers.append(sorted({" ".join(f"{k}={v!r}" for k, v in row.items()) for row in rows}))
                if answers[0] != answers[1]:
                    diff = difference(answers[0], answers[1], ("fresh copy", "with the store"))
                    failures.append(f"{name}, step {i}: cpq query {query!r}\n{diff}")
    assert not failures, "\n\n".join(failures)
