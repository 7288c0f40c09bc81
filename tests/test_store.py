"""The .cpq/ fact store: same findings cold, warm and without it; edits, removals, damage."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cpq.config.context import Context
from cpq.pipeline.assessment import assess
from cpq.pipeline.cache.facts_store import FACTS_FILE, open_store
from cpq.pipeline.cache.keys import extractor_stamp

REUSED = "saved results reused"
UPDATED = "saved results updated"


def _key(result) -> list[tuple]:
    return [(f.code, f.file, f.line, f.function, f.hot, f.counts) for f in result.findings]


def test_same_findings_cold_warm_and_without_cache(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    cold = assess(tree, ctx, use_cache=True)
    assert cold.cache_hits == 0 and cold.how == "evaluated"
    assert (tree / ".cpq" / FACTS_FILE).exists()
    warm = assess(tree, ctx, use_cache=True)
    assert warm.how == REUSED
    uncached = assess(tree, ctx, use_cache=False)
    assert _key(cold) == _key(warm) == _key(uncached)
    assert cold.verdict == warm.verdict == uncached.verdict
    assert warm.files == cold.files and warm.lines == cold.lines


def test_an_edited_file_is_reparsed_and_the_rest_comes_from_the_cache(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    assess(tree, ctx, use_cache=True)
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "\n\ndef extra(a: np.ndarray):\n    return a.item()\n")
    edited = assess(tree, ctx, use_cache=True)
    assert edited.how == UPDATED
    assert edited.cache_hits == 3
    assert _key(edited) == _key(assess(tree, ctx, use_cache=False))


def _close(result) -> None:
    result.db.close()  # as the next process would find the store


def test_an_edit_that_changes_no_fact_but_the_line_count_updates_the_results(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    first = assess(tree, ctx, use_cache=True)
    _close(first)
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "# a comment at the end changes no fact\n\n")
    edited = assess(tree, ctx, use_cache=True)
    assert edited.how == UPDATED
    assert _key(edited) == _key(first)
    assert edited.lines == first.lines + 2
    _close(edited)
    # The saved run carries the new line count, for `cpq query source_file` too.
    warm = assess(tree, ctx, use_cache=True)
    assert warm.how == REUSED
    counts = {f: n for f, _, n in warm.db.rows("source_file")}
    assert counts["wave_equation.py"] == path.read_text().count("\n")
    assert _key(warm) == _key(assess(tree, ctx, use_cache=False))


def test_an_edit_that_moves_lines_or_adds_a_suppression_is_evaluated_again(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    first = assess(tree, ctx, use_cache=True)
    _close(first)
    path = tree / "sync_in_loop.py"
    path.write_text("# a comment above everything moves every line\n" + path.read_text())
    moved = assess(tree, ctx, use_cache=True)
    assert moved.how == UPDATED
    assert _key(moved) == _key(assess(tree, ctx, use_cache=False))
    _close(moved)
    target = next(f for f in moved.findings if f.file == "sync_in_loop.py" and f.kind == "BLOCKS")
    lines = path.read_text().splitlines()
    lines[target.line - 1] += f"  # cpq: ignore[{target.code}] -- measured, fine"
    path.write_text("\n".join(lines) + "\n")
    suppressed = assess(tree, ctx, use_cache=True)
    assert suppressed.how == UPDATED
    assert _key(suppressed) == _key(assess(tree, ctx, use_cache=False))
    assert any(f.suppressed for f in suppressed.findings)


def test_rules_that_read_line_counts_see_them_after_an_update(tree: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.dl"
    from cpq.rules.program import rules_text

    rules.write_text(
        rules_text() + "\n.decl long_file(f: symbol)\n.output long_file\n"
        "long_file(F) :- source_file(F, _, N), N > 40.\n"
    )
    first = assess(tree, rules_path=rules, use_cache=True)
    assert ("wave_equation.py",) not in first.db.rows("long_file")
    _close(first)
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "#\n" * 30)
    again = assess(tree, rules_path=rules, use_cache=True)
    assert again.how == UPDATED
    assert ("wave_equation.py",) in again.db.rows("long_file")
    assert sorted(again.db.rows("long_file")) == sorted(assess(tree, rules_path=rules).db.rows("long_file"))


def test_other_context_does_not_reuse_results(tree: Path) -> None:
    assess(tree, Context.from_options(elements="20M"), use_cache=True)
    other = assess(tree, Context.from_options(elements="20M", gpus=4), use_cache=True)
    assert other.how == "evaluated"
    assert other.cache_hits == 4  # the facts are still reused


def test_removed_files_leave_the_store(tree: Path) -> None:
    assess(tree, use_cache=True)
    (tree / "refactor_only.py").unlink()
    result = assess(tree, use_cache=True)
    assert "refactor_only.py" not in result.files
    store, _ = open_store(tree / ".cpq", extractor_stamp())
    assert store is not None
    paths = {r[0] for r in store.con.execute("SELECT path FROM file_facts").fetchall()}
    store.close()
    assert "refactor_only.py" not in paths


def test_corrupted_store_is_rebuilt(tree: Path) -> None:
    first = assess(tree, use_cache=True)
    first.db.close()  # as a later process would find it: DuckDB shares an open file's instance
    (tree / ".cpq" / FACTS_FILE).write_bytes(b"this is not a duckdb file" * 100)
    for results in (tree / ".cpq").glob("results-*.duckdb"):
        results.write_bytes(b"garbage")
    again = assess(tree, use_cache=True)
    assert _key(again) == _key(first)
    assert assess(tree, use_cache=True).how == REUSED


def test_unwritable_cache_dir_falls_back_to_no_cache(tree: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    result = assess(tree, use_cache=True, cache_dir=blocker / "cache")
    assert result.findings and result.how == "evaluated"


def test_cache_dir_option(tree: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    assess(tree, use_cache=True, cache_dir=elsewhere)
    assert (elsewhere / FACTS_FILE).exists()
    assert not (tree / ".cpq").exists()


def test_two_concurrent_runs_do_not_corrupt_the_store(tree: Path) -> None:
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "cpq", "assess", str(tree), "--format", "json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-500:] for o in outs]
    reports = [json.loads(o[0]) for o in outs]
    assert reports[0]["findings"] == reports[1]["findings"]
    again = json.loads(subprocess.run(cmd, capture_output=True, check=True).stdout)
    assert again["findings"] == reports[0]["findings"]


def test_verbose_line_says_where_the_results_came_from(tree: Path) -> None:
    from typer.testing import CliRunner

    from cpq.cli.app import app

    runner = CliRunner()

    def verbose_line() -> str:
        done = runner.invoke(app, ["-v", "assess", str(tree), "--format", "json", "-o", str(tree / "r.json")])
        assert done.exit_code == 0, done.output
        return next(line for line in done.output.splitlines() if line.startswith("cpq: "))

    assert "(0 files from the cache)" in verbose_line()
    assert "(saved results reused)" in verbose_line()
    path = tree / "particle_loop.py"
    path.write_text(path.read_text() + "# reviewed\n")
    assert "(3 files unchanged, saved results updated)" in verbose_line()
    path.write_text(path.read_text() + "unused_name = 1\n")
    assert "(3 files unchanged, saved results updated)" in verbose_line()


def test_a_store_of_an_older_layout_is_replaced(tree: Path) -> None:
    import duckdb

    (tree / ".cpq").mkdir()
    con = duckdb.connect(str(tree / ".cpq" / FACTS_FILE))
    con.execute("CREATE TABLE file_facts (path VARCHAR, sha VARCHAR, stamp VARCHAR, data BLOB)")
    con.execute("INSERT INTO file_facts VALUES ('sync_in_loop.py', 'x', 'old', 'junk'::BLOB)")
    con.close()
    first = assess(tree, use_cache=True)
    assert first.how == "evaluated" and first.cache_hits == 0
    _close(first)
    again = assess(tree, use_cache=True)
    assert again.how == REUSED and _key(again) == _key(first)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", "1GB"), ("4GB", "4GB"), ("512MiB", "512MiB"), ("lots", "1GB"), ("1GB; DROP", "1GB")],
)
def test_memory_limit_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    from cpq.pipeline.run import memory_limit

    monkeypatch.setenv("CPQ_MEMORY_LIMIT", value)
    assert memory_limit() == expected


def test_after_an_edit_the_updated_results_hold_the_facts_of_a_fresh_run_node_ids_included(
    tree: Path,
) -> None:
    """A file's node ids depend on its path alone: what an update keeps and what it adds are
    numbered as a fresh run numbers them, so `cpq query` answers alike either way."""
    from cpq.facts.schema import INPUT_RELATIONS

    ctx = Context.from_options(elements="20M")
    _close(assess(tree, ctx, use_cache=True))
    path = tree / "particle_loop.py"
    path.write_text("import numpy as np\n" + path.read_text() + "\ndef extra(n):\n    return np.ones(n)\n")
    (tree / "added.py").write_text("import numpy as np\nx = np.zeros(8)\n")
    (tree / "refactor_only.py").unlink()
    edited = assess(tree, ctx, use_cache=True)
    assert edited.how == UPDATED
    fresh = assess(tree, ctx, use_cache=False)
    for name in [*INPUT_RELATIONS, "finding", "call_site", "array_var"]:
        if name in fresh.db.program.relations:
            assert sorted(edited.db.rows(name)) == sorted(fresh.db.rows(name)), name
    assert _key(edited) == _key(fresh) and edited.fact_count == fresh.fact_count
    _close(edited)


def test_file_bases_depend_on_the_path_alone_and_never_collide() -> None:
    from cpq.facts import node_ids

    paths = [f"pkg/m{i}.py" for i in range(2000)]
    bases = node_ids.file_bases(paths)
    assert len(set(bases.values())) == len(paths)
    assert node_ids.file_bases(["x.py", *paths])["pkg/m7.py"] == bases["pkg/m7.py"]
    assert all(b % node_ids.MAX_NODES == 0 and 0 <= b < 1 << 62 for b in bases.values())


def test_paths_whose_slots_meet_take_the_next_free_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from cpq.facts import node_ids

    monkeypatch.setattr(node_ids, "_SLOTS", 4)  # every path meets another
    bases = node_ids.file_bases([f"f{i}.py" for i in range(4)])
    assert sorted(bases.values()) == [i << node_ids.SLOT_BITS for i in range(4)]


def test_packed_facts_round_trip_with_lz4_or_zlib_and_reject_damage(monkeypatch) -> None:
    """A file's facts are stored compressed: with lz4 (a dependency), else zlib; a damaged
    entry is a ValueError (the file is then extracted again), never a crash."""
    import os

    import cpq.facts.packing as packing

    rows = {"source_file": [("a.py", "a", 3)], "node": [(0, "module", 0, 1, -1), (1, "call", 0, 2, 0)]}
    codecs = {}
    for codec in ("lz4", "zlib"):
        if codec == "zlib":
            monkeypatch.setattr(packing, "_lz4", lambda: None)
        packed = packing.pack_facts(rows, 2, 3)
        codecs[codec] = packed[:1]
        columns, node_count, lines = packing.unpack_facts(packed)
        assert (node_count, lines) == (2, 3)
        assert columns["node"][1] == ["module", "call"]
        header = 9
        for damaged in (
            packed[:5],
            packed[:-2],
            packed[:header] + os.urandom(len(packed) - header),
            b"?" + packed[1:],
            packed[:1] + b"\xff" * 8 + packed[header:],
        ):
            with pytest.raises(ValueError):
                packing.unpack_facts(damaged)
    assert codecs == {"lz4": b"L", "zlib": b"D"}
    # An lz4 entry read where lz4 cannot be imported is refused, not misread.
    monkeypatch.undo()
    packed = packing.pack_facts(rows, 2, 3)
    monkeypatch.setattr(packing, "_lz4", lambda: None)
    with pytest.raises(ValueError, match="not available"):
        packing.unpack_facts(packed)


def test_number_columns_pack_as_native_int64_and_refuse_what_array_refuses() -> None:
    """A number column is packed as native 64-bit integers (struct, for speed), the bytes
    array would give, from the smallest value to the largest; a value that is not such an
    integer raises what array raises for it."""
    from array import array

    import cpq.facts.packing as packing

    ids = (-(2**63), -1, 0, 1, 2**63 - 1, True)
    columns = packing.rows_to_columns({"node": [(n, "call", 0, 1, -1) for n in ids]})
    assert columns["node"][0] == array("q", ids).tobytes()
    assert packing.rows_to_columns({"node": []}) == {}
    with pytest.raises(OverflowError):
        packing.rows_to_columns({"node": [(2**63, "call", 0, 1, -1)]})
    with pytest.raises(TypeError):
        packing.rows_to_columns({"node": [(1.5, "call", 0, 1, -1)]})


@pytest.mark.parametrize("cores", ["one core", "every core"])
def test_workers_hand_over_facts_uncompressed_and_the_store_compresses_them(
    tree: Path, cores: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compressing was a tenth of a worker's time while every core is busy: the workers hand
    their facts over as they are, and the store compresses what it keeps while the report is
    made (on every core, for many bytes).  It never keeps an entry uncompressed, and reads back
    what it kept."""
    import duckdb

    import cpq.facts.packing as packing
    from cpq.pipeline.cache import facts_store

    if cores == "every core":
        monkeypatch.setattr(facts_store, "PARALLEL_COMPRESS_BYTES", 0)
    monkeypatch.setattr(facts_store, "WAL_KEPT_BYTES", 0)  # the entries reach the file itself

    rows = {"source_file": [("a.py", "a", 3)], "node": [(0, "module", 0, 1, -1), (1, "call", 0, 2, 0)]}
    raw = packing.pack_facts(rows, 2, 3, compress=False)
    assert raw[:1] == b"R"
    assert packing.unpack_facts(raw) == packing.unpack_facts(packing.pack_facts(rows, 2, 3))
    with monkeypatch.context() as without_lz4:
        without_lz4.setattr(packing, "_lz4", lambda: None)
        compressed = packing.compress_packed(raw)
    assert compressed[:1] == b"D" and packing.compress_packed(compressed) is compressed
    assert packing.unpack_facts(compressed) == packing.unpack_facts(raw)
    bad_size = raw[:1] + (10**6).to_bytes(8, "little") + raw[9:]
    for damaged in (raw[:-1], raw[:9] + b"\xff" + raw[10:], bad_size):
        with pytest.raises(ValueError):
            packing.unpack_facts(damaged)

    first = assess(tree, use_cache=True, keep_database=False)
    with duckdb.connect(str(tree / ".cpq" / FACTS_FILE), read_only=True) as con:
        kept = [bytes(data) for (data,) in con.execute("SELECT data FROM file_facts").fetchall()]
        # lz4's output is written as it is: DuckDB's own compression of it costs a second.
        methods = con.execute("SELECT DISTINCT compression FROM pragma_storage_info('file_facts')").fetchall()
    assert kept and all(data[:1] == b"L" for data in kept)
    assert methods and {m for (m,) in methods} <= {"Uncompressed", "Constant", "Validity"}
    for saved in (tree / ".cpq").glob("results-*"):
        saved.unlink()  # so the next run reads every file's facts from the store
    again = assess(tree, use_cache=True, keep_database=False)
    assert again.cache_hits == len(kept) and _key(again) == _key(first)


