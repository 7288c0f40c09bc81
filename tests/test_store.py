"""The .cpq/ fact store: same findings cold, warm and without it; edits, removals, damage."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cpq.assessment import assess
from cpq.context import Context
from cpq.store import FACTS_FILE, open_store


def _key(result) -> list[tuple]:
    return [(f.code, f.file, f.line, f.function, f.hot, f.counts) for f in result.findings]


def test_same_findings_cold_warm_and_without_cache(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    cold = assess(tree, ctx, use_cache=True)
    assert cold.cache_hits == 0 and not cold.reused_results
    assert (tree / ".cpq" / FACTS_FILE).exists()
    warm = assess(tree, ctx, use_cache=True)
    assert warm.reused_results
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
    assert not edited.reused_results
    assert edited.cache_hits == 3
    assert _key(edited) == _key(assess(tree, ctx, use_cache=False))


def _close(result) -> None:
    result.db.close()  # as the next process would find the store


def test_an_edit_that_changes_no_fact_reuses_the_results(tree: Path) -> None:
    ctx = Context.from_options(elements="20M")
    first = assess(tree, ctx, use_cache=True)
    _close(first)
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "# a comment at the end changes no fact\n\n")
    edited = assess(tree, ctx, use_cache=True)
    assert edited.reused_results
    assert _key(edited) == _key(first)
    assert edited.lines == first.lines + 2  # counted from the sources, not the saved run
    _close(edited)
    # The saved run now carries the new line count, for `cpq query source_file` too.
    warm = assess(tree, ctx, use_cache=True)
    assert warm.reused_results
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
    assert not moved.reused_results
    assert _key(moved) == _key(assess(tree, ctx, use_cache=False))
    _close(moved)
    target = next(f for f in moved.findings if f.file == "sync_in_loop.py" and f.kind == "BLOCKS")
    lines = path.read_text().splitlines()
    lines[target.line - 1] += f"  # cpq: ignore[{target.code}] -- measured, fine"
    path.write_text("\n".join(lines) + "\n")
    suppressed = assess(tree, ctx, use_cache=True)
    assert not suppressed.reused_results
    assert _key(suppressed) == _key(assess(tree, ctx, use_cache=False))
    assert any(f.suppressed for f in suppressed.findings)


def test_rules_that_read_line_counts_get_no_early_cutoff(tree: Path, tmp_path: Path) -> None:
    from cpq.assessment import load_program, reads_line_counts, rules_text

    assert not reads_line_counts(load_program())
    rules = tmp_path / "rules.dl"
    rules.write_text(
        rules_text() + "\n.decl long_file(f: symbol)\n.output long_file\n"
        "long_file(F) :- source_file(F, _, N), N > 40.\n"
    )
    assert reads_line_counts(load_program(rules))
    first = assess(tree, rules_path=rules, use_cache=True)
    _close(first)
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "#\n" * 3)
    again = assess(tree, rules_path=rules, use_cache=True)
    assert not again.reused_results


def test_other_context_does_not_reuse_results(tree: Path) -> None:
    assess(tree, Context.from_options(elements="20M"), use_cache=True)
    other = assess(tree, Context.from_options(elements="20M", gpus=4), use_cache=True)
    assert not other.reused_results
    assert other.cache_hits == 4  # the facts are still reused


def test_removed_files_leave_the_store(tree: Path) -> None:
    assess(tree, use_cache=True)
    (tree / "refactor_only.py").unlink()
    result = assess(tree, use_cache=True)
    assert "refactor_only.py" not in result.files
    store = open_store(tree / ".cpq")
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
    assert assess(tree, use_cache=True).reused_results


def test_unwritable_cache_dir_falls_back_to_no_cache(tree: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    result = assess(tree, use_cache=True, cache_dir=blocker / "cache")
    assert result.findings and not result.reused_results


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
    assert "(saved results reused, 1 changed file(s) parsed: same facts)" in verbose_line()
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
    assert not first.reused_results and first.cache_hits == 0
    _close(first)
    again = assess(tree, use_cache=True)
    assert again.reused_results and _key(again) == _key(first)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", "1GB"), ("4GB", "4GB"), ("512MiB", "512MiB"), ("lots", "1GB"), ("1GB; DROP", "1GB")],
)
def test_memory_limit_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    from cpq.assessment import memory_limit

    monkeypatch.setenv("CPQ_MEMORY_LIMIT", value)
    assert memory_limit() == expected


def test_after_a_code_edit_unchanged_files_are_copied_with_the_ids_of_a_fresh_run(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cpq.reuse as reuse
    import cpq.update as update
    from cpq.facts.schema import INPUT_RELATIONS

    copies: list[int] = []
    real_copy = reuse.copy_facts

    def counting_copy(db, path, moves, layout):  # type: ignore[no-untyped-def]
        copies.append(len(moves))
        return real_copy(db, path, moves, layout)

    monkeypatch.setattr(reuse, "copy_facts", counting_copy)
    monkeypatch.setattr(update, "plan_update", lambda *args: None)  # the path of many edits
    ctx = Context.from_options(elements="20M")
    _close(assess(tree, ctx, use_cache=True))
    # An edit early in discovery order, so the ids of every later file move.
    path = tree / "particle_loop.py"
    path.write_text(path.read_text() + "\ndef extra(n):\n    return [i * i for i in range(n)]\n")
    edited = assess(tree, ctx, use_cache=True)
    assert copies == [3] and edited.cache_hits == 3 and not edited.reused_results
    fresh = assess(tree, ctx, use_cache=False)
    for name in INPUT_RELATIONS:
        assert edited.db.rows(name) == fresh.db.rows(name), name
    assert _key(edited) == _key(fresh)
    assert edited.fact_count == fresh.fact_count
    _close(edited)
    # And the run after that starts from the edited run's results.
    path.write_text(path.read_text() + "again = 2\n")
    again = assess(tree, ctx, use_cache=True)
    assert copies == [3, 3]
    assert _key(again) == _key(assess(tree, ctx, use_cache=False))


def test_when_the_previous_results_cannot_be_copied_the_store_gives_the_facts(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cpq.reuse as reuse
    import cpq.update as update

    def scattered(db, path, moves, layout):  # type: ignore[no-untyped-def]
        raise reuse.TooScattered(99)

    monkeypatch.setattr(update, "plan_update", lambda *args: None)  # the path of many edits
    ctx = Context.from_options(elements="20M")
    _close(assess(tree, ctx, use_cache=True))
    monkeypatch.setattr(reuse, "copy_facts", scattered)
    path = tree / "particle_loop.py"
    path.write_text(path.read_text() + "\nanother = 1\n")
    edited = assess(tree, ctx, use_cache=True)
    fresh = assess(tree, ctx, use_cache=False)
    assert _key(edited) == _key(fresh) and edited.fact_count == fresh.fact_count
    assert edited.db.rows("node") == fresh.db.rows("node")


def test_packed_facts_round_trip_with_zstd_or_zlib_and_reject_damage(monkeypatch) -> None:
    """A file's facts travel and are stored compressed: zstd, or zlib where pyarrow lacks it;
    a damaged entry is a ValueError (the file is then extracted again), never a crash."""
    import os

    import cpq.facts.store as packing

    rows = {"source_file": [("a.py", "a", 3)], "node": [(0, "module", 0, 1), (1, "call", 0, 2)]}
    codecs = {}
    for codec in ("zstd", "zlib"):
        if codec == "zlib":
            monkeypatch.setattr(packing, "_zstd", lambda: None)
        packed = packing.pack_facts(rows, 2, 3)
        codecs[codec] = packed[packing.FACTS_SHA_BYTES : packing.FACTS_SHA_BYTES + 1]
        columns, node_count, lines = packing.unpack_facts(packed)
        assert (node_count, lines) == (2, 3)
        assert columns["node"][1] == ["module", "call"]
        assert packing.facts_sha(packed) == packing.facts_sha(packing.pack_facts(rows, 2, 99))
        header = packing.FACTS_SHA_BYTES + 9
        for damaged in (
            packed[:12],
            packed[:-2],
            packed[:header] + os.urandom(len(packed) - header),
            packed[: packing.FACTS_SHA_BYTES] + b"?" + packed[packing.FACTS_SHA_BYTES + 1 :],
            packed[: packing.FACTS_SHA_BYTES + 1] + b"\xff" * 8 + packed[header:],
        ):
            with pytest.raises(ValueError):
                packing.unpack_facts(damaged)
    assert codecs == {"zstd": b"Z", "zlib": b"D"}


def test_a_small_run_imports_neither_numpy_nor_pyarrow(tree: Path) -> None:
    """They serve large batches of facts only: a small tree's facts go to DuckDB as lists,
    and saved results are read without them (importing them is a sixth of such a run)."""
    import subprocess
    import sys

    script = (
        "import sys; from pathlib import Path; from cpq.assessment import assess; "
        f"r = assess(Path({str(tree)!r}), use_cache=True); "
        "print(r.reused_results, 'pyarrow' in sys.modules, 'numpy' in sys.modules)"
    )

    def run() -> str:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert run() == ["False", "False", "False"]  # cold: facts extracted, stored and loaded
    assert run() == ["True", "False", "False"]  # warm: saved results reused


def test_a_small_trees_saved_results_take_little_room(tree: Path) -> None:
    """DuckDB gives every table a block of its own: with its default 256 KiB blocks, the
    results of these four files would take some 30 MB of the user's disk."""
    result = assess(tree, use_cache=True)
    assert result.findings
    saved = list((tree / ".cpq").glob("results-*.duckdb"))
    assert len(saved) == 1
    assert saved[0].stat().st_size < 6_000_000
    again = assess(tree, use_cache=True)
    assert again.reused_results and again.findings == result.findings


