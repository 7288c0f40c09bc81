"""A proof's nodes as code (explain.spans, facts.spans): the span-recording extraction numbers
nodes exactly as a run does, proofs show `file:line:col` and each node's own text, the loop of
`innermost_loop`, notebook cells as the reports write them, and no code from an edited file."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import EXAMPLES, write_notebook
from typer.testing import CliRunner

from cpq.cli.app import app
from cpq.explain import ProofNode, Prover, proof_to_json, render_text
from cpq.explain.spans import AssessedSources, node_text
from cpq.facts import SourceText, extract_source
from cpq.facts.extract import MAX_EXPR_DEPTH
from cpq.facts.notebook import notebook_to_source
from cpq.facts.spans import Span, file_spans
from cpq.pipeline.assessment import Assessment, assess

runner = CliRunner()

# Snippets that exercise every way the extractor gives node ids.
TRICKY = {
    "broken.py": "import numpy as np\n\ndef f(a):\n    x = np.ones(3\n    return a.sum()\n\n"
    "for i in range(3):\n    y = f(i)\n    z = (1 +\n"
    + "".join(f"w{i} = np.zeros({i}) + f(w{i - 1})\n" for i in range(1, 20)),
    "deep.py": "x = "
    + " + ".join(f"a{i}" for i in range(MAX_EXPR_DEPTH * 3))
    + "\n"
    + "y = "
    + "(" * 80
    + "1"
    + ")" * 80
    + "\n"
    + "z = "
    + "-" * 100
    + "1\n"
    + "w = "
    + "[" * 70
    + "]" * 70
    + "\n",
    "fstrings.py": 'name = "x"\nw = 3\ns = f"{name!r:>{w}} and {f\'{name.upper()}\'} {{lit}} {w * 2=}"\n'
    't = rb"\\d" "plain" f"{s}"\nu = """doc\n{x}\n"""\nv = f"""\n{name}\n"""\n',
    "comprehensions.py": "a = [x * y for x in range(3) if x for y in range(x) if (z := y)]\n"
    "b = {k: v for k, v in zip(a, a)}\nc = {i for i in a}\n"
    "d = sum(i for i in a)\ne = [[j for j in range(i)] for i in range(4)]\n"
    "f = (lambda q=1, *r, **s: q + len(r))(2)\n",
    "decorators.py": "import functools\n\n\n@functools.lru_cache(maxsize=None)\n@staticmethod\n"
    "def f(a, b: int = 2, *args, c=3, **kw) -> int:\n    return a\n\n\n"
    "@dataclass\nclass C(Base, metaclass=M):\n"
    "    x: int = 0\n\n    @property\n    def p(self):\n        return self.x\n\n"
    "    async def q(self, n):\n        async for i in aiter(n):\n            await i\n"
    "        async with lock() as (u, v):\n            pass\n",
    "matching.py": "def g(cmd):\n    match cmd:\n        case [x, y, *rest] if x > y:\n            return x\n"
    "        case {'k': v, **others}:\n            return v\n        case Point(x=0, y=yy) | None:\n"
    "            return yy\n        case str() as s:\n            return s\n"
    "        case _:\n            pass\n",
    "statements.py": "import os, sys as system\nfrom . import sibling\nfrom .pkg.mod import (a, b as c)\n"
    "from __future__ import annotations\nglobal G\nx = y = z = 1\nx += 2\n(p, [q, *r]) = s = (1, [2, 3])\n"
    "del x\nassert x, 'msg'\ntry:\n    raise ValueError from None\nexcept* (TypeError, KeyError) as eg:\n"
    "    pass\nelse:\n    pass\nfinally:\n    pass\nwhile x < 3:\n    x = x + 1\n    continue\nelse:\n"
    "    break\nif a: b = 1\nelif c: b = 2\nelse: b = 3\nwith open(f) as h, open(g):\n    pass\n"
    "type Alias = list[int]\nm = a[1:2, ::3, ...]\nn = a if b else c\nprint >> f, x\n"
    "o = not a and b or -c ** ~d\nq = a < b <= c is not d not in e\nyield_ = [*a, *b]\nr = {**a, 'k': 1}\n"
    "def gen():\n    nonlocal_ = yield from x\n    yield\n# a comment\nx = 1  # trailing\n"
    "é_name = 'ünïcode'; t = 1\n\tindented = 1\n",
}
NOTEBOOK_CELLS = [
    ["import numpy as np\n", "%matplotlib inline\n", "A = np.ones((64, 64))\n"],
    ["%%time\n", "total = []\n", "for i in range(100):\n", "    v = A @ A\n"]
    + ["    total.append(v.sum().item())\n"],
    ["!pip list\n", "%time w = float(np.dot(A[0], A[0]))\n", "A?\n"],
    ["%%bash\n", "echo hi\n"],
    ["def f(\n", "    a):\n", "    return [a[i].item() for i in range(3)]\n"],
]


def _notebook(path: Path, cells: list[list[str]]) -> None:
    write_notebook(
        path,
        [{"cell_type": "markdown", "metadata": {}, "source": ["# title\n"]}]
        + [
            {"cell_type": "code", "metadata": {}, "execution_count": i, "outputs": [], "source": cell}
            for i, cell in enumerate(cells, start=1)
        ],
    )


def _db_nodes(result: Assessment, file: str) -> list[tuple[int, str, int]]:
    """The `node` facts of `file` in an assessed database, numbered from 0 as extracted."""
    assert result.db is not None
    con = result.db.con
    (base,) = con.execute("SELECT s FROM scope WHERE file = ? AND kind = 'module'", [file]).fetchone()  # type: ignore[misc]
    rows = con.execute(
        "SELECT n.n, n.kind, n.line FROM node n JOIN scope s ON s.s = n.scope WHERE s.file = ?", [file]
    ).fetchall()
    return sorted((n - base, kind, line) for n, kind, line in rows)


def _check_spans(result: Assessment, file: str) -> int:
    """The span-recording extraction of `file` gives the ids, kinds and lines of the run's facts,
    a span for each id, starting on the node's line."""
    found = file_spans(file, result.sources[file])
    assert found is not None, file
    ran = sorted((n, kind, line) for n, kind, _scope, line, _stmt in found.nodes)
    assert ran == _db_nodes(result, file), file
    normal = extract_source(SourceText(file, result.sources[file]))
    assert not isinstance(normal, type(None)) and found.nodes == normal.rows["node"]  # type: ignore[union-attr]
    assert set(found.spans) == {n for n, _, _ in ran}, file
    for n, kind, line in ran:
        span = found.spans[n]
        assert span.line == line, (file, n, kind, span)
        assert (span.end_line, span.end_column) >= (span.line, span.column), (file, n, kind, span)
    return len(ran)


