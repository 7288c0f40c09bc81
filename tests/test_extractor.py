"""Unit tests of the extractor (facts/): Python source -> rows of the input relations."""

from __future__ import annotations

import textwrap

import pytest
from ast_grep_py import SgRoot
from conftest import EXAMPLES

from cpq.facts import INPUT_RELATIONS, NO_NODE, FileFacts, Skipped, SourceText, extract_source
from cpq.facts.tree import _ANONYMOUS_KINDS, _NAMED_KINDS, parse

Rows = dict[str, list[tuple]]


def facts(code: str, relpath: str = "m.py") -> Rows:
    result = extract_source(SourceText(relpath, textwrap.dedent(code)))
    assert isinstance(result, FileFacts), result
    return result.rows


def rel(rows: Rows, name: str) -> list[tuple]:
    return list(rows.get(name, []))


def line_of(rows: Rows) -> dict[int, int]:
    return {n: line for n, _kind, _scope, line, _stmt in rel(rows, "node")}


def kind_of(rows: Rows) -> dict[int, str]:
    return {n: kind for n, kind, _scope, _line, _stmt in rel(rows, "node")}


def callees(rows: Rows) -> list[tuple[int, str]]:
    """(line, resolved callee) of every call, in source order."""
    lines = line_of(rows)
    return sorted((lines[c], callee) for c, _func, callee in rel(rows, "call"))


def callee_at(rows: Rows, line: int) -> list[str]:
    return [callee for ln, callee in callees(rows) if ln == line]


def store_of(rows: Rows, name: str) -> list[int]:
    return [e for e, n in rel(rows, "name_store") if n == name]


def ints(rows: Rows) -> dict[int, int]:
    return dict(rel(rows, "int_value"))


def value_of_assign_to(rows: Rows, name: str) -> int:
    [target] = store_of(rows, name)
    [value] = [v for _s, t, v, _op in rel(rows, "assign") if t == target]
    return value


# -- the rows match the schema --------------------------------------------------------------


def test_rows_match_the_schema() -> None:
    rows = facts(
        """
        import numpy as np

        def f(a: np.ndarray, n=3):
            for i in range(n):
                a[i:] += [x for x in a if x][0]
            while n > 0:
                n -= 1
            return f"{a}", "s"
        """
    )
    assert set(rows) <= set(INPUT_RELATIONS)
    for name, tuples in rows.items():
        columns = INPUT_RELATIONS[name]
        for row in tuples:
            assert len(row) == len(columns), (name, row)
            for value, column in zip(row, columns, strict=True):
                expected = int if column.type == "number" else str
                assert isinstance(value, expected), (name, row, column)


def test_node_ids_are_unique_and_every_id_column_names_a_node() -> None:
    rows = facts(
        """
        import numpy as np

        def f(a):
            b = a[1:-1, ::2]
            for i in range(len(a)):
                b += np.sum(a[i])
            return b
        """
    )
    ids = [n for n, *_ in rel(rows, "node")]
    assert len(ids) == len(set(ids))
    known = set(ids) | {s for s, *_ in rel(rows, "scope")}
    for name, tuples in rows.items():
        for row in tuples:
            for value, column in zip(row, INPUT_RELATIONS[name], strict=True):
                if column.is_node and value != NO_NODE:
                    assert value in known, (name, row, column.name)


# -- callee resolution ----------------------------------------------------------------------


def test_callee_through_import_alias() -> None:
    rows = facts(
        """
        import numpy as np
        import numpy
        np.zeros(3)
        numpy.ones(3)
        np.random.default_rng(0)
        """
    )
    assert callees(rows) == [
        (4, "numpy.zeros"),
        (5, "numpy.ones"),
        (6, "numpy.random.default_rng"),
    ]


def test_callee_through_from_import_with_and_without_alias() -> None:
    rows = facts(
        """
        from numpy import zeros as z
        from numpy import ones, sum as npsum
        z(3)
        ones(3)
        npsum(x)
        """
    )
    assert callees(rows) == [(4, "numpy.zeros"), (5, "numpy.ones"), (6, "numpy.sum")]