def test_a_small_run_imports_neither_numpy_nor_pyarrow(tree: Path) -> None:
    """Neither is needed (importing pyarrow would be a sixth of such a run): facts go to DuckDB
    as lists or as column batches of cpq's own (engine.arrow_export)."""
    import subprocess
    import sys

    script = (
        "import sys; from pathlib import Path; from cpq.pipeline.assessment import assess; "
        f"r = assess(Path({str(tree)!r}), use_cache=True); "
        "print(r.how.split()[-1], *(sys.modules.get(m) is not None for m in ('pyarrow', 'numpy')))"
    )

    def run() -> str:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert run() == ["evaluated", "False", "False"]  # cold: facts extracted, stored and loaded
    assert run() == ["reused", "False", "False"]  # warm: saved results reused


def test_a_small_trees_saved_results_take_little_room(tree: Path) -> None:
    """DuckDB gives every table a block of its own: with its default 256 KiB blocks, the
    results of these four files would take some 30 MB of the user's disk."""
    result = assess(tree, use_cache=True)
    assert result.findings
    saved = list((tree / ".cpq").glob("results-*.duckdb"))
    assert len(saved) == 1
    assert saved[0].stat().st_size < 6_000_000
    again = assess(tree, use_cache=True)
    assert again.how == REUSED and again.findings == result.findings