@pytest.fixture(scope="module")
def examples() -> Assessment:
    return assess(EXAMPLES)


@pytest.fixture(scope="module")
def tricky(tmp_path_factory: pytest.TempPathFactory) -> Assessment:
    root = tmp_path_factory.mktemp("tricky")
    for name, text in TRICKY.items():
        (root / name).write_text(text, encoding="utf-8")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("from .mod import a\n" + TRICKY["decorators.py"])
    _notebook(root / "nb.ipynb", NOTEBOOK_CELLS)
    return assess(root)


def test_span_extraction_numbers_nodes_as_a_run_does_over_the_examples(examples: Assessment) -> None:
    assert len(examples.files) >= 20
    assert sum(_check_spans(examples, file) for file in examples.files) > 1000


def test_span_extraction_numbers_nodes_as_a_run_does_over_tricky_code(tricky: Assessment) -> None:
    assert sorted(tricky.files) == sorted([*TRICKY, "pkg/__init__.py", "nb.ipynb"])
    assert "broken.py" in {file for file, _ in tricky.partial}  # its intact parts are extracted
    for file in tricky.files:
        assert _check_spans(tricky, file) > 5, file
    assert tricky.db is not None
    deep = tricky.db.con.execute("SELECT count(*) FROM node WHERE kind = 'deep_expression'").fetchone()
    assert deep is not None and deep[0] > 0


def test_span_extraction_of_a_file_a_run_skips_is_none() -> None:
    assert file_spans("py2.py", "print 'hello'\n") is None
    assert file_spans("garbage.py", ")))) ((((\n]]]] [[[[\n") is None


# -- node text ------------------------------------------------------------------------------


def test_node_text_is_the_first_line_collapsed_and_cut() -> None:
    lines = ["for i in range(n):  # hot", "    x = np.dot(a,", "               b)", "y = " + "a" * 100]
    comments = {1: 21}
    assert node_text(lines, Span(1, 1, 3, 17), comments) == "for i in range(n):"
    assert node_text(lines, Span(2, 9, 3, 17), comments) == "np.dot(a, …"
    assert node_text(lines, Span(2, 5, 3, 17), comments) == "x = np.dot(a, …"
    assert node_text(lines, Span(2, 9, 2, 15), comments) == "np.dot"
    long = node_text(lines, Span(4, 1, 4, 105), comments)
    assert len(long) == 60 and long.endswith("…") and long.startswith("y = aaa")


# -- proofs ---------------------------------------------------------------------------------

SOLVER = textwrap.dedent(
    """\
    import numpy as np


    def descend(A, b, iters):
        x = np.zeros(A.shape[1])
        for i in range(iters):
            r = A @ x - b
            loss = float(np.dot(r, r))
            x -= 0.1 * (A.T @ r)
        return x
    """
)
LOSS_LINE = 8