def test_callee_through_submodule_import() -> None:
    rows = facts(
        """
        import numpy.linalg as la
        import numpy.fft
        la.norm(x)
        numpy.fft.rfft(x)
        """
    )
    assert callees(rows) == [(4, "numpy.linalg.norm"), (5, "numpy.fft.rfft")]


def test_callee_through_module_alias_variable() -> None:
    rows = facts(
        """
        import numpy as np
        xp = np

        def f(n):
            return xp.zeros(n)
        """
    )
    assert callees(rows) == [(6, "numpy.zeros")]


def test_cupynumeric_alias_keeps_its_own_name() -> None:
    rows = facts(
        """
        import cupynumeric as np
        np.zeros(3)
        """
    )
    assert callees(rows) == [(3, "cupynumeric.zeros")]


def test_builtins_and_local_definitions() -> None:
    rows = facts(
        """
        def f(a):
            return len(a)

        def g(a):
            return f(a) + max(a, 1)
        """
    )
    assert callees(rows) == [(3, "builtins.len"), (6, "builtins.max"), (6, "m.f")]
    assert sorted(q for _f, _n, q in rel(rows, "function_def")) == ["m.f", "m.g"]


def test_self_method_resolves_to_the_class_method() -> None:
    rows = facts(
        """
        class C:
            def method(self):
                return 1

            def other(self):
                return self.method()
        """
    )
    assert callee_at(rows, 7) == ["m.C.method"]
    assert ("method", "m.C.method") in {(n, q) for _f, n, q in rel(rows, "function_def")}
    scopes = {q: k for _s, k, q, *_ in rel(rows, "scope")}
    assert scopes == {"<module>": "module", "C": "class", "C.method": "function", "C.other": "function"}


def test_method_call_on_a_value_records_the_receiver() -> None:
    rows = facts(
        """
        def f(a):
            return a.sum()
        """
    )
    [(call, receiver, method)] = rel(rows, "method_call")
    assert method == "sum"
    assert rel(rows, "name_load") == [(receiver, "a")]
    assert [callee for c, _f, callee in rel(rows, "call") if c == call] == [""]


def test_shadowed_module_name_is_not_guessed() -> None:
    rows = facts(
        """
        import numpy as np

        def f(np):
            return np.zeros(3)
        """
    )
    assert callee_at(rows, 5) == [""]


@pytest.mark.parametrize(
    "relpath, module",
    [("pkg/driver.py", "pkg.driver"), ("pkg/__init__.py", "pkg")],
)
def test_relative_imports_in_a_package(relpath: str, module: str) -> None:
    rows = facts(
        """
        from . import helpers
        from .kernels import step as st
        from ..util import tool
        from .sub.mod import g

        def run(u):
            helpers.measure(u)
            st(u)
            tool(u)
            g(u)
        """,
        relpath=relpath,
    )
    assert rel(rows, "source_file")[0][:2] == (relpath, module)
    assert callees(rows) == [
        (8, "pkg.helpers.measure"),
        (9, "pkg.kernels.step"),
        (10, "util.tool"),
        (11, "pkg.sub.mod.g"),
    ]
    modules = {m for _f, m, _line in rel(rows, "import_module")}
    assert {"pkg", "pkg.helpers", "pkg.kernels", "pkg.kernels.step"} <= modules


def test_qualified_ref_for_attribute_chains() -> None:
    rows = facts(
        """
        import numpy as np
        d = np.float64
        """
    )
    assert "numpy.float64" in {q for _e, q in rel(rows, "qualified_ref")}


def test_import_module_rows() -> None:
    rows = facts(
        """
        import numpy as np
        from scipy import linalg
        from mpi4py import MPI
        """
    )
    assert sorted(rel(rows, "import_module")) == [
        ("m.py", "mpi4py", 4),
        ("m.py", "mpi4py.MPI", 4),
        ("m.py", "numpy", 2),
        ("m.py", "scipy", 3),
        ("m.py", "scipy.linalg", 3),
    ]