@pytest.mark.parametrize("soon", [False, True], ids=["written-now", "written-in-a-thread"])
@pytest.mark.parametrize("size", [100, 300_000])
def test_store_entries_round_trip_small_and_large_batches(tmp_path: Path, size: int, soon: bool) -> None:
    """Few bytes of entries go to DuckDB as lists, many as Arrow: both read back whole, and
    so does why a file could not be extracted.  Entries written in a thread (while a report is
    made) are there for what comes next as those written at once."""
    import os

    from cpq.facts import SourceText

    (tmp_path / ".cpq").mkdir()
    store, note = open_store(tmp_path / ".cpq", extractor_stamp())
    assert store is not None and note is None
    sources = {f"f{i}.py": SourceText(f"f{i}.py", "", sha=f"sha{i}") for i in range(5)}
    entries = {path: b"Z" + os.urandom(size) for path in sources}
    for path, data in entries.items():
        store.put(sources[path], True, data)
    if soon:
        store.write_pending_soon()
    else:
        store.write_pending()
    changed = SourceText("f0.py", "", sha="new")
    store.put(changed, True, "SyntaxError: invalid syntax at line 1")  # replaces the file's entry
    store.flush(set(entries))
    assert not store.broken
    rest = [(s, True) for p, s in sources.items() if p != "f0.py"]
    assert store.get_many(rest) == {p: d for p, d in entries.items() if p != "f0.py"}
    assert store.get_many([(s, False) for s, _ in rest]) == {}  # extracted to another depth
    assert store.get_many([(sources["f0.py"], True), (changed, True)]) == {
        "f0.py": "SyntaxError: invalid syntax at line 1"
    }
    assert store.close() is None
    again, note = open_store(tmp_path / ".cpq", extractor_stamp())  # sealed, so read again
    assert again is not None and note is None
    assert again.get_many(rest) == {p: d for p, d in entries.items() if p != "f0.py"}
    again.close()