def _prove(result: Assessment, file: str, line: int, code: str = "R104") -> ProofNode:
    assert result.db is not None
    (values,) = [
        row for row in result.db.rows("finding") if row[0] == code and row[1] == file and row[2] == line
    ]
    prover = Prover(result.db, sources=AssessedSources.of(result))
    return prover.prove("finding", values)


@pytest.fixture()
def solver(tmp_path: Path) -> Assessment:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "solver.py").write_text(SOLVER)
    return assess(root)


def test_a_proof_shows_file_line_column_and_the_node_text(solver: Assessment) -> None:
    root = _prove(solver, "solver.py", LOSS_LINE)
    text = render_text(root)
    # float(...) and np.dot(r, r) start at different columns of line 8: the column tells them apart.
    assert "— solver.py:8:16  float(np.dot(r, r))" in text
    assert "— solver.py:8:22  np.dot(r, r)" in text
    located = [n.location for n in root.walk() if n.location is not None and n.location.code]
    assert {(loc.column, loc.code) for loc in located} >= {(16, "float(np.dot(r, r))"), (22, "np.dot(r, r)")}
    assert all(str(loc) == f"{loc.file}:{loc.line}" for loc in located)
    assert all(loc.position == f"{loc.file}:{loc.line}:{loc.column}" for loc in located)
    # The finding itself is located by file and line: its whole line, no column.
    assert text.splitlines()[0].rsplit("  #", 1)[0].endswith("— solver.py:8  loss = float(np.dot(r, r))")


def test_innermost_loop_names_the_loop_by_its_header(solver: Assessment) -> None:
    root = _prove(solver, "solver.py", LOSS_LINE)
    lines = render_text(root).splitlines()
    (loop_line,) = [line for line in lines if line.lstrip().startswith("innermost_loop(")]
    assert loop_line.rsplit("  #", 1)[0].endswith("; l → solver.py:6  for i in range(iters):")
    assert "float(np.dot(r, r))" in loop_line

    (loop,) = [n for n in root.walk() if n.relation == "innermost_loop"]
    data = json.loads(json.dumps(proof_to_json(loop)))
    assert [entry["name"] for entry in data["locations"]] == ["n", "l"]
    header = data["locations"][1]["location"]
    assert (header["file"], header["line"], header["column"], header["code"]) == (
        "solver.py",
        6,
        5,
        "for i in range(iters):",
    )
    assert data["location"]["code"] == "float(np.dot(r, r))" and data["location"]["column"] == 16


def test_a_file_edited_after_the_assessment_shows_no_stale_code(solver: Assessment) -> None:
    (solver.root / "solver.py").write_text(SOLVER.replace("loss = float(np.dot(r, r))", "pass"))
    root = _prove(solver, "solver.py", LOSS_LINE)
    located = [n.location for n in root.walk() if n.location is not None]
    assert located and all(loc.code == "" and loc.column is None and loc.source == "" for loc in located)
    text = render_text(root)
    assert "np.dot" not in text.replace('"numpy.dot"', "") and "for i in range" not in text
    assert "— solver.py:8" in text  # still located, by line


def test_a_notebook_proof_shows_cells_and_lines(tmp_path: Path) -> None:
    root = tmp_path / "nb"
    root.mkdir()
    _notebook(root / "analysis.ipynb", NOTEBOOK_CELLS)
    nb = notebook_to_source((root / "analysis.ipynb").read_bytes())
    item_line = nb.line_map.index((3, 5)) + 1  # total.append(v.sum().item()), in the joined module

    why = runner.invoke(
        app, ["why", "R104", "analysis.ipynb:cell 3:line 5", str(root), "--no-cache", "--full"]
    )
    assert why.exit_code == 0, why.output
    assert why.stdout.startswith("R104 at analysis.ipynb:cell 3:line 5: host materialization")
    assert "analysis.ipynb:cell 3:line 5  v.sum().item()  — converts an array" in why.stdout
    assert 'finding("R104", "analysis.ipynb"' in why.stdout
    assert "— analysis.ipynb:cell 3:line 5  total.append(v.sum().item())" in why.stdout
    # Column 18: the proof locates another node on that line too (the statement, column 5).
    loop = "— analysis.ipynb:cell 3:line 5:18  v.sum().item(); l → analysis.ipynb:cell 3:line 3  for i in"
    assert loop in why.stdout
    assert f"analysis.ipynb:{item_line} " not in why.stdout  # never the joined module's line

    data = json.loads(
        runner.invoke(
            app, ["why", "R104", "analysis.ipynb:cell 3:line 5", str(root), "--no-cache", "-f", "json"]
        ).stdout
    )
    location = data["proofs"][0]["children"][0]["location"]
    assert (location["cell"], location["cell_line"], location["code"]) == (3, 5, "v.sum().item()")