# -- loops ----------------------------------------------------------------------------------

LOOPS = """
def f(a, n):
    for i in range(n):
        while i > 0:
            i -= 1
        ys = [x * 2 for x in a if x]
    total = sum(v for v in a)
    return ys, total
"""


def test_loop_kinds_iterables_and_targets() -> None:
    rows = facts(LOOPS)
    kinds = kind_of(rows)
    lines = line_of(rows)
    loops = {lines[lp]: (kind, it, tgt, end) for lp, kind, it, tgt, end in rel(rows, "loop")}
    assert sorted((ln, v[0]) for ln, v in loops.items()) == [
        (3, "for"),
        (4, "while"),
        (6, "comprehension"),
        (7, "comprehension"),
    ]
    kind, it, target, end = loops[3]
    assert kinds[it] == "call" and callee_at(rows, 3) == ["builtins.range"]
    assert (target, "i") in rel(rows, "name_store")
    assert end == 6
    _kind, test, target, _end = loops[4]
    assert target == NO_NODE
    assert kinds[test] == "comparison_operator"
    _kind, it, target, _end = loops[6]
    assert (it, "a") in rel(rows, "name_load")
    assert (target, "x") in rel(rows, "name_store")


def test_loop_nesting() -> None:
    rows = facts(LOOPS)
    lines = line_of(rows)
    by_line = {lines[lp]: lp for lp, *_ in rel(rows, "loop")}
    parents = {(lines[inner], lines[outer]) for inner, outer in rel(rows, "loop_parent")}
    assert parents == {(4, 3), (6, 3)}
    assert by_line[7] not in {inner for inner, _ in rel(rows, "loop_parent")}


def test_in_loop_is_the_nearest_loop_and_excludes_the_iterable() -> None:
    rows = facts(LOOPS)
    lines = line_of(rows)
    kinds = kind_of(rows)
    loops = {lines[lp]: (lp, it) for lp, _k, it, _t, _e in rel(rows, "loop")}
    in_loop = dict(rel(rows, "innermost_loop"))
    for_loop, range_call = loops[3]
    while_loop, _test = loops[4]
    comp, comp_iter = loops[6]
    # the while statement sits in the for loop, its body in the while loop
    assert in_loop[while_loop] == for_loop
    [aug] = [n for n, k in kinds.items() if k == "augassign"]
    assert in_loop[aug] == while_loop
    # the comprehension's element expression is in the comprehension loop
    [mult] = [e for e, op, *_ in rel(rows, "binop") if op == "*"]
    assert in_loop[mult] == comp
    # iterables are evaluated outside their loop
    assert range_call not in in_loop
    assert in_loop.get(comp_iter) == for_loop
    # statements after the loop are in no loop
    [ret] = [n for n, k in kinds.items() if k == "return"]
    assert ret not in in_loop


# -- subscripts and slices ------------------------------------------------------------------


def test_subscript_parts_and_slice_bounds() -> None:
    rows = facts(
        """
        def f(a, i, n):
            b = a[1:-1, ::2]
            c = a[i]
            d = a[:n:-1]
        """
    )
    iv = ints(rows)
    subs = {e: (obj, parts) for e, obj, parts in rel(rows, "subscript")}
    index = {(e, pos): ix for e, pos, ix in rel(rows, "subscript_index")}
    slices = {sl: (start, stop, step) for sl, start, stop, step in rel(rows, "slice")}

    b = value_of_assign_to(rows, "b")
    assert subs[b][1] == 2
    start, stop, step = slices[index[(b, 0)]]
    assert (iv[start], iv[stop], step) == (1, -1, NO_NODE)
    start, stop, step = slices[index[(b, 1)]]
    assert (start, stop, iv[step]) == (NO_NODE, NO_NODE, 2)

    c = value_of_assign_to(rows, "c")
    assert subs[c][1] == 1
    assert index[(c, 0)] not in slices
    assert (index[(c, 0)], "i") in rel(rows, "name_load")

    d = value_of_assign_to(rows, "d")
    start, stop, step = slices[index[(d, 0)]]
    assert start == NO_NODE
    assert (stop, "n") in rel(rows, "name_load")
    assert iv[step] == -1
    # -1 is a unary minus on the literal 1, folded to -1
    [(op, operand)] = [(op, o) for e, op, o in rel(rows, "unaryop") if e == step]
    assert (op, iv[operand]) == ("-", 1)


