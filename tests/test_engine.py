"""Tests of cpq.engine: parsing, checks, evaluation semantics, `_iter` bookkeeping, queries."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpq.engine import Database, DatalogError, Program, list_params, parse_program
from cpq.engine.syntax import Atom

GRAPH = """
.decl edge(x: symbol, y: symbol)
.input edge
.decl path(x: symbol, y: symbol)
.output path
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
"""


def run(text: str, **inputs: list[tuple]) -> Database:
    db = Database(parse_program(text, source="test.dl"))
    for name, rows in inputs.items():
        db.load(name, rows)
    db.evaluate()
    return db


def error_of(text: str) -> DatalogError:
    with pytest.raises(DatalogError) as info:
        parse_program(text, source="rules.dl")
    return info.value


def iters(db: Database, relation: str) -> dict[tuple, int]:
    rel = db.program.relations[relation]
    cols = ", ".join(f'"{name}"' for name in rel.column_names)
    rows = db.con.execute(f'SELECT {cols}, "_iter" FROM "{relation}"').fetchall()
    return {tuple(row[:-1]): row[-1] for row in rows}


# -- recursion --------------------------------------------------------------------------------


def test_transitive_closure_chain() -> None:
    db = run(GRAPH, edge=[("a", "b"), ("b", "c"), ("c", "d")])
    assert db.rows("path") == [
        ("a", "b"),
        ("a", "c"),
        ("a", "d"),
        ("b", "c"),
        ("b", "d"),
        ("c", "d"),
    ]


def test_transitive_closure_cycle_terminates() -> None:
    db = run(GRAPH, edge=[("a", "b"), ("b", "c"), ("c", "a")])
    assert db.count("path") == 9
    assert ("a", "a") in db.rows("path")


def test_nonlinear_recursion() -> None:
    text = GRAPH.replace("path(X, Y), edge(Y, Z)", "path(X, Y), path(Y, Z)")
    db = run(text, edge=[(str(i), str(i + 1)) for i in range(20)])
    assert db.count("path") == 20 * 21 // 2


def test_mutual_recursion_even_odd() -> None:
    text = """
    .decl succ(a: number, b: number)
    .decl even(n: number)
    .decl odd(n: number)
    even(0).
    odd(N) :- even(M), succ(M, N).
    even(N) :- odd(M), succ(M, N).
    """
    db = run(text, succ=[(i, i + 1) for i in range(10)])
    assert db.rows("even") == [(0,), (2,), (4,), (6,), (8,), (10,)]
    assert db.rows("odd") == [(1,), (3,), (5,), (7,), (9,)]
    assert db.program.strata == [["even", "odd"]]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=25))
def test_transitive_closure_matches_python(edges: list[tuple[int, int]]) -> None:
    text = GRAPH.replace("symbol", "number")
    db = run(text, edge=edges)
    closure = set(edges)
    while True:
        extra = {(x, w) for (x, y) in closure for (z, w) in edges if y == z} - closure
        if not extra:
            break
        closure |= extra
    assert db.rows("path") == sorted(closure)


# -- `_iter` and `_rule` ------------------------------------------------------------------------


def test_iter_grows_with_derivation_length() -> None:
    db = run(GRAPH, edge=[("a", "b"), ("b", "c"), ("c", "d")])
    it = iters(db, "path")
    assert it[("a", "b")] == it[("b", "c")] == it[("c", "d")]
    assert it[("a", "b")] < it[("a", "c")] == it[("b", "d")] < it[("a", "d")]
    assert set(iters(db, "edge").values()) == {0}
    rules = dict(db.con.execute('SELECT x || y, "_rule" FROM path').fetchall())
    assert rules["ab"] == 0 and rules["ad"] == 1


def test_iter_is_global_across_strata() -> None:
    text = (
        GRAPH
        + """
    .decl reach_a(x: symbol)
    reach_a(X) :- path("a", X).
    """
    )
    db = run(text, edge=[("a", "b"), ("b", "c")])
    assert min(iters(db, "reach_a").values()) > max(iters(db, "path").values())


def test_every_derived_tuple_has_a_proof_from_earlier_rounds() -> None:
    text = GRAPH.replace("path(X, Y), edge(Y, Z)", "path(X, Y), path(Y, Z)")
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "f")]
    db = run(text, edge=edges)
    it = iters(db, "path")
    edge_set = set(edges)
    for (x, z), i in it.items():
        if (x, z) in edge_set and i == min(it.values()):
            continue
        witnesses = [y for (a, y), j in it.items() if a == x and j < i and (y, z) in it and it[(y, z)] < i]
        assert witnesses, (x, z)


def test_reevaluation_is_idempotent() -> None:
    db = run(GRAPH, edge=[("a", "b"), ("b", "c")])
    before = iters(db, "path")
    db.evaluate()
    assert iters(db, "path") == before
    db.load("edge", [("c", "d")])
    db.evaluate()
    assert db.count("path") == 6


# -- negation, aggregates, arithmetic, functors --------------------------------------------


def test_stratified_negation_unreachable() -> None:
    text = (
        GRAPH
        + """
    .decl node(x: symbol)
    node(X) :- edge(X, _) ; edge(_, X).
    .decl unreachable(x: symbol)
    unreachable(X) :- node(X), X != "a", !path("a", X).
    """
    )
    db = run(text, edge=[("a", "b"), ("b", "c"), ("x", "y")])
    assert db.rows("unreachable") == [("x",), ("y",)]
    assert db.program.strata.index(["path"]) < db.program.strata.index(["unreachable"])


def test_several_negations_of_a_rule_each_rule_a_tuple_out() -> None:
    """Negated atoms with constants, wildcards and computed arguments in one body (they are
    joined as anti joins): each takes out the solutions it matches, and only those; one whose
    argument cannot be computed (NULL) matches nothing, as when it was a NOT EXISTS."""
    text = """
    .decl e(x: number, s: symbol)
    .decl r(x: number, s: symbol)
    .decl q(y: number)
    .decl p(x: number)
    p(X) :- e(X, S), !r(X, S), !q(X), !r(_, "none"), !q(X + 10), !q(to_number(S)).
    .decl blocked(x: number)
    blocked(X) :- e(X, _), !r(_, "z").
    """
    e = [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "7"), (6, "f")]
    db = run(text, e=e, r=[(1, "a"), (2, "z")], q=[(3,), (14,), (7,)])
    # 1: r(1, "a"); 3: q(3); 4: q(14); 5: q(to_number("7")); 6's to_number("f") is NULL.
    assert db.rows("p") == [(2,), (6,)]
    assert db.rows("blocked") == []


AGG = """
.decl node(x: symbol)
.decl w(x: symbol, y: symbol, v: number)
.decl out_count(x: symbol, n: number)
out_count(X, N) :- node(X), N = count : { w(X, _, _) }.
.decl out_sum(x: symbol, s: number)
out_sum(X, S) :- node(X), S = sum V : { w(X, _, V) }.
.decl out_min(x: symbol, m: number)
out_min(X, M) :- node(X), M = min V : { w(X, _, V) }.
.decl out_max(x: symbol, m: number)
out_max(X, M) :- node(X), M = max V : { w(X, _, V) }.
.decl total(n: number)
total(N) :- N = count : w(_, _, _).
.decl heavy(x: symbol)
heavy(X) :- node(X), count : { w(X, _, V), V > 5 } >= 2.
"""


def test_aggregates() -> None:
    db = run(
        AGG,
        node=[("a",), ("b",), ("c",)],
        w=[("a", "b", 7), ("a", "c", 3), ("a", "a", 9), ("b", "c", 3)],
    )
    assert db.rows("out_count") == [("a", 3), ("b", 1), ("c", 0)]
    assert db.rows("out_sum") == [("a", 19), ("b", 3), ("c", 0)]
    assert db.rows("out_min") == [("a", 3), ("b", 3)]  # empty min: no tuple for c
    assert db.rows("out_max") == [("a", 9), ("b", 3)]
    assert db.rows("total") == [(4,)]
    assert db.rows("heavy") == [("a",)]


def test_arithmetic_and_comparisons() -> None:
    text = """
    .decl n(x: number)
    .decl r(a: number, b: number, c: number, d: number, e: number)
    r(X, Y, Z, W, V) :- n(X), X > 0, X <= 7, X != 3, Y = X * 2 + 1, Z = -7 / X, W = X % 3,
                         V = (X + 1) * (X - 1).
    .decl f(x: float)
    f(X / 2.0) :- n(X), X = 3.
    """
    db = run(text, n=[(i,) for i in range(-2, 10)])
    assert db.rows("r") == [
        (1, 3, -7, 1, 0),
        (2, 5, -3, 2, 3),
        (4, 9, -1, 1, 15),
        (5, 11, -1, 2, 24),
        (6, 13, -1, 0, 35),
        (7, 15, -1, 1, 48),
    ]
    assert db.rows("f") == [(1.5,)]


def test_functors_and_constraints() -> None:
    text = r"""
    .decl name(s: symbol)
    .decl info(s: symbol, c: symbol, l: number, sub: symbol, n: number, t: symbol, m: number)
    info(S, C, L, Sub, N, T, M) :- name(S), C = cat(S, "_", "x"), L = strlen(S),
        Sub = substr(S, 1, 2), N = to_number("42"), T = to_string(L), M = max(L, 4).
    .decl has_np(s: symbol)
    has_np(S) :- name(S), contains("np.", S).
    .decl no_np(s: symbol)
    no_np(S) :- name(S), !contains("np.", S).
    .decl numbered(s: symbol)
    numbered(S) :- name(S), match("[a-z.]+\\d+", S).
    """
    db = run(text, name=[("np.sum",), ("abc12",), ("np.x1",)])
    assert ("np.sum", "np.sum_x", 6, "p.", 42, "6", 6) in db.rows("info")
    assert ("abc12", "abc12_x", 5, "bc", 42, "5", 5) in db.rows("info")
    assert db.rows("has_np") == [("np.sum",), ("np.x1",)]
    assert db.rows("no_np") == [("abc12",)]
    assert db.rows("numbered") == [("abc12",), ("np.x1",)]


def test_facts_disjunction_multi_head_and_assignment() -> None:
    text = """
    // Soufflé-style declarations with a type alias and qualifiers
    .type Name <: symbol
    .decl base(x: Name, n: number) btree
    base("a", 1). base("b", 2). base("c", -3).
    .decl pos(x: Name)
    .decl neg(x: Name)
    .decl both(x: Name)
    pos(X), both(X) :- base(X, N), (N > 1 ; X = "a").
    neg(X) :- base(X, N), N < 0.
    .decl twice(x: Name, n: number)
    twice(X, M) :- base(X, N), M = N * 2, M > 0.
    """
    db = run(text)
    assert db.rows("base") == [("a", 1), ("b", 2), ("c", -3)]
    assert db.rows("pos") == [("a",), ("b",)] == db.rows("both")
    assert db.rows("neg") == [("c",)]
    assert db.rows("twice") == [("a", 2), ("b", 4)]
    assert len(db.program.rules) == 6  # 2 heads x 2 branches, neg, twice
    assert set(iters(db, "base").values()) == {0}


def test_sql_keyword_relation_and_column_names() -> None:
    text = """
    .decl call(order: symbol, select: number)
    .decl file(from: symbol)
    file(F) :- call(F, _).
    .decl loop(group: symbol)
    loop(G) :- file(G), !call(G, 2).
    """
    db = run(text, call=[("x", 1), ("y", 2)])
    assert db.rows("file") == [("x",), ("y",)]
    assert db.rows("loop") == [("x",)]


def test_comments_docs_and_io_parameters() -> None:
    text = """
    /* block
       comment */
    // Calls to NumPy functions.
    // One tuple per call site.
    .decl np_call(fn: symbol, line: number) // trailing
    .input np_call(IO=file, filename="np_call.facts")
    .decl used(fn: symbol)
    .output used, np_call
    used(F) :- np_call(F, _).
    """
    prog = parse_program(text)
    rel = prog.relations["np_call"]
    assert rel.doc == "Calls to NumPy functions.\nOne tuple per call site."
    assert rel.columns == [("fn", "symbol"), ("line", "number")]
    assert rel.is_input and rel.is_output and not prog.relations["used"].is_input
    assert prog.relations["used"].doc == ""
    assert prog.rules[0].text == "used(F) :- np_call(F, _)."
    assert prog.rules[0].line == 10


# -- loading -----------------------------------------------------------------------------------


def test_load_arrow_dedup_and_append(tmp_path) -> None:
    pa = pytest.importorskip("pyarrow")  # never needed: a caller's own tables
    prog = parse_program(GRAPH)
    with Database(prog, path=tmp_path / "db.duckdb") as db:
        table = pa.table({"src": ["a", "a", "b"], "dst": ["b", "b", "c"]})
        assert db.load("edge", table) == 2
        assert db.load("edge", [("b", "c"), ("c", "d")]) == 1
        assert db.count("edge") == 3
        db.evaluate()
        assert db.count("path") == 6
        with pytest.raises(ValueError):
            db.load("edge", [("a",)])
        with pytest.raises(KeyError):
            db.load("nope", [("a",)])


def test_loaded_facts_are_written_to_the_file_before_evaluation(tmp_path) -> None:
    """A database in a file writes its loaded facts out (the evaluation then scans whole,
    compressed row groups); one in memory has nothing to write, and says so."""
    with Database(parse_program(GRAPH)) as db:
        db.load("edge", [("a", "b")])
        assert db.write_to_file() is False
        db.evaluate()
        assert db.count("path") == 1
    path = tmp_path / "db.duckdb"
    with Database(parse_program(GRAPH), path=path) as db:
        db.load("edge", [("a", "b"), ("b", "c")])
        assert db.write_to_file() is True
        wal = path.with_name(path.name + ".wal")
        assert not wal.exists() or wal.stat().st_size == 0  # all of it is in the file now
        db.evaluate()
        assert sorted(db.rows("path")) == [("a", "b"), ("a", "c"), ("b", "c")]


def test_load_disjoint_appends_several_relations_in_one_call(tmp_path) -> None:
    pa = pytest.importorskip("pyarrow")
    text = GRAPH + ".decl label(n: symbol, weight: number)\n"
    with Database(parse_program(text), path=tmp_path / "db.duckdb") as db:
        added = db.load_disjoint(
            {
                "edge": pa.table({"a": ["a", "b"], "b": ["b", "c"]}),
                "label": pa.table({"n": ["a"], "w": pa.array([7], pa.int64())}),
                "path": pa.table({"a": pa.array([], pa.string()), "b": pa.array([], pa.string())}),
            }
        )
        assert added == 3
        assert db.rows("label") == [("a", 7)]
        assert db.con.execute('SELECT DISTINCT "_iter" FROM "edge"').fetchall() == [(0,)]
        db.evaluate()
        assert db.count("path") == 3
        with pytest.raises(ValueError):  # wrong width
            db.load_disjoint({"label": pa.table({"n": ["b"]})})
        with pytest.raises(ValueError):  # NULL
            db.load_disjoint({"label": pa.table({"n": [None], "w": [1]})})
        with pytest.raises(ValueError):  # not a number
            db.load_disjoint({"label": pa.table({"n": ["b"], "w": ["x"]})})
        assert db.rows("label") == [("a", 7)]  # nothing of a failed call went in
        assert not db.con.execute("SELECT * FROM duckdb_views() WHERE NOT internal").fetchall()


# -- queries -----------------------------------------------------------------------------------


def test_query() -> None:
    text = """
    .decl finding(code: symbol, file: symbol, line: number)
    .decl suppressed(code: symbol, file: symbol, line: number)
    """
    db = Database(parse_program(text))
    db.load("finding", [("R104", "a.py", 3), ("R104", "a.py", 9), ("R2", "b.py", 1)])
    db.load("suppressed", [("R104", "a.py", 9)])
    assert db.query('finding(C, F, L), C = "R104", !suppressed(C, F, L)') == (
        ["C", "F", "L"],
        [("R104", "a.py", 3)],
    )
    assert db.query('finding("R104", F, _).') == (["F"], [("a.py",)])
    assert db.query("finding(C, _, L), L > 2") == (["C", "L"], [("R104", 3), ("R104", 9)])
    assert db.query('finding("R2", "b.py", 1)') == ([], [()])
    assert db.query('finding("R2", "b.py", 2)') == ([], [])
    assert db.query("finding(C, _, 1) ; suppressed(C, _, 9)") == (["C"], [("R104",), ("R2",)])
    assert db.query("N = count : finding(_, _, _)") == (["N"], [(3,)])


def test_query_errors_point_into_the_query() -> None:
    db = Database(parse_program(GRAPH))
    with pytest.raises(DatalogError) as info:
        db.query("edge(X, Y), nope(X)")
    assert (info.value.line, info.value.column) == (1, 13)
    assert str(info.value).startswith("<query>:1:13:")
    with pytest.raises(DatalogError) as info:
        db.query("edge(X, Y), !edge(Y, Z)")
    assert info.value.column == 22
    with pytest.raises(DatalogError):
        db.query("edge(X Y)")


# -- errors ------------------------------------------------------------------------------------


def test_syntax_error_position() -> None:
    err = error_of(".decl e(x: number)\ne(X) :- e(X) e(X).\n")
    assert (err.line, err.column) == (2, 14)
    assert str(err).startswith("rules.dl:2:14: unexpected 'e'")


def test_unexpected_character_and_end_of_input() -> None:
    assert error_of(".decl e(x: number)\ne(X) :- e(X) @.\n").line == 2
    assert "end of input" in str(error_of(".decl e(x: number)\ne(X) :- e(X)"))


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (".decl e(x: number)\n\ne(X) :- e(X, X).", 3, "arity mismatch"),
        (".decl e(x: number)\ne(X) :- f(X).", 2, "undeclared relation 'f'"),
        (".decl e(x: number)\n.decl e(y: number)", 2, "already declared at line 1"),
        (".decl e(x: number)\n.decl p(x: number)\np(Y) :- e(X).", 3, "variable 'Y' in the head"),
        (".decl e(x: number)\n.decl p(x: number)\np(X) :-\n e(X), !e(Z).", 4, "negated atom"),
        (".decl e(x: number)\n.decl p(x: number)\np(X) :- e(X), Y > X.", 3, "'Y'"),
        (".decl e(x: number)\n.input e\ne(X) :- e(X).", 3, ".input relation"),
        (".decl e(x: symbol)\ne(X) :- e(X), X > 1.", 2, "cannot compare"),
        (".decl e(x: number)\n.output q", 2, "undeclared relation 'q'"),
    ],
)
def test_check_errors(text: str, line: int, fragment: str) -> None:
    err = error_of(text)
    assert err.line == line, str(err)
    assert fragment in str(err)
    assert str(err).startswith(f"rules.dl:{line}:")


def test_recursion_through_negation_names_cycle() -> None:
    err = error_of(
        ".decl e(x: number)\n.decl p(x: number)\n.decl q(x: number)\np(X) :- e(X), !q(X).\nq(X) :- p(X).\n"
    )
    assert err.line == 4
    assert "negation" in err.message and "p -> q -> p" in err.message


def test_recursion_through_aggregation_is_rejected() -> None:
    err = error_of(".decl p(x: number)\np(N) :- p(_), N = count : { p(_) }.")
    assert err.line == 2 and "aggregation" in err.message


def test_aggregate_correlation_must_be_bound_outside() -> None:
    err = error_of(".decl e(x: number)\n.decl c(x: number, n: number)\nc(X, N) :- N = count : { e(X) }.")
    assert err.line == 3 and "'X'" in err.message


# -- robustness and less common syntax ---------------------------------------------------------


def test_overflow_and_division_by_zero_do_not_abort() -> None:
    text = """
    .decl n(x: number)
    .decl sq(x: number, y: number)
    sq(X, Y) :- n(X), Y = X * X.
    .decl inv(x: number, y: number)
    inv(X, Y) :- n(X), Y = 10 / X.
    .decl neg_u(x: unsigned)
    neg_u(X) :- n(X).
    """
    db = run(text, n=[(0,), (-2,), (3037000500,)])
    assert db.rows("sq") == [(-2, 4), (0, 0)]  # 3037000500^2 overflows: no tuple
    assert db.rows("inv") == [(-2, -5), (3037000500, 0)]  # 10 / 0: no tuple
    assert db.rows("neg_u") == [(0,), (3037000500,)]  # -2 does not fit unsigned


def test_nullary_relations_and_bool_literals() -> None:
    text = """
    .decl e(x: number)
    .decl some()
    some() :- e(_).
    .decl none()
    none() :- !some().
    .decl always()
    always() :- true.
    .decl never()
    never() :- false.
    .decl tagged(x: number)
    tagged(X) :- e(X), some().
    """
    db = run(text, e=[(1,), (2,)])
    assert db.rows("some") == [()] and db.rows("always") == [()]
    assert db.rows("none") == [] and db.rows("never") == []
    assert db.rows("tagged") == [(1,), (2,)]


def test_numbers_strings_and_types() -> None:
    text = r"""
    .type Id <: number
    .type Label = symbol
    .decl v(i: Id, l: Label, u: unsigned, f: float)
    v(0x10, "a\"b\\c", 7u, 2.5).
    v(0b11, "tab\there", 1u, -0.5).
    """
    db = run(text)
    assert db.rows("v") == [(3, "tab\there", 1, -0.5), (16, 'a"b\\c', 7, 2.5)]
    assert db.program.types == {"Id": "number", "Label": "symbol"}


def test_program_facts_are_sets_whether_plain_or_computed() -> None:
    """Plain constants go in as one VALUES list, computed facts through casts: either way
    duplicates count once and a failed conversion makes no fact."""
    text = """
    .decl word(w: symbol, n: number)
    word("a", 1). word("a", 1). word("it's", 2).
    .decl weight(f: float)
    weight(0.0). weight(-0.0). weight(1.5).
    .decl computed(n: number)
    computed(to_number("42")). computed(42). computed(to_number("x")).
    """
    db = run(text)
    assert db.rows("word") == [("a", 1), ("it's", 2)]
    assert db.rows("weight") == [(0.0,), (1.5,)]
    assert db.rows("computed") == [(42,)]
    for name in ("word", "weight", "computed"):
        assert db.con.execute(f'SELECT DISTINCT "_iter", "_rule" FROM "{name}"').fetchall() == [(0, None)]


def test_rule_index_of_first_derivation() -> None:
    text = """
    .decl a(x: number)
    .decl b(x: number)
    b(X) :- a(X), X > 1.
    b(X) :- a(X).
    """
    db = run(text, a=[(1,), (2,)])
    rules = dict(db.con.execute('SELECT x, "_rule" FROM b').fetchall())
    assert rules == {1: 1, 2: 0}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(-5, 5)), max_size=12))
def test_aggregates_match_python(rows: list[tuple[str, int]]) -> None:
    text = """
    .decl g(k: symbol)
    .decl r(k: symbol, v: number)
    .decl agg(k: symbol, c: number, s: number)
    agg(K, C, S) :- g(K), C = count : { r(K, _) }, S = sum V : { r(K, V) }.
    .decl lo(k: symbol, m: number)
    lo(K, M) :- g(K), M = min V : { r(K, V) }.
    """
    db = run(text, g=[("a",), ("b",), ("c",)], r=rows)
    facts = set(rows)
    expected = []
    for key in "abc":
        values = [v for k, v in facts if k == key]
        expected.append((key, len(values), sum(values)))
    assert db.rows("agg") == expected
    assert db.rows("lo") == sorted(
        (key, min(v for k, v in facts if k == key)) for key in {k for k, _ in facts}
    )


@pytest.mark.parametrize(
    "rows",
    [
        [(True, "a", 1.0)],  # a bool is not a number
        [(1.5, "a", 1.0)],  # nor a float (Arrow alone would truncate it)
        [(1, 2, 1.0)],  # a number is not a symbol
        [(None, "a", 1.0)],
        [(1, None, 1.0)],
        [(1, "a", "x")],  # nor a symbol a float
        [(2**63, "a", 1.0)],  # beyond int64
        [(1, "a", 1.0), (1, "a")],  # ragged
    ],
)
def test_small_loads_reject_what_large_ones_reject(rows) -> None:
    """Few rows go to DuckDB as lists, many as a column batch: the same values are refused."""
    db = Database(parse_program(".decl n(x: number, s: symbol, f: float)"))
    with pytest.raises(ValueError):
        db.load("n", rows)
    with pytest.raises(ValueError):
        db.load("n", rows * 20_000)  # as a column batch
    assert db.count("n") == 0


def test_small_and_large_loads_store_the_same_tuples() -> None:
    """Lists (few values) and column batches (many) load the same values, duplicates dropped
    both ways."""
    text = ".decl n(x: number, u: unsigned, s: symbol, f: float)"
    rows = [(i - 50, i, f"s{i % 7}\u00e9\x00", i / 3) for i in range(100)] + [(2**63 - 1, 2**64 - 1, "", 1)]
    small, large = Database(parse_program(text)), Database(parse_program(text))
    assert list_params.LIST_BATCH_VALUES > 4 * len(rows * 2)
    assert small.load("n", rows * 2) == len(rows)
    assert large.load("n", rows * 100) == len(rows)
    assert small.load("n", rows[:3]) == 0  # already there: compared with the table
    assert small.rows("n") == large.rows("n") == sorted((x, u, s, float(f)) for x, u, s, f in rows)
    with pytest.raises(ValueError):
        small.load("n", [(1, -1, "a", 0.0)])  # not unsigned


def test_load_disjoint_takes_lists_and_tables_all_or_none(tmp_path) -> None:
    pa = pytest.importorskip("pyarrow")
    text = GRAPH + ".decl label(n: symbol, weight: number)\n"
    with Database(parse_program(text), path=tmp_path / "db.duckdb") as db:
        added = db.load_disjoint(
            {
                "edge": [["a", "b"], ["b", "c"]],
                "label": pa.table({"n": ["a"], "w": pa.array([7], pa.int64())}),
            }
        )
        assert added == 3
        assert db.rows("edge") == [("a", "b"), ("b", "c")]
        with pytest.raises(ValueError):  # the second batch is refused: the first is not kept
            db.load_disjoint({"edge": [["x"], ["y"]], "label": [["b"], ["not a number"]]})
        with pytest.raises(ValueError):  # a list batch of the wrong width
            db.load_disjoint({"label": [["b"]]})
        with pytest.raises(ValueError):  # columns of different lengths
            db.load_disjoint({"edge": [[], ["x"]]})
        assert db.rows("edge") == [("a", "b"), ("b", "c")]
        assert db.rows("label") == [("a", 7)]


def test_load_rejects_bad_values() -> None:
    db = Database(parse_program(".decl n(x: unsigned, s: symbol)"))
    with pytest.raises(ValueError):
        db.load("n", [(-1, "a")])
    with pytest.raises(ValueError):
        db.load("n", [(1, 2)])
    pa = pytest.importorskip("pyarrow")
    with pytest.raises(ValueError):
        db.load("n", pa.table({"x": ["nan"], "s": ["a"]}))
    assert db.load("n", pa.table({"x": [1, 1], "s": ["a", "a"]})) == 1


def test_runtime_failure_names_the_rule() -> None:
    text = '.decl s(x: symbol)\n.decl m(x: symbol)\nm(X) :- s(X), X = "a".\nm(X) :- s(X), match("(", X).\n'
    db = Database(parse_program(text, source="r.dl"))
    db.load("s", [("a",)])
    with pytest.raises(DatalogError) as info:
        db.evaluate()
    assert str(info.value).startswith("r.dl:4:1: evaluation of rule failed")


def test_decl_qualifiers_and_soft_keywords() -> None:
    text = """
    .decl a(x: number) input
    .decl output(x: number) brie
    output(X) :- a(X).
    .decl brie(x: number) output
    brie(X) :- output(X), X = min(X, 5), count : { a(_) } > 1.
    """
    prog = parse_program(text)
    assert prog.relations["a"].is_input and prog.relations["brie"].is_output
    assert prog.relations["output"].qualifiers == ("brie",)
    db = Database(prog)
    db.load("a", [(3,), (9,)])
    db.evaluate()
    assert db.rows("brie") == [(3,)]
    assert error_of(".decl e(x: number) eqrel").message.startswith("eqrel")


PARALLEL_STRATA = """
.decl edge(x: number, y: number)
.decl path(x: number, y: number)
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
.decl twice(x: number, y: number)
twice(X, Z) :- edge(X, Y), edge(Y, Z).
.decl big(x: number)
big(X) :- edge(X, _), X > 3.
.decl fan(x: number, n: number)
fan(X, N) :- edge(X, _), N = count : { edge(X, _) }.
.decl unreachable(x: number, y: number)
unreachable(X, Y) :- edge(X, _), edge(_, Y), !path(X, Y).
.decl summary(n: number)
summary(N) :- N = count : { unreachable(_, _) }, big(_), fan(_, _), twice(_, _).
.decl odd(x: number, y: number)
.decl even(x: number, y: number)
odd(X, Y) :- edge(X, Y).
even(X, Z) :- odd(X, Y), edge(Y, Z).
odd(X, Z) :- even(X, Y), edge(Y, Z).
"""


def _everything(db: Database) -> dict[str, list[tuple]]:
    out = {}
    for name in db.program.relations:
        out[name] = db.con.execute(f'SELECT * FROM "{name}" ORDER BY ALL').fetchall()
    return out


def test_strata_run_side_by_side_with_the_same_result_and_rounds() -> None:
    """Independent strata run on several connections at once; the tuples, the rounds (_iter)
    and the rules (_rule) are those of a one-at-a-time evaluation."""
    edges = [(i, (i * 7 + 3) % 40) for i in range(40)] + [(i, i + 1) for i in range(0, 39, 13)]
    results = []
    for concurrency in (1, 4):
        db = Database(parse_program(PARALLEL_STRATA, source="test.dl"))
        db.concurrency = concurrency
        db.load("edge", edges)
        stats = db.evaluate()
        results.append(_everything(db))
        for stratum in stats.strata:
            for name in stratum.relations:
                iters = [r[0] for r in db.con.execute(f'SELECT DISTINCT "_iter" FROM "{name}"').fetchall()]
                assert all(stratum.first_iter <= i <= stratum.last_iter for i in iters), name
        db.close()
    assert results[0] == results[1]
    assert results[0]["summary"] and results[0]["unreachable"]
    # odd and even are one recursive stratum: each round's two statements ran side by side.
    assert len({row[-2] for row in results[0]["even"]}) >= 3


def test_a_failing_statement_of_a_round_stops_the_evaluation() -> None:
    """The statements of one round run side by side: a failure in any of them is reported
    on its rule."""
    text = PARALLEL_STRATA + (
        ".decl ping(x: number)\n.decl pong(x: number)\n"
        "ping(X) :- edge(X, _).\npong(Y) :- ping(X), edge(X, Y).\n"
        'ping(Y) :- pong(X), edge(X, Y), match("(", "x").\n'
    )
    db = Database(parse_program(text, source="test.dl"))
    db.concurrency = 4
    db.load("edge", [(1, 2), (2, 3)])
    with pytest.raises(DatalogError) as info:
        db.evaluate()
    assert info.value.line == text.count("\n")
    db.close()


def test_a_failing_stratum_stops_a_concurrent_evaluation() -> None:
    text = PARALLEL_STRATA + '.decl bad(x: number)\nbad(X) :- edge(X, _), match("(", "x").\n'
    db = Database(parse_program(text, source="test.dl"))
    db.concurrency = 4
    db.load("edge", [(1, 2)])
    with pytest.raises(DatalogError) as info:
        db.evaluate()
    assert info.value.line == text.count("\n")  # the rule with the bad regular expression


def test_a_database_copied_from_a_template_evaluates_like_a_new_one(tmp_path) -> None:
    program = parse_program(
        ".decl edge(a: number, b: number)\n.input edge\n.decl path(a: number, b: number)\n"
        "path(A, B) :- edge(A, B).\npath(A, C) :- path(A, B), edge(B, C).\nedge(1, 2).\n"
    )
    template = tmp_path / "template.duckdb"
    with Database(program, template):
        pass
    shutil.copyfile(template, tmp_path / "copy.duckdb")
    with Database.from_template(program, tmp_path / "copy.duckdb") as db:
        db.load("edge", [(2, 3)])
        db.evaluate()
        assert db.rows("path") == [(1, 2), (1, 3), (2, 3)]
    other = parse_program(".decl other(a: number)\nother(1).\n")
    shutil.copyfile(template, tmp_path / "wrong.duckdb")
    with pytest.raises(ValueError):
        Database.from_template(other, tmp_path / "wrong.duckdb")


def test_evaluation_counts_are_exact_on_first_and_later_evaluations(tmp_path) -> None:
    """The first evaluation takes table sizes from DuckDB's catalog (no row deleted yet); a
    later one, after derived tuples were deleted, counts them."""
    program = parse_program(
        ".decl edge(a: number, b: number)\n.input edge\n.decl path(a: number, b: number)\n"
        "path(A, B) :- edge(A, B).\npath(A, C) :- path(A, B), edge(B, C).\n"
        ".decl lonely(a: number)\nlonely(A) :- edge(A, _), !path(_, A).\n"
    )
    for where in (None, tmp_path / "db.duckdb"):
        with Database(program, where) as db:
            db.load("edge", [(1, 2), (2, 3), (3, 4)])
            for _ in range(2):
                stats = db.evaluate()
                assert stats.counts == {name: db.count(name) for name in program.relations}
                assert stats.counts["path"] == 6 and stats.counts["lonely"] == 1


INLINE_PROGRAM = """
.decl edge(a: number, b: number)
.input edge
// Two steps, or one from node 7.
.decl hop(a: number, b: number) inline
hop(A, B) :- edge(A, X), edge(X, B).
hop(A, B) :- edge(A, B), A = 7.
.decl first(a: number, tag: symbol) inline
first(A, "start") :- edge(A, _), !edge(_, A).
.decl two(a: number, b: number)
two(A, B) :- hop(A, B), A != B.
.decl loops(a: number)
loops(A) :- hop(A, A).
.decl starts(a: number)
starts(A) :- first(A, "start").
.decl tagged(a: number, tag: symbol)
tagged(A, T) :- first(A, T).
"""


def _inline_free(text: str) -> str:
    """The same program with every `inline` relation stored."""
    return text.replace(") inline\n", ")\n")


def test_inline_relations_are_replaced_by_their_rules_and_give_the_same_results() -> None:
    edges = [(1, 2), (2, 3), (3, 1), (7, 8), (9, 1)]
    results = []
    for text in (INLINE_PROGRAM, _inline_free(INLINE_PROGRAM)):
        program = parse_program(text)
        with Database(program) as db:
            db.load("edge", edges)
            db.evaluate()
            results.append({name: db.rows(name) for name in ("two", "loops", "starts", "tagged")})
            assert db.query("hop(X, Y), X < 3") == (["X", "Y"], [(1, 3), (2, 1)])
            assert db.query('first(X, "start")') == (["X"], [(7,), (9,)])
    assert results[0] == results[1]
    assert results[0]["two"] == [(1, 3), (2, 1), (3, 2), (7, 8), (9, 2)]
    program = parse_program(INLINE_PROGRAM)
    assert not any(rule.head.relation in ("hop", "first") for rule in program.rules)
    assert not any(
        isinstance(lit, Atom) and lit.relation in ("hop", "first")
        for rule in program.rules
        for lit in rule.body
    )
    # hop has two rules: two(A, B) is two rules, each with the clause's text and line.
    two = program.rules_for("two")
    assert len(two) == 2 and {rule.line for rule in two} == {11}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            ".decl e(a: number)\n.decl i(a: number) inline\ni(A) :- e(A).\n.decl r(a: number)\n"
            "r(A) :- e(A), !i(A).\n",
            "cannot be negated",
        ),
        (
            ".decl e(a: number)\n.decl i(a: number) inline\ni(A) :- e(A).\n.decl r(n: number)\n"
            "r(N) :- N = count : { i(_) }.\n",
            "inside an aggregate",
        ),
        (".decl e(a: number)\n.decl i(a: number) inline\ni(A) :- e(A).\ni(A) :- i(A).\n", "is recursive"),
        (".decl i(a: number) inline\n.input i\n", "cannot be an .input"),
        (".decl i(a: number) inline\ni(1).\n", "cannot have facts"),
    ],
)
def test_inline_relations_outside_the_supported_subset_are_refused(text: str, message: str) -> None:
    with pytest.raises(DatalogError, match=message):
        parse_program(text)


def test_a_pickled_program_loads_back_equal() -> None:
    """The program cache pickles syntax nodes as constructor calls (see PickledByFields)."""
    import pickle

    from cpq.rules.program import rules_text

    program = parse_program(rules_text(), source="rules.dl")
    again = pickle.loads(pickle.dumps(program))
    assert again.rules == program.rules and again.plans == program.plans
    assert again.relations == program.relations and again.facts == program.facts
    assert again.stratification == program.stratification and again.inline == program.inline
    assert [rule.inlined for rule in again.rules] == [rule.inlined for rule in program.rules]


# -- inline relations: the same results as storing them, on random programs ------------------

_HEAD_TERMS = ["A", "B", "A", "1"]
_BODY_TERMS = ["A", "B", "C", "_", "2"]
_USE_TERMS = ["X", "Y", "_", "0", "X"]


def _inline_case(draw) -> tuple[str, list[tuple[int, int]]]:  # type: ignore[no-untyped-def]
    from hypothesis import strategies as st

    rules = []
    for _ in range(draw(st.integers(1, 2))):
        head = [draw(st.sampled_from(_HEAD_TERMS)) for _ in range(2)]
        body = [
            f"e({draw(st.sampled_from(_BODY_TERMS))}, {draw(st.sampled_from(_BODY_TERMS))})"
            for _ in range(draw(st.integers(1, 2)))
        ]
        body += [f"e({v}, _)" for v in sorted({t for t in head if t.isalpha()})]  # range-restricted
        if draw(st.booleans()):
            body.append("A != 3")  # A always occurs: the check may be vacuous but stays safe
            body.append("e(A, _)")
        rules.append(f"i({', '.join(head)}) :- {', '.join(body)}.")
    use = [draw(st.sampled_from(_USE_TERMS)) for _ in range(2)]
    text = (
        ".decl e(a: number, b: number)\n.input e\n.decl i(a: number, b: number) inline\n"
        + "\n".join(rules)
        + f"\n.decl r(x: number, y: number)\nr(X, Y) :- i({use[0]}, {use[1]}), e(X, Y).\n"
    )
    edges = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=8))
    return text, edges


def test_inline_expansion_matches_storing_the_relation_on_random_programs() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.composite(_inline_case)())
    def check(case: tuple[str, list[tuple[int, int]]]) -> None:
        text, edges = case
        results = []
        for program_text in (text, _inline_free(text)):
            with Database(parse_program(program_text)) as db:
                db.load("e", edges)
                db.evaluate()
                results.append((db.rows("r"), db.query("i(P, Q)")[1]))
        stored = results[1]
        assert results[0][0] == stored[0], text
        with Database(parse_program(_inline_free(text))) as db:
            db.load("e", edges)
            db.evaluate()
            assert results[0][1] == db.rows("i"), text

    check()


# -- #include ----------------------------------------------------------------------------------


def _files(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root / "main.dl"


def _parse_main(main: Path) -> Program:
    return parse_program(main.read_text(), source=str(main))


def test_includes_are_relative_to_the_including_file_and_positions_name_the_file(tmp_path: Path) -> None:
    main = _files(
        tmp_path,
        {
            "main.dl": '// the entry\n#include "sub/a.dl"\n\n#include "sub/b.dl"\nb(X) :- a(X).\n',
            "sub/a.dl": '// doc of a\n.decl a(x: number)\na(1).\n#include "b.dl"\n',
            "sub/b.dl": ".decl b(x: number)\n.output b\n",
        },
    )
    program = _parse_main(main)
    assert [r.where for r in program.rules] == ["main.dl:5"]
    assert [f.where for f in program.facts] == ["sub/a.dl:3"]
    assert [(r.name, r.where, r.doc) for r in program.relations.values()] == [
        ("a", "sub/a.dl:2", "doc of a"),
        ("b", "sub/b.dl:1", ""),  # sub/b.dl included once
    ]
    assert program.source_map is not None and program.source_map.files == ["main.dl", "sub/a.dl", "sub/b.dl"]
    assert "// ---- from sub/a.dl\n\n// doc of a\n" in program.text
    with Database(program) as db:
        db.evaluate()
        assert db.rows("b") == [(1,)]
    # the joined text is a program of its own: the same rules, now in one file
    again = parse_program(program.text, source="joined.dl")
    assert [str(r) for r in again.rules] == [str(r) for r in program.rules]
    assert [r.line for r in again.rules] == [program.text.splitlines().index("b(X) :- a(X).") + 1]


def test_errors_in_an_included_file_point_into_it(tmp_path: Path) -> None:
    main = _files(
        tmp_path,
        {
            "main.dl": '#include "sub/a.dl"\n',
            "sub/a.dl": ".decl a(x: number)\nb(X) :- a(X).\n",
        },
    )
    with pytest.raises(DatalogError) as err:
        _parse_main(main)
    assert str(err.value).startswith(f"{tmp_path / 'sub' / 'a.dl'}:2:1: undeclared relation 'b'")
    main.write_text('#include "sub/a.dl"\n.decl a(y: number)\n')
    (tmp_path / "sub" / "a.dl").write_text(".decl a(x: number)\n")
    with pytest.raises(DatalogError, match=r"main\.dl:2:7: relation 'a' is already declared at sub/a\.dl:1"):
        _parse_main(main)
    (tmp_path / "sub" / "a.dl").write_text(".decl a(x: number)\na(1) :- .\n")
    with pytest.raises(DatalogError, match=r"sub/a\.dl:2:"):
        _parse_main(main)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"main.dl": '#include "nope.dl"\n'}, r"main\.dl:1:1: cannot #include 'nope\.dl': no such file"),
        ({"main.dl": '\n  #include "sub"\n', "sub/x.dl": ""}, r"main\.dl:2:3: cannot #include 'sub'"),
        (
            {"main.dl": '#include "a.dl"\n', "a.dl": '#include "main.dl"\n'},
            r"a\.dl:1:1: #include cycle: main\.dl -> a\.dl -> main\.dl",
        ),
        ({"main.dl": '#include "a.dl"\n', "a.dl": '#include "a.dl"\n'}, r"#include cycle: a\.dl -> a\.dl"),
        (
            {"main.dl": '#include "../out.dl"\n'},
            r"main\.dl:1:1: #include '\.\./out\.dl' leaves the folder of main\.dl",
        ),
        (
            {"main.dl": '#include "sub/a.dl"\n', "sub/a.dl": '#include "../../x.dl"\n'},
            r"sub/a\.dl:1:1: #include '\.\./\.\./x\.dl' leaves the folder",
        ),
        ({"main.dl": '#include "/etc/passwd"\n'}, r"#include of an absolute path '/etc/passwd'"),
        ({"main.dl": "#include <a.dl>\n"}, r"main\.dl:1:1: #include <a\.dl>: no such library"),
        ({"main.dl": "#include a.dl\n"}, r"main\.dl:1:1: #include needs a file in double quotes"),
    ],
)
def test_include_errors(tmp_path: Path, files: dict[str, str], message: str) -> None:
    with pytest.raises(DatalogError, match=message):
        _parse_main(_files(tmp_path, files))


def test_includes_read_through_a_reader_and_a_text_without_includes_is_its_own_joined_text() -> None:
    files = {"lib/edge.dl": ".decl edge(x: number, y: number)\nedge(1, 2).\n"}
    program = parse_program('#include "lib/edge.dl"\n', source="pkg.dl", read=files.__getitem__)
    assert [f.where for f in program.facts] == ["lib/edge.dl:2"]
    text = ".decl e(x: number)\ne(1).\n"
    plain = parse_program(text, source="rules.dl")
    assert plain.text == text and plain.facts[0].where == "rules.dl:2"


def test_a_star_folder_includes_that_file_of_every_folder_in_name_order(tmp_path: Path) -> None:
    main = _files(
        tmp_path,
        {
            "main.dl": '.decl code(c: symbol)\n.output code\n#include "codes/*/rules.dl"\n',
            "codes/R2/rules.dl": 'code("R2").\n',
            "codes/R1/rules.dl": 'code("R1").\n',
            "codes/R3/doc.md": "a folder without the file is passed over\n",
            "codes/.hidden/rules.dl": 'code("hidden").\n',
        },
    )
    program = _parse_main(main)
    assert [f.where for f in program.facts] == ["codes/R1/rules.dl:1", "codes/R2/rules.dl:1"]
    # the joined text names each file: Soufflé reads it with the pattern expanded
    assert "#include" not in program.text and "// ---- from codes/R2/rules.dl" in program.text
    (tmp_path / "codes" / "R4").mkdir()
    (tmp_path / "codes" / "R4" / "rules.dl").write_text('code("R4").\n')
    assert len(_parse_main(main).facts) == 3  # a new folder: no line to edit


@pytest.mark.parametrize("pattern", ["codes/R*/rules.dl", "*/*/rules.dl", "codes/*"])
def test_only_one_whole_folder_may_be_a_star(tmp_path: Path, pattern: str) -> None:
    main = _files(tmp_path, {"main.dl": f'#include "{pattern}"\n'})
    with pytest.raises(DatalogError, match=r"only one whole folder name may be '\*'"):
        _parse_main(main)


def test_a_star_needs_a_way_to_list_folders() -> None:
    with pytest.raises(DatalogError, match="the folders cannot be listed"):
        parse_program('#include "codes/*/rules.dl"\n', source="pkg.dl", read={}.__getitem__)
