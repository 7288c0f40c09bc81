"""Column batches: large loads handed to DuckDB through Arrow's C data interface, made without
pyarrow (engine.arrow_export)."""

from __future__ import annotations

import gc
import struct
from array import array

import duckdb
import pytest

from cpq.engine import Database, arrow_export, parse_program
from cpq.engine.arrow_export import (
    ColumnBatch,
    Shift,
    binary_column,
    number_column,
    symbol_column,
    value_column,
)


def _ints(*values: int) -> bytes:
    return array("q", values).tobytes()


def test_duckdb_reads_every_kind_of_column_as_it_was_made() -> None:
    symbols = ["a", "", "é\n\"'\t", "x\x00y", "z" * 1000, "漢字"]
    batch = ColumnBatch(
        ["n", "s", "f", "u", "b"],
        [
            number_column(_ints(0, -1, 2**63 - 1, -(2**63), 7, 8)),
            symbol_column(symbols),
            value_column([1.5, -0.0, 1e300, 3, 2.25, -7.0], "float"),
            value_column([0, 1, 2**64 - 1, 3, 4, 5], "unsigned"),
            binary_column([b"\x00", b"", b"abc", b"\xff" * 20, b"q", b"\n"]),
        ],
    )
    con = duckdb.connect()
    con.register("batch", batch)
    rows = con.execute("SELECT * FROM batch").fetchall()
    types = [t for _, t, *_ in con.execute("DESCRIBE batch").fetchall()]
    con.unregister("batch")
    assert types == ["BIGINT", "VARCHAR", "DOUBLE", "UBIGINT", "BLOB"]
    assert [r[1] for r in rows] == symbols
    assert rows[0] == (0, "a", 1.5, 0, b"\x00")
    assert rows[2][0] == 2**63 - 1 and rows[2][3] == 2**64 - 1
    assert rows[3][0] == -(2**63) and rows[3][4] == b"\xff" * 20


def test_what_duckdb_was_handed_is_let_go_once_read() -> None:
    """Each struct handed out keeps its buffers until DuckDB releases it; then nothing is left
    (a stream capsule DuckDB never takes is released when it goes)."""
    con = duckdb.connect()
    batch = ColumnBatch(["s"], [symbol_column(["a", "b"])])
    con.register("batch", batch)
    assert con.execute("SELECT list(s ORDER BY s) FROM batch").fetchall() == [(["a", "b"],)]
    con.unregister("batch")
    del batch
    gc.collect()
    assert not arrow_export._owned and not arrow_export._capsule_streams
    capsule = ColumnBatch(["n"], [number_column(_ints(1))]).__arrow_c_stream__()
    assert arrow_export._owned
    del capsule
    assert not arrow_export._owned and not arrow_export._capsule_streams


def test_malformed_batches_are_refused() -> None:
    with pytest.raises(ValueError):
        number_column(b"\x00" * 7)  # not whole int64 values
    with pytest.raises(ValueError):
        ColumnBatch(["a", "b"], [number_column(_ints(1)), number_column(_ints(1, 2))])
    with pytest.raises(ValueError):
        ColumnBatch(["a"], [])
    with pytest.raises(UnicodeEncodeError):
        symbol_column(["\udcff"])  # a lone surrogate: not UTF-8


def test_shifted_columns_move_by_the_row_amount_except_the_kept_value(tmp_path) -> None:
    """As facts.packing loads node ids: each file's ids moved by its base, -1 (no node) kept."""
    prog = parse_program(".decl node(id: number, kind: symbol, parent: number, line: number)")
    by = struct.pack("=q", 100) * 2 + struct.pack("=q", 1000) * 2
    batch = ColumnBatch(
        ["id", "kind", "parent", "line"],
        [
            number_column(_ints(0, 1, 0, 1)),
            symbol_column(["module", "call", "module", "name"]),
            number_column(_ints(-1, 0, -1, 0)),
            number_column(_ints(1, 2, 1, 2)),
        ],
        Shift(number_column(by), frozenset({0, 2}), -1),
    )
    with Database(prog, path=tmp_path / "db.duckdb") as db:
        assert db.load_disjoint({"node": batch}) == 4
        assert db.rows("node") == [
            (100, "module", -1, 1),
            (101, "call", 100, 2),
            (1000, "module", -1, 1),
            (1001, "name", 1000, 2),
        ]


