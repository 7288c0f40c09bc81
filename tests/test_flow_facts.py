"""Extractor facts for the value analysis: which bindings reach a read (flow-sensitive, per
scope, through branches and loops), free variables of nested functions, parameters as
bindings, and the branch each statement sits under."""

from __future__ import annotations

import textwrap

from cpq.facts import FileFacts, SourceText, extract_source

Rows = dict[str, list[tuple]]


def facts(code: str) -> Rows:
    result = extract_source(SourceText("m.py", textwrap.dedent(code)))
    assert isinstance(result, FileFacts), result
    return result.rows


def line(rows: Rows, n: int) -> int:
    return {node: ln for node, _kind, _scope, ln, _stmt in rows["node"]}[n]


def reaching_lines(rows: Rows, name: str) -> dict[int, set[int]]:
    """For each read of `name` (by its line): the lines of the bindings that reach it."""
    loads = {e for e, n in rows["name_load"] if n == name}
    out: dict[int, set[int]] = {}
    for e in loads:
        out.setdefault(line(rows, e), set())
    for e, d in rows.get("reaching", []):
        if e in loads:
            out[line(rows, e)].add(line(rows, d))
    return out


def test_a_rebinding_hides_the_earlier_binding() -> None:
    rows = facts("""\
        xs = [1, 2]
        print(xs)
        xs = make()
        print(xs)
    """)
    assert reaching_lines(rows, "xs") == {2: {1}, 4: {3}}


def test_both_branches_reach_after_an_if() -> None:
    rows = facts("""\
        if c:
            v = 1
        else:
            v = 2
        print(v)
    """)
    assert reaching_lines(rows, "v") == {5: {2, 4}}


def test_a_branch_that_returns_does_not_reach() -> None:
    rows = facts("""\
        def f(c):
            v = 1
            if c:
                v = 2
                return v
            return v
    """)
    assert reaching_lines(rows, "v") == {5: {4}, 6: {2}}


def test_a_loop_body_sees_its_own_later_binding() -> None:
    rows = facts("""\
        t = 0.0
        while t < 1.0:
            t = t + 0.1
        print(t)
    """)
    assert reaching_lines(rows, "t") == {2: {1, 3}, 3: {1, 3}, 4: {1, 3}}


def test_an_augmented_assignment_reads_the_previous_binding() -> None:
    rows = facts("""\
        total = 0
        total += 1
        print(total)
    """)
    loads = reaching_lines(rows, "total")
    assert loads[3] == {2}
    # The target of `total += 1` is itself a read of the binding before it.
    stores = {d: line(rows, d) for d, n in rows["name_store"] if n == "total"}
    aug = next(d for d, ln in stores.items() if ln == 2)
    assert {line(rows, d) for e, d in rows["reaching"] if e == aug} == {1}


def test_a_read_in_a_nested_function_is_a_free_reference_to_the_outer_scope() -> None:
    rows = facts("""\
        def outer(n):
            a = make(n)

            def inner():
                return a

            return inner
    """)
    scopes = {s: q for s, _kind, q, _f, _l, _e in rows["scope"]}
    frees = [(line(rows, e), scopes[s]) for e, s in rows["free_ref"]]
    assert frees == [(5, "outer")]
    # A free reference has no reaching binding in its own scope.
    a_loads = {e for e, n in rows["name_load"] if n == "a"}
    assert not [e for e, _d in rows.get("reaching", []) if e in a_loads]


def test_parameters_are_bindings_that_reach_reads() -> None:
    rows = facts("""\
        def f(u, k=2):
            return u * k
    """)
    params = {p: i for p, _f, i in rows["param_def"]}
    assert sorted(params.values()) == [0, 1]
    u_load = next(e for e, n in rows["name_load"] if n == "u")
    assert [d for e, d in rows["reaching"] if e == u_load] == [next(p for p, i in params.items() if i == 0)]


def test_statements_under_an_if_name_their_branch() -> None:
    rows = facts("""\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            import mpi4py
        else:
            x = 1
    """)
    under = {(line(rows, s), branch) for s, _if, branch in rows["under_if"]}
    assert (3, 0) in under
    assert (5, -1) in under  # branches: 0 the body, 1, 2, ... the elifs, -1 the else


def test_a_comprehension_in_the_value_keeps_the_binding() -> None:
    rows = facts("""\
        def f(p):
            s = g([i for i in p])[0]
            t = {k: v for k, v in p}
            return s, t
    """)
    assert reaching_lines(rows, "s") == {4: {2}}
    assert reaching_lines(rows, "t") == {4: {3}}


def test_a_name_bound_deep_inside_an_expression_is_the_scopes_own() -> None:
    # A walrus and a comprehension's variable, lines below where their expression starts: each
    # is a binding of f's, so its read is not a reference to the module's name.
    rows = facts("""\
        y = n = 0
        def f(p):
            print(
                len(p),
                g(y := 2),
            )
            q = h(
                [n for n in p],
            )
            return y, n
    """)
    assert reaching_lines(rows, "y") == {10: {5}}
    assert reaching_lines(rows, "n") == {8: {8}, 10: set()}  # the variable does not outlive it
    assert not rows.get("free_ref")


def test_an_expression_with_no_binding_in_it_binds_nothing() -> None:
    rows = facts("""\
        a = 1
        def f(p):
            print(p, a, [1, 2], {"k": p})
            return a
    """)
    scopes = {s: q for s, _kind, q, _f, _l, _e in rows["scope"]}
    frees = sorted((line(rows, e), scopes[s]) for e, s in rows["free_ref"])
    assert frees == [(3, "<module>"), (4, "<module>")]