def test_a_small_trees_results_file_starts_as_a_copy_of_the_tables_template(
    tree: Path, tmp_path: Path, monkeypatch
) -> None:
    """Creating some 200 tables is a tenth of a small run: the first run of a program keeps a
    sealed template in the user cache, later ones copy it; a template that fails its seal is
    not used, and a new one takes its place."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    uncached = assess(tree, use_cache=False)
    first = assess(tree, use_cache=True)
    templates = list((tmp_path / "cache" / "cpq").glob("tables-*.duckdb"))
    assert len(templates) == 1
    shutil.rmtree(tree / ".cpq")
    copied = assess(tree, use_cache=True)
    assert _key(uncached) == _key(first) == _key(copied) and copied.how == "evaluated"
    assert copied.verdict == uncached.verdict
    templates[0].write_bytes(b"not a database" * 100)
    shutil.rmtree(tree / ".cpq")
    damaged = assess(tree, use_cache=True)
    assert _key(damaged) == _key(uncached)
    assert b"not a database" not in templates[0].read_bytes()  # made anew, not trusted
    shutil.rmtree(tree / ".cpq")
    again = assess(tree, use_cache=True)
    assert _key(again) == _key(uncached)
    assert len(list((tmp_path / "cache" / "cpq").glob("tables-*.duckdb"))) == 1


def _saved_block_size(tree: Path) -> int:
    import duckdb

    saved = max((tree / ".cpq").glob("results-*.duckdb"), key=lambda path: path.stat().st_mtime_ns)
    with duckdb.connect(str(saved), read_only=True) as con:
        (block_size,) = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()
    return int(block_size)


def test_a_large_trees_results_file_has_small_blocks_too(tree: Path, tmp_path: Path, monkeypatch) -> None:
    """DuckDB gives each table a block of its own: with its 256 KiB blocks, NumPy's results took
    112 MB instead of 68, which every edit copies, checks and seals again."""
    from cpq.pipeline.cache import facade

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(facade, "SMALL_TREE_BYTES", 0)  # every tree is a large one
    result = assess(tree, use_cache=True, keep_database=False)
    assert result.how == "evaluated"
    assert not list((tmp_path / "cache").glob("cpq/tables-*.duckdb"))  # made, not copied
    assert _saved_block_size(tree) == facade.SMALL_BLOCK_SIZE
    assert _key(assess(tree, use_cache=True, keep_database=False)) == _key(result)


def test_a_very_large_trees_results_file_has_duckdbs_own_blocks(
    tree: Path, tmp_path: Path, monkeypatch
) -> None:
    """From LARGE_TREE_BYTES of source, the results are so large that the 40 MB larger blocks
    cost is a small part of them, and they load and checkpoint faster; an edit updates them."""
    from cpq.pipeline.cache import facade

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(facade, "SMALL_TREE_BYTES", 0)
    monkeypatch.setattr(facade, "LARGE_TREE_BYTES", 0)  # every tree is a very large one
    uncached = assess(tree, use_cache=False)
    result = assess(tree, use_cache=True, keep_database=False)
    assert result.how == "evaluated" and _key(result) == _key(uncached)
    assert _saved_block_size(tree) == facade.LARGE_BLOCK_SIZE
    target = tree / "wave_equation.py"
    target.write_text(target.read_text() + "\n\ndef added(a):\n    for i in range(3):\n        a[i] = 0\n")
    updated = assess(tree, use_cache=True, keep_database=False)
    assert updated.how == "saved results updated"
    assert _key(updated) == _key(assess(tree, use_cache=False))
    assert _saved_block_size(tree) == facade.LARGE_BLOCK_SIZE


def _results_file_setting(folder: Path, name: str) -> str:
    """DuckDB's setting `name` on a connection to a results file in `folder`."""
    from cpq.engine.connect import connect
    from cpq.pipeline.run import limits

    con = connect(folder / "results.duckdb", limits=limits(folder / "results.duckdb"))
    try:
        return str(con.execute(f"SELECT current_setting('{name}')").fetchone()[0])
    finally:
        con.close()


