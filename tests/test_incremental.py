"""Incremental maintenance: an update of evaluated results gives what evaluating from scratch
gives, keeps every derived tuple provable, and the assessment takes it after small edits."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpq.config.context import Context
from cpq.engine import DatalogError, parse_program
from cpq.engine.connect import Limits
from cpq.engine.database import Database
from cpq.explain.proof import Prover
from cpq.pipeline.assessment import assess

# Recursion, negation (one with a wildcard), aggregates whose groups can be narrowed and one
# that cannot, a computed head, a program fact in a derived relation, a 0-ary relation, joins
# of relations that may be empty before or after (an update leaves out what joins an empty one).
PROGRAM = """
.decl e(a: number, b: number)
.input e
.decl mark(a: number)
.input mark
.decl tc(a: number, b: number)
tc(X, Y) :- e(X, Y).
tc(X, Z) :- tc(X, Y), e(Y, Z).
.decl unmarked_reach(a: number, b: number)
unmarked_reach(X, Y) :- tc(X, Y), !mark(Y).
.decl deg(a: number, n: number)
deg(X, N) :- e(X, _), N = count : { e(X, _) }.
.decl big(a: number)
big(X) :- deg(X, N), N >= 2, !mark(X).
.decl any_big(n: number)
any_big(N) :- N = count : { big(_) }.
.decl lonely(a: number)
lonely(X) :- mark(X), !tc(X, _).
.decl label(a: number, b: number, s: symbol)
label(X, Y, S) :- unmarked_reach(X, Y), S = cat(to_string(X), "-", to_string(Y)).
.decl seeded(a: number)
seeded(1).
seeded(X) :- mark(X).
.decl maxmark(a: number, m: number)
maxmark(X, M) :- e(X, _), M = max Y : { mark(Y), tc(X, Y) }.
.decl open_marks(a: number, n: number)
open_marks(X, N) :- e(_, X), N = count : { tc(X, Y), !mark(Y) }.
.decl cyclic()
cyclic() :- tc(X, X).
.decl calm(a: number)
calm(X) :- mark(X), !cyclic().
.decl weight(a: number, w: number)
.input weight
.decl weighed(a: number)
weighed(X) :- weight(X, _), !mark(X).
.decl weights(n: number)
weights(N) :- N = count : { weight(_, _) }.
.decl tag(a: number, t: number)
.input tag
.decl tagged(a: number)
tagged(X) :- tag(X, _), tc(X, _).
.decl first_tagged(a: number)
first_tagged(X) :- X = min Y : { tag(Y, _) }.
.decl untagged(a: number)
untagged(X) :- mark(X), !tag(X, _).
.decl weighed_mark(a: number)
weighed_mark(X) :- weight(X, _), mark(X).
"""

Edges = set[tuple[int, int]]
Marks = set[tuple[int]]
Pairs = set[tuple[int, int]]
# Edges, marks, weights (their second column is read by a count only), tags (never read).
State = tuple[Edges, Marks, Pairs, Pairs]
INPUTS = ("e", "mark", "weight", "tag")


def _rows(db: Database) -> dict[str, list[tuple]]:
    return {name: db.rows(name) for name in db.program.relations}


def _evaluated_file(path: Path, state: State) -> None:
    with Database(parse_program(PROGRAM, "test.dl"), path) as db:
        for relation, rows in zip(INPUTS, state, strict=True):
            db.load(relation, sorted(rows))
        db.evaluate()
        db.con.execute("CHECKPOINT")


def _updated(folder: Path, before: State, after: State) -> Database:
    """Results of `before`, copied and brought up to date to `after`."""
    previous, current = folder / "previous.duckdb", folder / "current.duckdb"
    for leftover in folder.glob("*.duckdb*"):
        leftover.unlink()
    _evaluated_file(previous, before)
    shutil.copyfile(previous, current)
    limits = Limits(directories=(str(folder),))  # where it may attach the previous results
    db = Database.open(parse_program(PROGRAM, "test.dl"), current, read_only=False, limits=limits)
    db.begin_update(previous)
    changes = {}
    for relation, rows in zip(INPUTS, after, strict=True):
        if rows:
            db.load_disjoint({relation: [list(col) for col in zip(*sorted(rows), strict=True)]}, staged=True)
        cols = ", ".join(f'"{c}"' for c in db.program.relations[relation].column_names)
        gained = f'SELECT {cols} FROM cpq_changes."new:{relation}"' if rows else None
        changes[relation] = (f'SELECT {cols} FROM cpq_old."{relation}"', gained)
    db.update(changes)
    db.end_update()
    return db


def _from_scratch(state: State) -> dict[str, list[tuple]]:
    with Database(parse_program(PROGRAM, "test.dl")) as db:
        for relation, rows in zip(INPUTS, state, strict=True):
            db.load(relation, sorted(rows))
        db.evaluate()
        return _rows(db)


def _assert_provable(db: Database) -> None:
    """Every derived tuple has a derivation from tuples of smaller `_iter` (what `why` walks)."""
    prover = Prover(db)
    for name, rel in db.program.relations.items():
        if rel.is_input:
            continue
        for values in db.rows(name):
            for node in prover.prove(name, values).walk():
                assert not (node.kind == "check" and "no body" in node.text), (name, values)


nodes = st.integers(0, 6)
edge_sets = st.sets(st.tuples(nodes, nodes), max_size=12)
mark_sets = st.sets(st.tuples(nodes), max_size=4)
pair_sets = st.sets(st.tuples(nodes, st.integers(0, 3)), max_size=5)
pair_flips = st.sets(st.tuples(nodes, st.integers(0, 3)), max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=st.tuples(edge_sets, mark_sets, pair_sets, pair_sets),
    flips=st.lists(st.tuples(nodes, nodes), min_size=1, max_size=4),
    mark_flips=st.sets(st.tuples(nodes), max_size=2),
    weight_flips=pair_flips,
    tag_flips=pair_flips,
)
def test_an_update_gives_the_results_of_evaluating_from_scratch(
    tmp_path: Path,
    before: State,
    flips: list[tuple[int, int]],
    mark_flips: Marks,
    weight_flips: Pairs,
    tag_flips: Pairs,
) -> None:
    """Tags and weights change in a column the rules leave unread (a wildcard) but for a count:
    a lost and a gained tuple that agree on the columns read are no change to the rules."""
    edges, marks, weights, tags = before
    after = (edges ^ set(flips), marks ^ mark_flips, weights ^ weight_flips, tags ^ tag_flips)
    db = _updated(tmp_path, before, after)
    try:
        assert _rows(db) == _from_scratch(after)
        _assert_provable(db)
    finally:
        db.close()


def test_tuples_that_differ_only_where_no_rule_reads_change_no_derivation(tmp_path: Path) -> None:
    """A tag's second column is read by no rule: changing it changes nothing derived, and the
    update is told so (no change is left for the rules); a weight's is counted: one weight
    becoming two is a change, though both agree with the old one where the rules read."""
    edges = {(0, 1), (1, 2)}
    before: State = (edges, set(), {(1, 2)}, {(0, 5), (1, 7)})
    after: State = (edges, set(), {(1, 3), (1, 0)}, {(0, 6), (1, 7)})
    db = _updated(tmp_path, before, after)
    try:
        assert _rows(db) == _from_scratch(after)
        assert db.rows("weights") == [(2,)]
        assert db.rows("tag") == [(0, 6), (1, 7)]  # the table holds the change all the same
    finally:
        db.close()
    from cpq.engine.incremental import read_columns

    read = read_columns(parse_program(PROGRAM, "test.dl"))
    assert read["tag"] == {0} and read["weight"] == {0, 1} and read["e"] == {0, 1}


def test_a_second_update_builds_on_the_first(tmp_path: Path) -> None:
    first: State = ({(0, 1), (1, 2), (2, 0)}, {(3,)}, set(), set())
    second: State = ({(0, 1), (1, 2), (2, 3)}, {(3,), (0,)}, {(1, 2)}, {(0, 5)})
    db = _updated(tmp_path, first, second)
    db.con.execute("CHECKPOINT")
    db.close()
    folder = tmp_path / "next"
    folder.mkdir()
    shutil.copyfile(tmp_path / "current.duckdb", folder / "previous.duckdb")
    again = Database.open(parse_program(PROGRAM, "test.dl"), folder / "previous.duckdb", read_only=False)
    assert again.rows("cyclic") == []  # the first update's results
    again.close()


def test_an_update_needs_evaluated_results(tmp_path: Path) -> None:
    with Database(parse_program(PROGRAM, "test.dl"), tmp_path / "r.duckdb") as db:
        db.load("e", [(0, 1)])
        db._evaluated = False
        with pytest.raises(DatalogError, match="evaluated"):
            db.update({})


# -- the assessment ------------------------------------------------------------------------


def _key(result) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(f.code, f.file, f.line, f.function, f.hot, f.counts, f.suppressed) for f in result.findings]


def _same_as_from_scratch(tree: Path, ctx: Context) -> None:
    cached = assess(tree, ctx, use_cache=True, keep_database=False)
    fresh = assess(tree, ctx)
    assert cached.how == "saved results updated"
    assert _key(cached) == _key(fresh)
    assert (cached.verdict, cached.decision.gates, cached.decision.api_gaps) == (
        fresh.verdict,
        fresh.decision.gates,
        fresh.decision.api_gaps,
    )
    assert cached.skipped == fresh.skipped and cached.fact_count == fresh.fact_count
    assert [(n.kind, n.file, n.line) for n in cached.audit_notes] == [
        (n.kind, n.file, n.line) for n in fresh.audit_notes
    ]


def test_after_each_small_edit_the_results_are_updated_and_match_a_run_without_cache(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    assess(tree, ctx, use_cache=True, keep_database=False)
    wave = tree / "wave_equation.py"
    text = wave.read_text()
    edits = [
        lambda: wave.write_text(text + "\n_edit = 1\n"),  # appended: the file keeps its ids
        # inserted near the top: every later line and id of the file moves
        lambda: wave.write_text(
            "import numpy as np\n\ndef first(a: np.ndarray):\n"
            "    for i in range(a.shape[0]):\n        a[i] = a[i - 1] * 2\n"
            "    return a\n" + wave.read_text()
        ),
        lambda: (tree / "extra.py").write_text(
            "import numpy as np\nfrom wave_equation import first\n\n"
            "def use(n):\n    b = first(np.zeros(n))\n    for k in range(len(b)):\n"
            "        b[k] = b[k] + 1.0\n    return b\n"
        ),
        lambda: (tree / "extra.py").write_text(
            (tree / "extra.py").read_text().replace("+ 1.0\n", "+ 1.0  # cpq: ignore\n")
        ),
        lambda: (tree / "broken.py").write_text("def f(:\n    pass\n"),
        lambda: (tree / "sync_in_loop.py").unlink(),
        lambda: wave.write_text(text),  # shrunk back
    ]
    for edit in edits:
        edit()
        _same_as_from_scratch(tree, ctx)


def test_a_damaged_previous_result_is_evaluated_from_scratch(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    assess(tree, ctx, use_cache=True, keep_database=False)
    for results in (tree / ".cpq").glob("results-*.duckdb"):
        results.write_bytes(b"not a database" * 100)
    path = tree / "particle_loop.py"
    path.write_text(path.read_text() + "\nanother = 1\n")
    edited = assess(tree, ctx, use_cache=True, keep_database=False)
    assert edited.how == "evaluated"
    assert _key(edited) == _key(assess(tree, ctx))


def test_many_changed_files_are_evaluated_from_scratch(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cpq.pipeline.cache.update as update

    monkeypatch.setattr(update, "UPDATE_MAX_FILES", 1)
    monkeypatch.setattr(update, "UPDATE_MAX_SHARE", 0.0)
    ctx = Context.from_options(elements="20M")
    assess(tree, ctx, use_cache=True, keep_database=False)
    for name in ("particle_loop.py", "wave_equation.py"):
        (tree / name).write_text((tree / name).read_text() + "\nanother = 1\n")
    edited = assess(tree, ctx, use_cache=True, keep_database=False)
    assert edited.how == "evaluated"
    assert _key(edited) == _key(assess(tree, ctx))


def test_an_edit_that_changes_too_many_facts_is_evaluated_from_scratch(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit at the top of a file moves every id and line after it: beyond the update's
    limit on changed facts, the run evaluates afresh (the edited file's facts, extracted for
    the update, come from the fact store)."""
    import cpq.pipeline.cache.update as update

    ctx = Context.from_options(elements="20M")
    assess(tree, ctx, use_cache=True, keep_database=False)
    monkeypatch.setattr(update, "UPDATE_MIN_CHANGED", 10)
    monkeypatch.setattr(update, "UPDATE_MAX_CHANGED_SHARE", 0.0)
    path = tree / "wave_equation.py"
    path.write_text("import os\n" + path.read_text())
    edited = assess(tree, ctx, use_cache=True, keep_database=False)
    assert edited.how == "evaluated" and edited.cache_hits == 4
    assert _key(edited) == _key(assess(tree, ctx))
    path.write_text(path.read_text() + "# the end\n")  # two facts change: within the limit
    assert assess(tree, ctx, use_cache=True, keep_database=False).how == "saved results updated"