# -- assignments ----------------------------------------------------------------------------


def test_plain_augmented_and_tuple_assignments() -> None:
    rows = facts(
        """
        def f(a, b):
            x = a + b
            x += 3
            s, t = b, a
            a[0] -= 1
        """
    )
    assigns = {(line_of(rows)[s], op): (t, v) for s, t, v, op in rel(rows, "assign")}
    assert sorted(assigns) == [(3, "="), (4, "+="), (5, "="), (6, "-=")]
    t, v = assigns[(3, "=")]
    assert (t, "x") in rel(rows, "name_store")
    assert [op for e, op, *_ in rel(rows, "binop") if e == v] == ["+"]
    t, v = assigns[(4, "+=")]
    assert (t, "x") in rel(rows, "name_store") and ints(rows)[v] == 3
    t, v = assigns[(5, "=")]
    elems = {(tup, i): e for tup, i, e in rel(rows, "elem")}
    assert (elems[(t, 0)], "s") in rel(rows, "name_store")
    assert (elems[(t, 1)], "t") in rel(rows, "name_store")
    assert (elems[(v, 0)], "b") in rel(rows, "name_load")
    assert (elems[(v, 1)], "a") in rel(rows, "name_load")
    t, _v = assigns[(6, "-=")]
    assert t in {e for e, *_ in rel(rows, "subscript")}


def test_with_and_walrus_bind_names() -> None:
    rows = facts(
        """
        def f(path):
            with open(path) as fh:
                pass
            if (y := 5) > 3:
                return y
        """
    )
    ops = {op for _s, _t, _v, op in rel(rows, "assign")}
    assert ops == {"with", ":="}
    assert {n for _e, n in rel(rows, "name_store")} == {"fh", "y"}


def test_stmt_of_links_expressions_to_their_statement() -> None:
    rows = facts(
        """
        def f(a):
            y = a * 2
        """
    )
    [(stmt, _t, value, _op)] = rel(rows, "assign")
    stmt_of = {n: s for n, _kind, _scope, _line, s in rel(rows, "node")}
    assert stmt_of[value] == stmt
    # The statements themselves (the def, the assignment) and the parameter belong to none.
    [(function, *_)] = rel(rows, "function_def")
    assert stmt_of[stmt] == stmt_of[function] == -1
    assert all(s in (stmt, -1) for s in stmt_of.values())


# -- constants ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr, value",
    [
        ("1 << 26", 67108864),
        ("2 ** 10", 1024),
        ("4096 * 4096", 16777216),
        ("1_000_000", 1000000),
        ("0x10", 16),
        ("-1", -1),
        ("-(3 + 4)", -7),
        ("(1 << 20) // 4", 262144),
    ],
)
def test_int_value_folds_constant_expressions(expr: str, value: int) -> None:
    rows = facts(f"N = {expr}\n")
    assert ints(rows)[value_of_assign_to(rows, "N")] == value


def test_int_value_absent_for_non_constants() -> None:
    rows = facts("N = n * 2\nF = 1.5\n")
    iv = ints(rows)
    assert value_of_assign_to(rows, "N") not in iv
    assert value_of_assign_to(rows, "F") not in iv


def test_str_value_for_plain_strings() -> None:
    long = "a" * 200
    rows = facts(f's = "hello"\nd = "O"\nl = "{long}"\n')
    values = dict(rel(rows, "str_value"))
    assert values[value_of_assign_to(rows, "s")] == "hello"
    assert values[value_of_assign_to(rows, "d")] == "O"
    assert value_of_assign_to(rows, "l") not in values  # over 120 characters