def test_results_files_are_checkpointed_when_saved_not_every_16_mb_of_log(tmp_path: Path) -> None:
    """DuckDB checkpoints a file at every 16 MB of write-ahead log by default: loading SciPy's
    and Astropy's facts and evaluating the rules did it dozens of times, each compressing the
    tables' last row groups again.  A results file's connection waits for CHECKPOINT_LOG;
    an in-memory database has no log."""
    import duckdb

    from cpq.pipeline.run import CHECKPOINT_LOG, limits

    setting = "SELECT current_setting('checkpoint_threshold')"
    threshold = _results_file_setting(tmp_path, "checkpoint_threshold")
    with duckdb.connect(":memory:", config={"checkpoint_threshold": CHECKPOINT_LOG}) as plain:
        assert threshold == plain.execute(setting).fetchone()[0]
    with duckdb.connect(":memory:") as plain:
        assert threshold != plain.execute(setting).fetchone()[0]
    assert limits(None).checkpoint_log is None


def test_the_caches_files_do_not_wait_for_the_disk_at_each_commit_other_databases_do(tmp_path: Path) -> None:
    """A cold run on SciPy + Astropy commits some 580 times to its results file, each waiting
    on an fdatasync (0.8 s in all).  The caches' files are sealed and checked against their
    seals before use, so they are not synced at each commit; a database cpq makes for no cache
    (a plain Database at a path) keeps DuckDB's syncing."""
    import duckdb

    from cpq.engine import Database
    from cpq.rules.program import load_program

    probe = duckdb.connect(":memory:")
    try:
        default = probe.execute("SELECT current_setting('fsync_mode')").fetchone()[0]
    except duckdb.Error:
        pytest.skip("this DuckDB has no fsync_mode: it syncs every commit")
    finally:
        probe.close()

    def mode(con: duckdb.DuckDBPyConnection) -> str:
        return con.execute("SELECT current_setting('fsync_mode')").fetchone()[0]

    assert _results_file_setting(tmp_path, "fsync_mode") == "NONE" != default
    (tmp_path / "store").mkdir()
    store, note = open_store(tmp_path / "store", "stamp")
    assert store is not None, note
    try:
        assert mode(store.con) == "NONE"
    finally:
        store.close()
    with Database(load_program(), tmp_path / "plain.duckdb") as plain:
        assert mode(plain.con) == default


