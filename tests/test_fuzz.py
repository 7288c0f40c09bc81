"""Property-based robustness: whatever bytes or Python-like text a file holds, reading and
extracting it never raises, the facts it yields are well formed, and a whole assessment
accounts for every file.

Bounded and reproducible for CI: `derandomize=True`, no deadline, a fixed number of examples
(300 in all across the per-file tests, 20 whole assessments).
"""

from __future__ import annotations

import codecs
import gc
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpq.facts import INPUT_RELATIONS, NO_NODE, FileFacts, Skipped, SourceText, extract_source, read_source
from cpq.facts.packing import unpack_facts
from cpq.facts.parallel import _extract_packed
from cpq.pipeline.assessment import assess

FUZZ = settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@pytest.fixture(scope="module")
def scratch() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="cpq-fuzz-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# -- strategies --------------------------------------------------------------------------------

# Byte fragments that steer random bytes towards the decoder's and parser's edge cases.
_BYTE_PIECES = [
    codecs.BOM_UTF8,
    b"# -*- coding: latin-1 -*-\n",
    b"# coding: utf-8\n",
    b"# coding: klingon\n",
    b"# vim: set fileencoding=cp1252 :\n",
    b"# coding: unicode_escape\n",
    b"# coding: utf-16\n",
    b"\\ud800",
    b"\\x00",
    b"\x00",
    b"\r\n",
    b"\r",
    b"\n",
    b"\t",
    b"\x0c",
    b"\xff\xfe",
    b"\xc3\xa9",  # é in UTF-8
    b"\xe9",  # é in latin-1, invalid UTF-8
    b"\xed\xa0\x80",  # an encoded surrogate, invalid UTF-8
    b"\xe2\x80\xa8",  # U+2028 LINE SEPARATOR
    b"import numpy as np\n",
    b"x = np.zeros(10)\n",
    b"for i in range(n):\n    x[i] = np.sum(x)\n",
    b"def f(a):\n",
    b"    return a\n",
    b'"""',
    b"'",
    b"(",
    b")",
    b"[",
    b"]",
    b"{",
    b"}",
    b"\\\n",
]

random_bytes = st.one_of(
    st.binary(max_size=600),
    st.lists(st.one_of(st.sampled_from(_BYTE_PIECES), st.binary(max_size=8)), max_size=40).map(b"".join),
)

_IDENTIFIERS = ["x", "y", "a", "b", "i", "n", "self", "np", "numpy", "cp", "café", "_", "__init__"]
_CALLS = [
    "np.sum(",
    "np.zeros(",
    "np.array(",
    "numpy.linalg.solve(",
    "np.random.rand(",
    "range(",
    "len(",
    "print(",
    ".item()",
    ".tolist()",
    ".sum(",
    ".reshape(",
    "np.ndarray",
    "np.newaxis",
]
_KEYWORDS = """
    for in while if elif else def class return lambda import from as with try except except*
    finally raise yield async await match case type global nonlocal del pass break continue
    assert not and or is None True False print exec
""".split()
_OPERATORS = """
    + - * / // % ** @ = += -= *= @= == != < > <= >= ~ & | ^ << >> := -> , : . ; ... ` <> $ ? !
""".split()
_BRACKETS = ["(", ")", "[", "]", "{", "}"]
_LITERALS = [
    "0",
    "1",
    "3.5",
    "1e9",
    "0x1F",
    "1_000",
    "2j",
    "0777",
    "10L",
    "-1",
    "9" * 40,
    '"s"',
    "'a'",
    'f"{x}"',
    "f'{x!r:>{n}}'",
    'b"\\x00"',
    'r"\\d"',
    '"""doc"""',
    '"unterminated',
    "u'x'",
    "'\\N{BULLET}'",
]
_TRIVIA = ["#comment", "# cpq: ignore[R104]", "\\", "\t", "    "]
_TOKENS = _IDENTIFIERS + _CALLS + _KEYWORDS + _OPERATORS + _BRACKETS + _LITERALS + _TRIVIA