@pytest.mark.parametrize("size", [100, 300_000])
def test_store_entries_round_trip_small_and_large_batches(tmp_path: Path, size: int) -> None:
    """Few bytes of entries go to DuckDB as lists, many as Arrow: both read back whole."""
    import os

    store = open_store(tmp_path / ".cpq")
    assert store is not None
    entries = {f"f{i}.py": bytes(20) + os.urandom(size) for i in range(5)}
    for path, data in entries.items():
        store.put(path, f"sha-{path}", data)
    store.write_pending()
    store.put("f0.py", "sha-new", b"x" * 30)  # replaces the file's entry
    store.flush(set(entries))
    assert not store.broken
    assert store.get_many([(p, f"sha-{p}") for p in entries if p != "f0.py"]) == {
        p: d for p, d in entries.items() if p != "f0.py"
    }
    assert store.get_many([("f0.py", "sha-f0.py"), ("f0.py", "sha-new")]) == {"f0.py": b"x" * 30}
    store.close()


def test_a_small_trees_results_file_starts_as_a_copy_of_the_tables_template(
    tree: Path, tmp_path: Path, monkeypatch
) -> None:
    """Creating some 200 tables is a tenth of a small run: the first run of a program keeps a
    template beside the program cache, later ones copy it; a damaged template is replaced."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    uncached = assess(tree, use_cache=False)
    first = assess(tree, use_cache=True)
    templates = list((tmp_path / "cache" / "cpq").glob("tables-*.duckdb"))
    assert len(templates) == 1
    shutil.rmtree(tree / ".cpq")
    copied = assess(tree, use_cache=True)
    assert _key(uncached) == _key(first) == _key(copied) and not copied.reused_results
    assert copied.verdict == uncached.verdict
    templates[0].write_bytes(b"not a database" * 100)
    shutil.rmtree(tree / ".cpq")
    damaged = assess(tree, use_cache=True)
    assert _key(damaged) == _key(uncached)
    assert list((tmp_path / "cache" / "cpq").glob("tables-*")) == []  # removed, not trusted
    shutil.rmtree(tree / ".cpq")
    again = assess(tree, use_cache=True)  # the next new results file makes a new template
    assert _key(again) == _key(uncached)
    assert len(list((tmp_path / "cache" / "cpq").glob("tables-*.duckdb"))) == 1


def test_the_program_cache_keeps_the_most_recently_used_entries(tmp_path: Path, monkeypatch) -> None:
    import os

    from cpq import assessment

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "cpq"
    folder.mkdir()
    for age in range(12):
        entry = folder / f"tables-{age:02d}.duckdb"
        entry.write_bytes(b"x")
        os.utime(entry, (1_000_000 - age, 1_000_000 - age))
    (folder / "program-00.pickle").write_bytes(b"x")
    assessment._mark_used(folder / "tables-11.duckdb")  # the oldest, used just now
    assessment._prune_program_cache("tables-*.duckdb")
    kept = sorted(p.name for p in folder.glob("tables-*.duckdb"))
    assert kept == [f"tables-{age:02d}.duckdb" for age in (0, 1, 2, 3, 4, 5, 6, 11)]
    assert (folder / "program-00.pickle").exists()


def test_a_program_parsed_by_other_engine_code_is_parsed_again(tmp_path: Path, monkeypatch) -> None:
    from cpq import assessment

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for stamp in ("engine-a", "engine-b", "engine-a"):
        monkeypatch.setattr(assessment, "engine_stamp", lambda stamp=stamp: stamp)
        assessment._program_from_text.cache_clear()
        assessment.load_program()
    assert len(list((tmp_path / "cpq").glob("program-*.pickle"))) == 2
    assessment._program_from_text.cache_clear()


def test_without_keep_database_the_saved_results_are_not_reopened(tree: Path) -> None:
    """`cpq assess` reads everything while the evaluated database is open; reopening the saved
    file is for why and query."""
    kept = assess(tree, use_cache=True)
    shutil.rmtree(tree / ".cpq")
    lean = assess(tree, use_cache=True, keep_database=False)
    assert lean.db is None and not lean.reused_results
    assert _key(lean) == _key(kept) and lean.verdict == kept.verdict
    assert lean.audit_notes == kept.audit_notes and lean.partial == kept.partial
    assert lean.fact_count == kept.fact_count and lean.lines == kept.lines
    again = assess(tree, use_cache=True)  # the lean run saved its results
    assert again.reused_results and again.db is not None and _key(again) == _key(kept)
    _close(again)
    _close(kept)


def test_a_small_write_ahead_log_is_left_for_the_next_run_to_replay(tree: Path, monkeypatch) -> None:
    """Checkpointing the store rewrites every file's entry; an edit adds one. Below
    WAL_KEPT_BYTES the log stays, and the next run reads its entries like any other."""
    from cpq import store as store_module

    wal = tree / ".cpq" / (FACTS_FILE + ".wal")
    assess(tree, use_cache=True, keep_database=False)
    path = tree / "wave_equation.py"
    path.write_text(path.read_text() + "\nextra_name = 1\n")
    edited = assess(tree, use_cache=True, keep_database=False)
    assert wal.exists() and 0 < wal.stat().st_size < store_module.WAL_KEPT_BYTES
    again = assess(tree, use_cache=True, keep_database=False)
    assert again.reused_results and _key(again) == _key(edited)
    monkeypatch.setattr(store_module, "WAL_KEPT_BYTES", 0)
    path.write_text(path.read_text() + "\nmore = 2\n")
    assess(tree, use_cache=True, keep_database=False)
    assert not wal.exists()  # checkpointed as it closed
    fresh = assess(tree, use_cache=False)
    assert _key(assess(tree, use_cache=True, keep_database=False)) == _key(fresh)