def test_the_user_cache_keeps_the_most_recently_used_entries(tmp_path: Path, monkeypatch) -> None:
    import os

    from cpq.pipeline.cache import user_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "cpq"
    folder.mkdir(mode=0o700)
    for age in range(12):
        entry = folder / f"tables-{age:02d}.duckdb"
        entry.write_bytes(b"x")
        os.utime(entry, (1_000_000 - age, 1_000_000 - age))
    (folder / "program-00.pickle").write_bytes(b"x")
    user_cache._mark_used(folder / "tables-11.duckdb")  # the oldest, used just now
    user_cache._prune(folder, "tables-*.duckdb")
    kept = sorted(p.name for p in folder.glob("tables-*.duckdb"))
    assert kept == [f"tables-{age:02d}.duckdb" for age in (0, 1, 2, 3, 4, 5, 6, 11)]
    assert (folder / "program-00.pickle").exists()


def test_a_program_parsed_by_other_engine_code_is_parsed_again(tmp_path: Path, monkeypatch) -> None:
    from cpq.pipeline.cache import keys
    from cpq.rules import program

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for stamp in ("engine-a", "engine-b", "engine-a"):
        monkeypatch.setattr(keys, "engine_stamp", lambda stamp=stamp: stamp)
        program._program_from_joined.cache_clear()
        program.load_program()
    assert len(list((tmp_path / "cpq").glob("program-*.pickle"))) == 2
    program._program_from_joined.cache_clear()