def test_fstring_value_records_formatted_expressions() -> None:
    rows = facts(
        """
        def f(a, n):
            print(f"{a} and {n:.3f}")
        """
    )
    loads = dict(rel(rows, "name_load"))
    pairs = rel(rows, "fstring_value")
    assert sorted(loads[inner] for _e, inner in pairs) == ["a", "n"]
    assert len({e for e, _inner in pairs}) == 1
    assert dict(rel(rows, "str_value")) == {}


# -- functions and parameters ---------------------------------------------------------------


def test_params_with_resolved_annotations_and_defaults() -> None:
    rows = facts(
        """
        import numpy as np
        import numpy.typing as npt
        from numpy.typing import NDArray

        def f(a: np.ndarray, b: npt.NDArray[np.float64], c: NDArray, n: int = 4,
              *args, k=None, **kw):
            pass
        """
    )
    assert [(i, name, ann) for _f, i, name, ann in rel(rows, "param")] == [
        (0, "a", "numpy.ndarray"),
        (1, "b", "numpy.typing.NDArray"),
        (2, "c", "numpy.typing.NDArray"),
        (3, "n", "builtins.int"),
        (4, "args", "*"),
        (5, "k", ""),
        (6, "kw", "**"),
    ]
    defaults = {name: e for _f, name, e in rel(rows, "param_default")}
    assert sorted(defaults) == ["k", "n"]
    assert ints(rows)[defaults["n"]] == 4


def test_decorators_are_recorded() -> None:
    rows = facts(
        """
        import numpy as np

        @np.vectorize
        def f(v):
            return v
        """
    )
    [(fn, e)] = rel(rows, "decorator")
    assert (e, "numpy.vectorize") in rel(rows, "qualified_ref")
    assert (fn, "f", "m.f") in rel(rows, "function_def")


def test_scope_nesting() -> None:
    rows = facts(
        """
        class C:
            def m(self):
                def inner():
                    return 1
                return inner()
        """
    )
    names = {s: q for s, _k, q, *_ in rel(rows, "scope")}
    parents = {(names[s], names[p]) for s, p in rel(rows, "scope_parent")}
    assert parents == {("C", "<module>"), ("C.m", "C"), ("C.m.inner", "C.m")}


# -- control flow ---------------------------------------------------------------------------


def test_branch_test_kinds() -> None:
    rows = facts(
        """
        def f(n, a):
            if n > 2:
                pass
            elif n:
                pass
            x = 1 if n else 2
            assert n
            while n:
                n -= 1
            return [v for v in a if v]
        """
    )
    lines = line_of(rows)
    kinds = kind_of(rows)
    tests = sorted((lines[s], kind) for s, _e, kind in rel(rows, "branch_test"))
    assert tests == [
        (3, "if"),
        (5, "elif"),
        (7, "ifexp"),
        (8, "assert"),
        (9, "while"),
        (11, "comp_if"),
    ]
    [if_test] = [e for _s, e, k in rel(rows, "branch_test") if k == "if"]
    assert kinds[if_test] == "comparison_operator"
    assert rel(rows, "compare")[0][0] == if_test


def test_return_value() -> None:
    rows = facts(
        """
        def f(a):
            return a
        """
    )
    [(stmt, e)] = rel(rows, "return_value")
    assert kind_of(rows)[stmt] == "return"
    assert (e, "a") in rel(rows, "name_load")


# -- files that cannot be parsed, and newer syntax ------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ('print "hello"\n', "Python 2"),
        ("def f(:\n    pass\n", "SyntaxError"),
        ("x = = 1\n", "SyntaxError"),
        ("exec 'x = 1'\n", "Python 2"),
        ("def f[T = float](x: T) -> T: ...\n", "Python 3.13 syntax the parser does not know"),
    ],
    ids=["py2-print", "bad-def", "double-equals", "py2-exec", "pep696-only"],
)
def test_syntax_errors_are_skipped(code: str, reason: str) -> None:
    result = extract_source(SourceText("old.py", code))
    assert isinstance(result, Skipped)
    assert result.relpath == "old.py"
    assert result.reason.startswith(reason)