def test_load_disjoint_takes_column_batches_all_or_none(tmp_path) -> None:
    text = ".decl edge(x: symbol, y: symbol)\n.decl label(n: symbol, weight: number)\n"
    with Database(parse_program(text), path=tmp_path / "db.duckdb") as db:
        added = db.load_disjoint(
            {
                "edge": ColumnBatch(["a", "b"], [symbol_column(["a", "b"]), symbol_column(["b", "c"])]),
                "label": ColumnBatch(["n", "w"], [symbol_column(["a"]), number_column(_ints(7))]),
            }
        )
        assert added == 3
        with pytest.raises(ValueError):  # the second batch is of the wrong width: none is kept
            db.load_disjoint(
                {
                    "edge": [["x"], ["y"]],
                    "label": ColumnBatch(["n"], [symbol_column(["b"])]),
                }
            )
        with pytest.raises(ValueError):  # a symbol where a number goes
            db.load_disjoint({"label": ColumnBatch(["n", "w"], [symbol_column(["b"]), symbol_column(["x"])])})
        assert db.rows("edge") == [("a", "b"), ("b", "c")]
        assert db.rows("label") == [("a", 7)]
        assert not db.con.execute("SELECT * FROM duckdb_views() WHERE NOT internal").fetchall()


def _extracted_examples() -> list:
    """The facts of each example program (tests/examples), extracted."""
    from conftest import EXAMPLES

    from cpq.facts import SourceText, extract_source

    examples = sorted(EXAMPLES.glob("*.py"))
    return [extract_source(SourceText(path.name, path.read_text(), "")) for path in examples]


def test_the_last_facts_load_on_two_connections_as_on_one(tmp_path, monkeypatch) -> None:
    """A run's last facts go to the database on two connections at once (pipeline.run.load_facts):
    every relation ends up with the same rows as when one connection loads them all."""
    import threading

    from cpq.facts import packing
    from cpq.facts.node_ids import MAX_NODES
    from cpq.facts.schema import INPUT_RELATIONS
    from cpq.rules.program import load_program

    monkeypatch.setattr(packing, "LIST_BATCH_VALUES", 0)  # column batches, as on a large tree
    monkeypatch.setattr(packing, "SINK_GROUP_VALUES", 500)  # many groups for the two to share
    files = _extracted_examples()
    program = load_program()
    with Database(program, tmp_path / "one.duckdb") as one, Database(program, tmp_path / "two.duckdb") as two:
        side = two.con.cursor()
        side_took = threading.Event()

        def on_main(tables) -> int:
            side_took.wait(10)  # so that both connections load some of the groups
            return two.load_disjoint(tables)

        def on_side(tables) -> int:
            side_took.set()
            return two.load_disjoint(tables, con=side)

        alone, shared = packing.FactSet(sink=one.load_disjoint), packing.FactSet(sink=on_main)
        for index, facts in enumerate(files):
            columns = packing.rows_to_columns(dict(facts.rows))
            alone.add_file(columns, facts.node_count, index * MAX_NODES)
            shared.add_file(columns, facts.node_count, index * MAX_NODES)
        alone.flush()
        shared.flush(also=on_side)
        side.close()
        assert side_took.is_set()
        assert shared.count() == alone.count() > 5_000
        for relation in INPUT_RELATIONS:
            assert two.rows(relation) == one.rows(relation), relation


def test_once_one_connection_fails_to_load_the_other_takes_no_more(monkeypatch) -> None:
    """A load that fails on one of the two connections is the run's error, raised at once: the
    other connection stops after the group it is loading rather than loading all the rest."""
    import threading
    import time

    from cpq.facts import packing
    from cpq.facts.node_ids import MAX_NODES

    monkeypatch.setattr(packing, "LIST_BATCH_VALUES", 0)
    monkeypatch.setattr(packing, "SINK_GROUP_VALUES", 1)  # a group per relation
    files = _extracted_examples()
    relations = {relation for facts in files for relation, rows in facts.rows.items() if rows}
    side_took = threading.Event()
    taken: list[int] = []

    def broken(tables) -> int:
        side_took.wait(10)
        raise ValueError("cannot load rows: a full disk")

    def slow(tables) -> int:
        side_took.set()
        taken.append(len(tables))
        time.sleep(0.05)
        return 0

    facts = packing.FactSet(sink=broken)
    for index, extracted in enumerate(files):
        facts.add_file(packing.rows_to_columns(dict(extracted.rows)), extracted.node_count, index * MAX_NODES)
    with pytest.raises(ValueError, match="a full disk"):
        facts.flush(also=slow)
    assert len(relations) > 10 and 1 <= len(taken) <= 2