def test_without_keep_database_the_saved_results_are_not_reopened(tree: Path) -> None:
    """`cpq assess` reads everything while the evaluated database is open; reopening the saved
    file is for why and query."""
    kept = assess(tree, use_cache=True)
    shutil.rmtree(tree / ".cpq")
    lean = assess(tree, use_cache=True, keep_database=False)
    assert lean.db is None and lean.how == "evaluated"
    assert _key(lean) == _key(kept) and lean.verdict == kept.verdict
    assert lean.audit_notes == kept.audit_notes and lean.partial == kept.partial
    assert lean.fact_count == kept.fact_count and lean.lines == kept.lines
    again = assess(tree, use_cache=True)  # the lean run saved its results
    assert again.how == REUSED and again.db is not None and _key(again) == _key(kept)
    _close(again)
    _close(kept)


def test_a_small_write_ahead_log_is_left_for_the_next_run_to_replay(tree: Path, monkeypatch) -> None:
    """Checkpointing the store rewrites every file's entry; an edit adds one. Below
    WAL_KEPT_BYTES the log stays (sealed with the store), and the next run reads its entries
    like any other."""
    from cpq.pipeline.cache import facts_store

    wal = tree / ".cpq" / (FACTS_FILE + ".wal")
    assess(tree, use_cache=True, keep_database=False)
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "\nextra_name = 1\n")
    edited = assess(tree, use_cache=True, keep_database=False)
    assert wal.exists() and 0 < wal.stat().st_size < facts_store.WAL_KEPT_BYTES
    for saved in (tree / ".cpq").glob("results-*.duckdb*"):
        saved.unlink()
    again = assess(tree, use_cache=True, keep_database=False)
    assert again.cache_hits == 4 and _key(again) == _key(edited)
    monkeypatch.setattr(facts_store, "WAL_KEPT_BYTES", 0)
    path.write_text(path.read_text() + "\nmore = 2\n")
    assess(tree, use_cache=True, keep_database=False)
    assert not wal.exists()  # checkpointed as it closed
    fresh = assess(tree, use_cache=False)
    assert _key(assess(tree, use_cache=True, keep_database=False)) == _key(fresh)


def test_a_store_of_another_cpq_version_is_replaced_without_a_tamper_warning(tmp_path: Path) -> None:
    """Upgrading cpq changes the extractor stamp the store is sealed under: the old store is
    made anew quietly, while a store whose bytes changed under the same stamp is reported."""
    (tmp_path / ".cpq").mkdir()
    store, note = open_store(tmp_path / ".cpq", "older-version")
    assert store is not None and note is None
    assert store.close() is None
    store, note = open_store(tmp_path / ".cpq", extractor_stamp())
    assert store is not None and note is None
    assert store.close() is None
    with open(tmp_path / ".cpq" / FACTS_FILE, "ab") as file:
        file.write(b"\0")
    store, note = open_store(tmp_path / ".cpq", extractor_stamp())
    assert store is not None and note is not None and "does not match its seal" in note
    store.close()


def test_results_saved_later_are_saved_once_the_caller_waits(tree: Path) -> None:
    """`cpq assess` makes its report while the results are saved: by the time it waits for
    them (before it ends), the next run finds them, after an update as after a fresh run."""
    first = assess(tree, use_cache=True, keep_database=False, save_later=True)
    assert first.saving is not None
    first.wait_saved()
    assert first.saving is None
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "edited_here = 1\n")
    edited = assess(tree, use_cache=True, keep_database=False, save_later=True)
    assert edited.how == UPDATED
    edited.wait_saved()
    again = assess(tree, use_cache=True)
    assert again.how == REUSED and _key(again) == _key(edited)
    _close(again)