def test_newer_syntax_is_extracted() -> None:
    rows = facts(
        """
        type Vector = list[float]


        def first[T](x: T) -> T:
            match x:
                case [a, b]:
                    y = a + b
                case {"k": v}:
                    y = v
                case _:
                    y = 0
            return y


        class Box[T]:
            def get(self) -> T:
                return self.v
        """
    )
    functions = {q for _f, _n, q in rel(rows, "function_def")}
    assert functions == {"m.first", "m.Box.get"}
    assert [(i, name, ann) for _f, i, name, ann in rel(rows, "param") if name == "x"] == [(0, "x", "T")]
    assert "type_alias" in set(kind_of(rows).values())
    assert "match" in set(kind_of(rows).values())
    # assignments inside the case bodies are extracted, in the function's scope
    lines = line_of(rows)
    assert sorted(lines[s] for s, _t, _v, _op in rel(rows, "assign")) == [8, 10, 12]
    assert len(store_of(rows, "y")) == 3


def test_source_file_row() -> None:
    rows = facts("x = 1\ny = 2\n", relpath="sub/mod.py")
    assert rel(rows, "source_file") == [("sub/mod.py", "sub.mod", 2)]
    assert rel(rows, "scope")[0] == (0, "module", "<module>", "sub/mod.py", 1, 2)


# -- reading the parser's tree ---------------------------------------------------------------

_SYNTAX_TOUR = """
from __future__ import annotations
import numpy as np
type Grid = list[float]
async def step(u, *args, k: int = 1, **kw) -> None:
    await u.flush()
    total = [x async for x in u if x is not None and x not in ()]
    yield lambda v, /, w=2: v @ w
    print >> f, "old"
    match u:
        case [a, *rest] | {"k": a, **kw}:
            pass
        case np.ndarray(shape=(n, _)) if n > 1:
            del a
        case _:
            raise ValueError(f"{u!r:>10}")
    try:
        x: np.ndarray = np.zeros(3) ** 2 // 1 << 1 >> 1 | 2 & 3 ^ ~4
    except* (TypeError, KeyError) as e:
        global g; nonlocal h
    finally:
        assert not x, "no"
    with open(p) as f, (yield): ...
    while (y := x[1:-1, ::2]) <> 0: continue
"""


def _tour_and_examples() -> list[str]:
    """The syntax tour, and each example intact and damaged three ways."""
    sources = [_SYNTAX_TOUR]
    for path in sorted(EXAMPLES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        third = len(text) // 3
        damaged = [text[:third] + "\n(", text[:third] + " = = \n" + text[third:], text.replace("):", ")", 3)]
        sources += [text, *damaged]
    return sources


def test_a_nodes_namedness_read_from_its_kind_is_the_parsers_own() -> None:
    """Converting the parser's tree reads whether a node is named from its kind where the
    grammar gives that kind to one sort only (facts.tree): on every node of these sources,
    intact and damaged, the kind's answer is the parser's."""
    disagreements: set[tuple[str, bool]] = set()
    for source in _tour_and_examples():
        stack = [SgRoot(source, "python").root()]
        while stack:
            node = stack.pop()
            kind = node.kind()
            named = node.is_named()
            if (kind in _ANONYMOUS_KINDS and named) or (kind in _NAMED_KINDS and not named):
                disagreements.add((kind, named))
            stack.extend(node.children())
    assert not disagreements


def test_every_converted_node_lists_its_named_children_as_it_would_compute_them() -> None:
    """The converter makes most nodes without PNode's __init__ and hands each its named
    children as it goes (leaves share one empty sequence): on every node of these sources,
    intact and damaged, they are the children that are named and not comments."""
    wrong: list[tuple[str, int]] = []
    for source in _tour_and_examples():
        stack = [parse(source).root]
        while stack:
            node = stack.pop()
            expected = [c for c in node.children if c.named and c.kind != "comment"]
            if list(node.named_children()) != expected:
                wrong.append((node.kind, node.line))
            stack.extend(node.children)
    assert not wrong