# Whole lines that parse, so that many generated files are (nearly) valid Python and reach
# the deep parts of the extractor: loops, calls, subscripts, slices, functions, classes.
_SNIPPETS = [
    "import numpy as np",
    "import numpy",
    "from numpy import sum, zeros as z",
    "from . import sibling",
    "x = np.zeros((n, n))",
    "for i in range(n):",
    "while i < n:",
    "if x.any():",
    "else:",
    "def f(a, b=np.ones(3), *args, c: np.ndarray = None, **kw):",
    "class K(Base):",
    "with open(p) as fh:",
    "try:",
    "except ValueError as e:",
    "return np.sum(a[i:j, ::2])",
    "x[i] = x[i - 1] + np.dot(a, b)",
    "x[..., None] += y.item()",
    "y = [v * 2 for v in x if v > 0]",
    "z = {k: v for k, v in enumerate(x)}",
    "a, (b, *c) = x",
    "total += float(x[i])",
    "s = f'{x[i]:.3f} {np.mean(x)!r}'",
    "lambda q: np.cumsum(q)",
    "yield from g(x)",
    "@np.vectorize",
    "match x:",
    "case [1, *rest]:",
    "case {'k': v}:",
    "type Alias = list[int]",
    "def g[T](v: T) -> T:",
    "pass",
]


@st.composite
def python_like(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 14))):
        depth = draw(st.integers(0, 4))
        indent = draw(st.sampled_from(["    ", "\t", "  ", " \t"])) * depth
        if draw(st.booleans()):
            body = draw(st.sampled_from(_SNIPPETS))
        else:
            tokens = draw(st.lists(st.sampled_from(_TOKENS), max_size=12))
            sep = draw(st.sampled_from([" ", ""]))
            body = sep.join(tokens)
        lines.append(indent + body)
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join(lines)
    if draw(st.booleans()):
        text += newline
    return text


# -- invariants --------------------------------------------------------------------------------


def check_facts(result: FileFacts, relpath: str) -> None:
    """The rows match the schema, and every node id refers to an emitted node or scope."""
    rows = result.rows
    assert set(rows) <= set(INPUT_RELATIONS), set(rows) - set(INPUT_RELATIONS)
    assert rows.get("source_file"), "every extracted file has its source_file fact"
    assert [r[0] for r in rows["source_file"]] == [relpath]
    nodes = {r[0] for r in rows.get("node", [])}
    scopes = {r[0] for r in rows.get("scope", [])}
    assert 0 in scopes, "the module scope"
    known = nodes | scopes
    for name, relation_rows in rows.items():
        columns = INPUT_RELATIONS[name]
        for row in relation_rows:
            assert len(row) == len(columns), (name, row)
            for col, value in zip(columns, row, strict=True):
                if col.is_node:
                    assert isinstance(value, int), (name, col.name, row)
                    if value == NO_NODE:
                        continue
                    assert 0 <= value < result.node_count, (name, col.name, row, result.node_count)
                    assert value in known, f"{name}.{col.name} = {value} is no emitted node: {row}"
                elif col.type == "symbol":
                    assert isinstance(value, str), (name, col.name, row)
                else:
                    assert isinstance(value, int), (name, col.name, row)
    for _n, _kind, scope, line, _stmt in rows.get("node", []):
        assert scope in scopes, f"node scope {scope} is no scope"
        assert 1 <= line <= max(result.lines, 1) + 1, (line, result.lines)
    for s, parent in rows.get("scope_parent", []):
        assert s in scopes and parent in scopes, (s, parent)


def check_extraction(source: SourceText) -> None:
    result = extract_source(source)
    assert isinstance(result, FileFacts | Skipped), type(result)
    if isinstance(result, Skipped):
        assert result.relpath == source.relpath and result.reason.strip()
    else:
        check_facts(result, source.relpath)
    # The worker path (both depths) packs the same way the cache stores it, and leaves the
    # cycle collector as it found it (it is off while a file is extracted).
    assert gc.isenabled()
    for deep in (True, False):
        relpath, packed = _extract_packed((source.relpath, source.text, deep))
        assert gc.isenabled()
        assert relpath == source.relpath
        if isinstance(packed, bytes):
            columns, node_count, lines = unpack_facts(packed)
            assert node_count >= 0 and lines >= 0
            assert set(columns) <= set(INPUT_RELATIONS)
        else:
            assert isinstance(packed, str) and packed.strip()
            assert "extractor failure" not in packed, packed


# -- (a) random bytes --------------------------------------------------------------------------