def test_an_update_writes_the_files_layout_before_its_results_are_saved(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update writes the layout of its files (which the next run plans its update from)
    as soon as it is done, not in the saving thread, where it waited on the report's Python;
    a fresh run writes it when it saves.  The next run finds the layout written."""
    import threading

    from cpq.pipeline.cache import results

    written: list[tuple[str, dict]] = []
    original = results.write_layout

    def recording(db, layout) -> None:  # type: ignore[no-untyped-def]
        written.append((threading.current_thread().name, dict(layout)))
        original(db, layout)

    monkeypatch.setattr(results, "write_layout", recording)
    assess(tree, use_cache=True, keep_database=False, save_later=True).wait_saved()
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "edited_here = 1\n")
    edited = assess(tree, use_cache=True, keep_database=False, save_later=True)
    assert edited.how == UPDATED
    edited.wait_saved()
    assert [thread for thread, _ in written] == ["cpq-saving", threading.main_thread().name]
    again = assess(tree, use_cache=True)
    assert again.how == REUSED and _key(again) == _key(edited)
    assert again.db is not None and results.read_layout(again.db) == written[-1][1]
    _close(again)


def test_a_layout_that_cannot_be_written_leaves_the_results_unsaved_never_the_run_failed(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk may fail the write of the files' layout: a fresh run then says it cannot
    save its results and reports all the same; an update is given up and evaluated afresh."""
    import threading

    import duckdb

    from cpq.pipeline.cache import results

    ctx = Context.from_options(elements="20M")
    expected = _key(assess(tree, ctx, use_cache=False))

    tried: list[str] = []

    def full_disk(db, layout) -> None:  # type: ignore[no-untyped-def]
        tried.append(threading.current_thread().name)
        raise duckdb.IOException("No space left on device")

    warnings: list[str] = []
    with monkeypatch.context() as patched:
        patched.setattr(results, "write_layout", full_disk)
        fresh = assess(tree, ctx, use_cache=True, keep_database=False, save_later=True, warn=warnings.append)
        fresh.wait_saved()
    assert fresh.how == "evaluated" and _key(fresh) == expected
    assert any("cannot save the results (No space left on device)" in w for w in warnings)
    assert not list((tree / ".cpq").glob(f"{results.PREFIX}*{results.SUFFIX}"))

    assess(tree, ctx, use_cache=True, keep_database=False, save_later=True).wait_saved()
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "edited_here = 1\n")
    expected = _key(assess(tree, ctx, use_cache=False))
    with monkeypatch.context() as patched:
        patched.setattr(results, "write_layout", full_disk)
        edited = assess(tree, ctx, use_cache=True, keep_database=False, save_later=True, warn=warnings.append)
        edited.wait_saved()
    assert edited.how == "evaluated" and _key(edited) == expected
    # The update's own write failed (at once, in the run's thread), then the fresh run's save.
    assert tried == ["cpq-saving", threading.main_thread().name, "cpq-saving"]


def test_the_results_are_read_back_at_once_before_they_are_saved(tree: Path) -> None:
    """`cpq assess` reads what it reports from the results at once, then saves them while it
    makes the report: a relation read back but not read at once is an internal error, never a
    read of a database being checkpointed."""
    from cpq.pipeline.assessment import ResultRows

    result = assess(tree, use_cache=True)
    read = ResultRows(result.db, report=False)
    assert read.rows("source_file") and read.fact_count == result.fact_count
    with pytest.raises(RuntimeError, match="'finding' is read back but was not read at once"):
        read.rows("finding")
    assert ResultRows(result.db, report=True).rows("finding") == result.db.rows("finding")
    _close(result)


def test_a_failure_while_saving_later_reaches_the_caller_and_frees_the_store(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cpq.pipeline.cache.facade import Cache

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug while saving")

    monkeypatch.setattr(Cache, "keep", broken)
    result = assess(tree, use_cache=True, keep_database=False, save_later=True)
    with pytest.raises(RuntimeError, match="a bug while saving"):
        result.wait_saved()
    monkeypatch.undo()
    store, note = open_store(tree / ".cpq", extractor_stamp())  # closed, sealed and unlocked
    assert store is not None and note is None
    store.close()


def test_an_update_whose_fact_store_is_damaged_rebuilds_it_and_answers_the_same(tree: Path) -> None:
    """An update opens the fact store while it copies the saved results: a store that fails
    its check is made anew there too, with one line that says so."""
    _close(assess(tree, use_cache=True))
    (tree / ".cpq" / FACTS_FILE).write_bytes(b"this is not a duckdb file" * 100)
    path = tree / "particle_loop.py"
    path.write_text(path.read_text() + "edited_here = 2\n")
    lines: list[str] = []
    edited = assess(tree, use_cache=True, warn=lines.append)
    assert edited.how == UPDATED
    assert lines == [f"cache: {FACTS_FILE} does not match its seal: made anew"]
    assert _key(edited) == _key(assess(tree, use_cache=False))
    _close(edited)


def test_an_update_while_another_run_holds_the_store_evaluates_in_memory(tree: Path) -> None:
    _close(assess(tree, use_cache=True))
    path = tree / "particle_loop.py"
    path.write_text(path.read_text() + "edited_here = 3\n")
    other, _ = open_store(tree / ".cpq", extractor_stamp())  # another run holds the lock
    assert other is not None
    try:
        lines: list[str] = []
        edited = assess(tree, use_cache=True, warn=lines.append)
    finally:
        other.close()
    assert edited.how == "evaluated" and len(lines) == 1 and "without the fact store" in lines[0]
    assert _key(edited) == _key(assess(tree, use_cache=False))