def test_a_cold_run_lays_out_the_node_relations_in_the_order_of_their_ids(tmp_path: Path) -> None:
    """Files' facts are loaded in the order of their node ids, not of their paths: an update's
    filters and joins on the ids of the files it changed then read the few row groups that can
    hold them, by their minimum and maximum."""
    from cpq.facts.node_ids import file_bases

    names = [f"m{i:02d}.py" for i in range(12)]
    for i, name in enumerate(names):
        (tmp_path / name).write_text(
            f"import numpy as np\nx = np.ones({i + 2})\nfor k in range(3):\n    x[k] = k * {i}\n"
        )
    bases = file_bases(names)
    assert [bases[n] for n in names] != sorted(bases.values())  # path order is not id order
    assess(tmp_path, use_cache=True, keep_database=False)
    (saved,) = (tmp_path / ".cpq").glob("results-*.duckdb")
    con = duckdb.connect(str(saved), read_only=True)
    try:
        ids = [n for (n,) in con.execute('SELECT n FROM "node" ORDER BY rowid').fetchall()]
        calls = [c for (c,) in con.execute('SELECT c FROM "call" ORDER BY rowid').fetchall()]
    finally:
        con.close()
    assert len(ids) > 12 * 5 and ids == sorted(ids)
    assert calls and calls == sorted(calls)