@settings(FUZZ, max_examples=130)
@given(data=random_bytes)
def test_random_bytes_are_read_or_skipped_never_raise(scratch: Path, data: bytes) -> None:
    path = scratch / "x.py"
    path.write_bytes(data)
    source = read_source(path, "x.py")
    assert isinstance(source, SourceText | Skipped), type(source)
    if isinstance(source, Skipped):
        assert source.relpath == "x.py" and source.reason.strip()
        return
    assert "\r" not in source.text, "line endings are normalised"
    assert source.sha
    check_extraction(source)


# -- (b) Python-like text ----------------------------------------------------------------------


@settings(FUZZ, max_examples=140)
@given(text=python_like())
def test_python_like_text_extracts_into_well_formed_facts(text: str) -> None:
    source = SourceText("pkg/mod.py", text.replace("\r\n", "\n"), "0" * 64)
    check_extraction(source)


@settings(FUZZ, max_examples=30)
@given(text=python_like(), encoding=st.sampled_from(["utf-8", "utf-8-sig", "latin-1"]))
def test_python_like_text_on_disk_in_any_encoding(scratch: Path, text: str, encoding: str) -> None:
    cookie = "# -*- coding: latin-1 -*-\n" if encoding == "latin-1" else ""
    path = scratch / "enc.py"
    path.write_bytes((cookie + text).encode(encoding))
    source = read_source(path, "enc.py")
    assert isinstance(source, SourceText), source  # every generated text is valid in its encoding
    check_extraction(source)


# -- (c) whole assessments ---------------------------------------------------------------------

_NAMES = ["a.py", "b.py", "pkg/__init__.py", "pkg/m.py", "pkg/sub/deep.py", "n b.py", "é.py", "z.ipynb"]


@st.composite
def file_tree(draw) -> dict[str, bytes]:
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=5, unique=True))
    out = {}
    for name in names:
        if name.endswith(".ipynb"):
            out[name] = draw(st.sampled_from([b"{", b"[]", b'{"cells": []}', _notebook(draw(python_like()))]))
        elif draw(st.integers(0, 3)) == 0:
            out[name] = draw(random_bytes)
        else:
            out[name] = draw(python_like()).encode()
    return out


def _notebook(code: str) -> bytes:
    import json

    cell = {"cell_type": "code", "source": code, "metadata": {}, "outputs": [], "execution_count": None}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}).encode()


def _key(result) -> tuple:
    return (
        sorted(result.files),
        sorted((s.relpath, s.reason) for s in result.skipped),
        [(f.code, f.file, f.line, f.function, f.hot) for f in result.findings],
        result.verdict,
    )


@settings(FUZZ, max_examples=20)
@given(tree=file_tree(), cached=st.booleans())
def test_assess_accounts_for_every_file_of_a_fuzzed_tree(
    scratch: Path, tree: dict[str, bytes], cached: bool
) -> None:
    root = Path(tempfile.mkdtemp(dir=scratch))
    try:
        for name, data in tree.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        result = assess(root, use_cache=cached, cache_dir=scratch / "store" if cached else None)
        accounted = list(result.files) + [s.relpath for s in result.skipped]
        assert sorted(accounted) == sorted(tree), (accounted, sorted(tree))
        assert len(result.files) + len(result.skipped) == len(tree)
        assert all(s.reason.strip() for s in result.skipped)
        assert result.verdict
        if cached:  # the store (shared by all examples, so stale entries abound) changes nothing
            fresh = assess(root, use_cache=False)
            assert _key(result) == _key(fresh)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_extraction_leaves_the_cycle_collector_as_it_found_it() -> None:
    """The collector is off while a file is extracted: a caller that had it off keeps it off,
    and its youngest objects are not walked (for the `cpq` command, which turns it off for
    its life, they are all it made since it started); with the collector on, the cycles a
    file leaves are collected at the end."""
    text = "import numpy as np\nclass A:\n    def f(self):\n        return [np.ones(3) for _ in range(2)]\n"
    gc.disable()
    try:
        young = [[] for _ in range(1000)]  # made since the collector was turned off
        _extract_packed(("a.py", text, True))
        assert not gc.isenabled()
        assert gc.get_count()[0] >= len(young)  # not collected: a collection counts from 0
    finally:
        gc.enable()
    _extract_packed(("a.py", text, True))
    assert gc.isenabled()
    assert gc.get_count()[0] < 100  # the file's objects were collected, not left to pile up
