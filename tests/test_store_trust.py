"""Attacks on cpq's caches: whoever can write `.cpq/` or the user cache can neither use them
against the user (read or write a file elsewhere, run code, hang or exhaust the run) nor change
an answer.

Each attack runs `cpq assess` twice, in a subprocess with its own key and user cache, on a tree
of example programs beside an `outside/` folder (a secret and a victim file).  Each run must
exit 0 without a traceback, report what a `--no-cache` run reports, never show the secret, say
at most a few `cpq: cache:` lines, and leave everything outside the tree as it was.

The seal's key is the trust boundary: an attacker holding it can make cpq believe facts that
lie (a sealed entry is taken as what cpq extracted, a sealed template as the program's empty
tables), so no test asks for more.  The re-sealed variants below check the defences that hold
even then: no foreign SQL object is read, no file outside is opened, no entry is unpacked
without a bound from its file's size, no symbol column holds anything but strings.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import pickle
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pytest
from conftest import EXAMPLES

from cpq.engine.connect import foreign_objects
from cpq.facts import SourceText
from cpq.facts.packing import _HEADER, max_unpacked, unpack_facts
from cpq.facts.parallel import extract_all
from cpq.pipeline.cache import facts_store, results, trust

EXAMPLE_FILES = ["particle_loop.py", "sync_in_loop.py", "wave_equation.py", "refactor_only.py"]
SECRET = "cpq-test-secret-4f9a1c7e"
VICTIM = "the victim's own words, never to change\n"
TIMEOUT = 120  # a run takes about 2 s: this means a hang
CACHE_LINE = "cpq: cache:"
QUERY_COUNT = r"cpq: \d+ rows?"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    max_rss_kb: int


@dataclass
class Lab:
    """A tree of examples in `base`, beside `outside/`; the runs' homes under `xdg`."""

    base: Path
    tree: Path = field(init=False)
    outside: Path = field(init=False)
    xdg: Path = field(init=False)
    _reference: dict | None = None

    def __post_init__(self) -> None:
        self.tree = self.base / "tree"
        self.outside = self.base / "outside"
        self.xdg = self.base / "xdg"
        self.tree.mkdir()
        for name in EXAMPLE_FILES:
            shutil.copy(EXAMPLES / name, self.tree / name)
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(SECRET + "\n")
        (self.outside / "victim.txt").write_text(VICTIM)
        for home in ("state", "cache", "home", "ref/state", "ref/cache", "ref/home"):
            (self.xdg / home).mkdir(parents=True)

    @property
    def store(self) -> Path:
        return self.tree / ".cpq"

    @property
    def user_cache(self) -> Path:
        return self.xdg / "cache" / "cpq"

    def env(self, homes: Path | None = None) -> dict[str, str]:
        homes = homes or self.xdg
        env = {k: v for k, v in os.environ.items() if k != trust.KEY_ENV}
        env.update(
            {
                "XDG_STATE_HOME": str(homes / "state"),
                "XDG_CACHE_HOME": str(homes / "cache"),
                "HOME": str(homes / "home"),
                "NO_COLOR": "1",
                "COLUMNS": "200",
                "TERM": "dumb",
                "PYTHONIOENCODING": "utf-8",
            }
        )
        return env

    def cpq(
        self,
        *args: object,
        homes: Path | None = None,
        preexec: Callable[[], None] | None = None,
        timeout: float = TIMEOUT,
    ) -> Run:
        return spawn(
            [sys.executable, "-m", "cpq", *map(str, args)],
            self.env(homes),
            cwd=self.xdg / "home",
            preexec=preexec,
            timeout=timeout,
        )

    def assess(self, *extra: object, **kwargs: object) -> Run:
        return self.cpq("assess", self.tree, "--format", "json", *extra, **kwargs)  # type: ignore[arg-type]

    def reference(self) -> dict:
        """The report of a `--no-cache` run, with homes of its own (never the attacked ones)."""
        if self._reference is None:
            run = self.assess("--no-cache", homes=self.xdg / "ref")
            assert_clean(run)
            self._reference = report_of(run)
        return self._reference

    def forget_reference(self) -> None:
        self._reference = None

    def seed(self) -> None:
        """A first, honest run: the store and the user cache as cpq leaves them."""
        run = self.assess()
        assert_clean(run)
        assert report_of(run) == self.reference()
        assert self.results_file().exists()

    def results_file(self) -> Path:
        (found,) = sorted(self.store.glob(f"{results.PREFIX}*{results.SUFFIX}"))
        return found

    def snapshot(self) -> dict[str, tuple]:
        """Everything beside the tree (the tree itself and the runs' homes aside): kind,
        content and modification time, links not followed."""
        seen: dict[str, tuple] = {".": ("dir", os.lstat(self.base).st_mtime_ns)}
        for dirpath, dirnames, filenames in os.walk(self.base):
            here = Path(dirpath)
            if here == self.base:
                dirnames[:] = [d for d in dirnames if d not in ("tree", "xdg")]
            for name in dirnames + filenames:
                path = here / name
                info = os.lstat(path)
                rel = str(path.relative_to(self.base))
                if stat.S_ISREG(info.st_mode):
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                    seen[rel] = ("file", digest, info.st_mtime_ns, info.st_mode)
                elif stat.S_ISLNK(info.st_mode):
                    seen[rel] = ("link", os.readlink(path))
                elif stat.S_ISDIR(info.st_mode):
                    seen[rel] = ("dir", info.st_mtime_ns, info.st_mode)
                else:
                    seen[rel] = ("other", info.st_mode, info.st_mtime_ns)
        return seen


@pytest.fixture()
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path)


# Starts the command and writes its peak memory (its own and its workers') to the file named
# first.  A child's peak counts the memory of the process it was forked from (Linux keeps the
# high-water mark across exec): forked from this small launcher, not from the test process
# (which holds bombs), it measures the run alone.
_LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as file:
    file.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def spawn(
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    preexec: Callable[[], None] | None = None,
    timeout: float = TIMEOUT,
) -> Run:
    """Run `args` in a process group of its own (killed whole on a timeout: a hang fails the
    test, never the suite), and measure its peak memory."""
    with tempfile.TemporaryDirectory() as scratch:
        out_path, err_path, rss_path = (Path(scratch) / name for name in ("out", "err", "rss"))
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", _LAUNCHER, str(rss_path), *args],
                stdout=out,
                stderr=err,
                env=env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=preexec,
            )
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{' '.join(args[2:])}: no answer after {timeout} s (a hang)")
            finally:
                with contextlib.suppress(ProcessLookupError):  # workers left behind, if any
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return Run(
            proc.returncode,
            out_path.read_text("utf-8", "replace"),
            err_path.read_text("utf-8", "replace"),
            int(rss_path.read_text() or 0) if rss_path.exists() else 0,
        )


def assert_clean(run: Run, cache_lines: int = 0, also: str = "") -> None:
    """Exit 0, no traceback, and on stderr at most `cache_lines` lines about the cache (and
    lines matching `also`)."""
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stderr[-4000:]}"
    assert "Traceback" not in run.stderr + run.stdout, run.stderr[-4000:]
    lines = [
        line for line in run.stderr.splitlines() if line.strip() and not (also and re.fullmatch(also, line))
    ]
    assert all(line.startswith(CACHE_LINE) for line in lines), run.stderr[-4000:]
    assert len(lines) <= cache_lines, run.stderr[-4000:]


def report_of(run: Run) -> dict:
    report = json.loads(run.stdout)
    report.pop("stats", None)
    return report


def assert_unharmed(
    lab: Lab, runs: int = 2, cache_lines: int = 4, heals: bool = True, **kwargs: object
) -> list[Run]:
    """`runs` cached runs, each as the attack demands: the `--no-cache` report, the secret
    nowhere, at most `cache_lines` lines on stderr, nothing outside the tree changed; and when
    the store `heals`, the first run rebuilt what it could not trust: the last says nothing."""
    expected = lab.reference()
    before = lab.snapshot()
    done = []
    for _ in range(runs):
        run = lab.assess(**kwargs)
        assert_clean(run, cache_lines)
        assert SECRET not in run.stdout + run.stderr
        assert report_of(run) == expected
        assert lab.snapshot() == before
        assert (lab.outside / "victim.txt").read_text() == VICTIM
        done.append(run)
    if heals:
        assert not done[-1].stderr, done[-1].stderr
    return done


@contextlib.contextmanager
def users_key(lab: Lab) -> Iterator[None]:
    """This process signs with the key of the lab's runs (as if it had leaked)."""
    saved = {name: os.environ.get(name) for name in ("XDG_STATE_HOME", trust.KEY_ENV)}
    os.environ["XDG_STATE_HOME"] = str(lab.xdg / "state")
    os.environ.pop(trust.KEY_ENV, None)
    trust.secret_key.cache_clear()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        trust.secret_key.cache_clear()


def reseal(lab: Lab, path: Path, kind: str, label: str, parts: list[Path]) -> None:
    with users_key(lab):
        meta = {k: v for k, v in trust.read_seal(path).items() if k != "mac"}
        trust.write_seal(path, kind, label, parts, meta)
        trust.verify(path, kind, label, parts)  # the forgery is a good one


def reseal_results(lab: Lab, path: Path) -> None:
    key = trust.read_seal(path)["key"]
    reseal(lab, path, results.SEAL_KIND, key, [path])


def reseal_facts(lab: Lab) -> None:
    path = lab.store / facts_store.FACTS_FILE
    reseal(lab, path, facts_store.SEAL_KIND, _facts_stamp(lab), [path, path.with_name(path.name + ".wal")])


def _facts_stamp(lab: Lab) -> str:
    con = duckdb.connect(str(lab.store / facts_store.FACTS_FILE), read_only=True)
    try:
        (stamp,) = con.execute("SELECT DISTINCT stamp FROM file_facts").fetchone() or ("",)
    finally:
        con.close()
    return stamp


def set_entry(lab: Lab, relpath: str, data: bytes) -> None:
    """Replace the packed facts of `relpath` in the fact store (its path, key and stamp kept),
    and checkpoint (no log left beside the store)."""
    con = duckdb.connect(str(lab.store / facts_store.FACTS_FILE))
    try:
        changed = con.execute(
            "UPDATE file_facts SET data = ? WHERE path = ? RETURNING path", [data, relpath]
        ).fetchall()
        assert changed == [(relpath,)]
        con.execute("CHECKPOINT")
    finally:
        con.close()


def drop_results(lab: Lab) -> None:
    """No saved results: the next run reads the fact store."""
    for path in lab.store.glob(f"{results.PREFIX}*"):
        path.unlink()


def packed(name: str) -> bytes:
    """The packed facts of an example file, as cpq extracts them."""
    source = SourceText(name, (EXAMPLES / name).read_text(), "0" * 64)
    data = extract_all([source], {name}, None, 1)[name]
    assert isinstance(data, bytes)
    return data


def repacked(data: bytes, change: Callable[[dict], None]) -> bytes:
    """`data` (packed facts) with its columns changed by `change`, packed again with zlib."""
    columns, node_count, lines = unpack_facts(data)
    change(columns)
    payload = marshal.dumps((columns, node_count, lines))
    return _HEADER.pack(b"D", len(payload)) + zlib.compress(payload, 1)


QUERY = "finding(C, F, L, U)"


def query(lab: Lab) -> Run:
    run = lab.cpq("query", QUERY, lab.tree)
    assert_clean(run, cache_lines=4, also=QUERY_COUNT)
    assert SECRET not in run.stdout + run.stderr
    return run


# -- 1. a view in the saved results ----------------------------------------------------------


def _view_reading_the_secret(lab: Lab, path: Path, table: str = "finding") -> None:
    """The results' `table` replaced by a view of the same columns that reads the secret
    file (what a report would print, were the view read)."""
    con = duckdb.connect(str(path))
    try:
        columns = con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
            [table],
        ).fetchall()
        assert columns and ("file", "VARCHAR") in columns
        secret = _literal(str(lab.outside / "secret.txt"))
        select = ", ".join(
            f"{'content' if sql_type == 'VARCHAR' else '0'}::{sql_type} AS {_quote(name)}"
            for name, sql_type in columns
        )
        con.execute(f"DROP TABLE {_quote(table)}")
        con.execute(f"CREATE VIEW {_quote(table)} AS SELECT {select} FROM read_text({secret})")
        assert SECRET in str(con.execute(f"SELECT * FROM {_quote(table)}").fetchall())
        con.execute("CHECKPOINT")
    finally:
        con.close()


@pytest.mark.parametrize("resealed", [False, True], ids=["tampered", "resealed"])
def test_a_view_reading_a_file_elsewhere_in_the_saved_results_is_never_read(lab: Lab, resealed: bool) -> None:
    lab.seed()
    path = lab.results_file()
    _view_reading_the_secret(lab, path)
    if resealed:  # the key leaked: the view is still a foreign object, and no file may be read
        reseal_results(lab, path)
    first, _ = assert_unharmed(lab)
    assert CACHE_LINE in first.stderr


@pytest.mark.parametrize("resealed", [False, True], ids=["tampered", "resealed"])
def test_a_view_in_place_of_the_layout_is_never_read_by_an_update(lab: Lab, resealed: bool) -> None:
    """An update reads the files' layout while the rest of the copy is still being checked,
    from a table only: a view in its place is refused, and the run assesses without it."""
    lab.seed()
    path = lab.results_file()
    _view_reading_the_secret(lab, path, results.LAYOUT_TABLE)
    _edit_after_planting(lab, path, resealed)


def _edit_after_planting(lab: Lab, path: Path, resealed: bool) -> Run:
    """Reseal the saved results `path` (when the key leaked), edit a file so that the next
    run brings them up to date, and check that runs are unharmed, the first saying why it
    did not use them; returns that first run."""
    if resealed:
        reseal_results(lab, path)
    wave = lab.tree / "wave_equation.py"
    wave.write_text(wave.read_text() + "\nsteps = 10\n")
    lab.forget_reference()
    first, _ = assert_unharmed(lab)
    assert CACHE_LINE in first.stderr
    return first


def _trigger_dropping_the_findings_on(con: duckdb.DuckDBPyConnection) -> bool:
    """A trigger that empties `finding` once facts are written into `node`; False where this
    DuckDB has no triggers."""
    try:
        con.execute(
            'CREATE TRIGGER cpq_planted AFTER INSERT ON "node" FOR EACH STATEMENT DELETE FROM finding'
        )
    except duckdb.Error:
        return False
    return True


def _trigger_dropping_the_findings(path: Path) -> bool:
    """That trigger in the results file `path` (False: none could be made)."""
    con = duckdb.connect(str(path))
    try:
        made = _trigger_dropping_the_findings_on(con)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return made


def test_a_trigger_is_a_foreign_object_of_the_store_and_of_saved_results(tmp_path: Path) -> None:
    """The same check guards the fact store and the results files."""
    path = tmp_path / "planted.duckdb"
    con = duckdb.connect(str(path))
    try:
        con.execute('CREATE TABLE "node" (n BIGINT); CREATE TABLE finding (code VARCHAR)')
        assert foreign_objects(con, {"node", "finding"}) == []
        if not _trigger_dropping_the_findings_on(con):
            pytest.skip(f"DuckDB {duckdb.__version__} keeps no triggers")
        assert foreign_objects(con, {"node", "finding"}) == ["trigger on node.cpq_planted"]
    finally:
        con.close()


@pytest.mark.parametrize("resealed", [False, True], ids=["tampered", "resealed"])
def test_a_trigger_in_the_saved_results_never_fires(lab: Lab, resealed: bool) -> None:
    """An edit brings the saved results up to date, writing facts into a copy of them: a
    trigger there would change the report (DuckDB 2 keeps triggers in the file)."""
    lab.seed()
    path = lab.results_file()
    if not _trigger_dropping_the_findings(path):
        pytest.skip(f"DuckDB {duckdb.__version__} keeps no triggers")
    first = _edit_after_planting(lab, path, resealed)  # resealed: still a foreign object
    assert report_of(first)["findings"]


def test_a_resealed_view_is_refused_even_by_cpq_query(lab: Lab) -> None:
    """`cpq query` reads the saved results themselves (not a report made from them)."""
    lab.seed()
    honest = query(lab).stdout
    assert "particle_loop.py" in honest
    path = lab.results_file()
    _view_reading_the_secret(lab, path)
    reseal_results(lab, path)
    before = lab.snapshot()
    for _ in range(2):
        assert query(lab).stdout == honest
        assert lab.snapshot() == before


# -- 2. facts that lie ---------------------------------------------------------------------------


def test_an_unsealed_entry_holding_another_programs_facts_is_not_believed(lab: Lab) -> None:
    lab.seed()
    set_entry(lab, "refactor_only.py", packed("text_classifier.py"))
    drop_results(lab)
    first, _ = assert_unharmed(lab)
    assert CACHE_LINE in first.stderr


def test_a_sealed_entry_with_a_number_in_a_symbol_column_is_extracted_again(lab: Lab) -> None:
    """With the key an entry can say anything of its file; one that is not even facts (a number
    where a name goes) is refused by unpack_facts and the file is extracted again."""
    lab.seed()
    real = packed("refactor_only.py")

    def number_for_a_name(columns: dict) -> None:
        columns["source_file"][0] = [12345]

    set_entry(lab, "refactor_only.py", repacked(real, number_for_a_name))
    drop_results(lab)
    reseal_facts(lab)
    assert_unharmed(lab)


# -- 3. links ------------------------------------------------------------------------------------


def _link(path: Path, target: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.symlink_to(target)


def test_the_saved_results_as_a_link_to_a_file_elsewhere(lab: Lab) -> None:
    lab.seed()
    _link(lab.results_file(), lab.outside / "victim.txt")
    assert_unharmed(lab)


def test_the_saved_results_log_as_a_link_to_a_file_elsewhere(lab: Lab) -> None:
    lab.seed()
    honest = query(lab).stdout
    path = lab.results_file()
    _link(path.with_name(path.name + ".wal"), lab.outside / "victim.txt")
    assert_unharmed(lab)
    _link(path.with_name(path.name + ".wal"), lab.outside / "victim.txt")
    before = lab.snapshot()
    assert query(lab).stdout == honest
    assert lab.snapshot() == before


def test_a_planted_log_beside_the_saved_results_is_never_replayed(lab: Lab) -> None:
    """A write-ahead log made on a copy of the saved results (whose own seal it leaves alone)
    replaces their findings when DuckDB opens them: a run that makes the results anew must not
    leave it beside them, for `cpq query` and `cpq why` open them again."""
    lab.seed()
    honest = query(lab).stdout
    path = lab.results_file()
    copy = lab.xdg / "copy.duckdb"
    shutil.copy(path, copy)
    con = duckdb.connect(str(copy))
    try:
        con.execute("PRAGMA disable_checkpoint_on_shutdown")
        con.execute("DELETE FROM finding")
        con.execute(f"INSERT INTO finding VALUES ('R999', {_literal(SECRET)}, 1, 'planted', 0, 0)")
    finally:
        con.close()
    log = path.with_name(path.name + ".wal")
    planted = copy.with_name(copy.name + ".wal").read_bytes()
    log.write_bytes(planted)
    before = lab.snapshot()
    for _ in range(2):
        assert query(lab).stdout == honest
        assert lab.snapshot() == before
    log.write_bytes(planted)
    assert_unharmed(lab)
    log.write_bytes(planted)
    assert query(lab).stdout == honest


def test_results_named_folders_and_partial_files_linked_elsewhere(lab: Lab) -> None:
    lab.seed()
    stale = lab.store / f"{lab.results_file().name}.1.partial"
    _link(lab.store / "results-l", lab.outside)
    _link(lab.store / "results-0123456789abcdef0123456789abcdef.duckdb", lab.outside)
    _link(stale, lab.outside / "victim.txt")
    os.utime(stale, (1, 1), follow_symlinks=False)  # left by a run killed long ago: pruned
    assert_unharmed(lab)


@pytest.mark.parametrize(
    ("name", "target"),
    [
        (facts_store.FACTS_FILE, "victim.txt"),  # the fact store, to a file elsewhere
        (facts_store.FACTS_FILE + ".wal", "victim.txt"),  # its log
        (facts_store.LOCK_FILE, "lock-created"),  # the lock, to a missing file elsewhere
    ],
    ids=["fact-store", "fact-store-log", "lock"],
)
def test_a_store_file_as_a_link_elsewhere(lab: Lab, name: str, target: str) -> None:
    lab.seed()
    drop_results(lab)
    _link(lab.store / name, lab.outside / target)
    assert_unharmed(lab, heals=False)


def test_the_gitignore_as_a_dangling_link_elsewhere(lab: Lab) -> None:
    lab.store.mkdir()
    (lab.store / ".gitignore").symlink_to(lab.outside / "created.txt")
    assert_unharmed(lab)


def test_the_store_folder_as_a_link_to_a_folder_elsewhere(lab: Lab) -> None:
    (lab.outside / "store").mkdir()
    lab.store.symlink_to(lab.outside / "store")
    runs = assert_unharmed(lab, cache_lines=1, heals=False)
    assert all("symbolic link" in run.stderr for run in runs)
    assert not any((lab.outside / "store").iterdir())


@pytest.mark.parametrize("key", ["../../victim", "../outside/victim.txt", "/etc/passwd", "0" * 64 + "/.."])
def test_a_seal_naming_paths_elsewhere(lab: Lab, key: str) -> None:
    lab.seed()
    path = lab.results_file()
    seal = trust.seal_path(path)
    lines = seal.read_text().splitlines()
    seal.write_text("\n".join(f"key {key}" if line.startswith("key ") else line for line in lines) + "\n")
    orphan = lab.store / f"{results.PREFIX}{'f' * 32}{results.SUFFIX}{trust.SEAL_SUFFIX}"
    orphan.write_text(seal.read_text())
    assert_unharmed(lab)


# -- 4. decompression bombs ------------------------------------------------------------------------

BOMB_BYTES = 512 * 1024 * 1024  # claimed and real: within the unpacker's absolute cap of 1 GiB
PEAK_RSS_KB = 600 * 1024


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """Packed 'facts' whose header says, truthfully, 512 MiB: a zlib stream of zeros, made in
    chunks (never held whole), padded to stay within the unpacker's 1:1000 ratio check."""
    maker = zlib.compressobj(1)
    chunk = bytes(1 << 20)
    parts = [maker.compress(chunk) for _ in range(BOMB_BYTES // len(chunk))]
    stream = b"".join(parts) + maker.flush()
    stream += os.urandom(max(0, BOMB_BYTES // 900 - len(stream)))  # trailing bytes zlib ignores
    return _HEADER.pack(b"D", BOMB_BYTES) + stream


@pytest.mark.parametrize("resealed", [False, True], ids=["tampered", "resealed"])
def test_a_decompression_bomb_in_the_fact_store(lab: Lab, bomb: bytes, resealed: bool) -> None:
    lab.seed()
    baseline = lab.assess().max_rss_kb
    set_entry(lab, "particle_loop.py", bomb)
    drop_results(lab)
    if resealed:
        reseal_facts(lab)
    runs = assert_unharmed(lab)
    for run in runs:
        assert run.max_rss_kb < PEAK_RSS_KB, (run.max_rss_kb, baseline)
        assert run.max_rss_kb < baseline + 128 * 1024, (run.max_rss_kb, baseline)


def test_a_bomb_is_refused_before_it_is_unpacked(bomb: bytes) -> None:
    """The bound follows the file's size: facts are at most some 35 times the source."""
    source = (EXAMPLES / "particle_loop.py").read_text()
    assert unpack_facts(packed("particle_loop.py"), max_unpacked(len(source)))
    with pytest.raises(ValueError, match="bad size"):
        unpack_facts(bomb, max_unpacked(1000))


# -- 5. the user cache -------------------------------------------------------------------------


class _Mkdir:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (os.mkdir, (str(self.path),))


@pytest.mark.parametrize("forged_mac", [False, True], ids=["raw", "forged-mac"])
def test_a_poisoned_parsed_program_is_never_unpickled(lab: Lab, forged_mac: bool) -> None:
    lab.seed()
    marker = lab.outside / "pwned"
    poison = pickle.dumps(_Mkdir(marker))
    if forged_mac:
        poison = os.urandom(32) + poison
    programs = list(lab.user_cache.glob("program-*.pickle"))
    assert programs
    for path in programs:
        path.write_bytes(poison)
    drop_results(lab)
    assert_unharmed(lab)
    assert not marker.exists()


def test_a_row_slipped_into_the_tables_template_never_reaches_a_report(lab: Lab) -> None:
    lab.seed()
    (template,) = lab.user_cache.glob("tables-*.duckdb")
    con = duckdb.connect(str(template))
    try:
        columns = con.execute(
            "SELECT data_type FROM duckdb_columns() WHERE table_name = 'finding' ORDER BY column_index"
        ).fetchall()
        values = ", ".join(_literal(SECRET) if t == "VARCHAR" else "0" for (t,) in columns)
        con.execute(f"INSERT INTO finding VALUES ({values})")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    drop_results(lab)
    assert_unharmed(lab)


# -- 6. faults -----------------------------------------------------------------------------------


def _fault_names(lab: Lab) -> list[Path]:
    facts = lab.store / facts_store.FACTS_FILE
    return [facts, facts.with_name(facts.name + ".wal"), lab.results_file()]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["facts", "facts-log", "results"])
@pytest.mark.parametrize("what", ["fifo", "folder"])
def test_a_fifo_or_folder_in_place_of_a_store_file(lab: Lab, which: int, what: str) -> None:
    lab.seed()
    path = _fault_names(lab)[which]
    if which < 2:
        drop_results(lab)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if what == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
        (path / "inside").write_text("x")
    # A results name is renamed over unless it is a folder; the fact store's files are left
    # alone (the run goes without the store).
    assert_unharmed(lab, cache_lines=3, heals=which == 2 and what == "fifo")


def test_a_fact_store_of_random_bytes(lab: Lab) -> None:
    lab.seed()
    drop_results(lab)
    (lab.store / facts_store.FACTS_FILE).write_bytes(os.urandom(64 * 1024))
    assert_unharmed(lab)


def _full_disk(limit: int) -> Callable[[], None]:
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes beyond fail with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limited


@pytest.mark.parametrize("seeded", [False, True], ids=["first-run", "after-a-run"])
def test_a_full_disk(lab: Lab, seeded: bool) -> None:
    """No file may grow beyond 1 MB: the report (some 10 kB on stdout) fits, the results file
    (some 3 MB) does not."""
    if seeded:
        lab.seed()
        drop_results(lab)
    assert_unharmed(lab, heals=False, preexec=_full_disk(1024 * 1024))
    assert not list(lab.store.glob(f"{results.PREFIX}*{results.SUFFIX}"))


# -- 7. the regression that started it --------------------------------------------------------

KERNEL = """\
import numpy as np


def smooth(u, v):
    u[1:-1, 1:-1] = 0.25 * (v[2:, 1:-1] + v[:-2, 1:-1] + v[1:-1, 2:] + v[1:-1, :-2])


def run(n, steps):
    u = np.zeros((n, n))
    v = np.ones((n, n))
    for _ in range(steps):
        smooth(u, v)
        u, v = v, u
    return u
"""

BFS = """\
def bfs(graph, start):
    seen, queue = {start}, [start]
    for node in queue:
        queue += [n for n in graph[node] if n not in seen and not seen.add(n)]
    return seen
"""


def test_a_file_that_starts_importing_numpy_is_assessed_as_without_the_store(lab: Lab) -> None:
    for name in EXAMPLE_FILES:
        (lab.tree / name).unlink()
    (lab.tree / "kernel.py").write_text(KERNEL)
    bfs = lab.tree / "bfs.py"
    bfs.write_text(BFS)
    lab.seed()

    def edit(change: Callable[[], None]) -> None:
        change()
        lab.forget_reference()
        run = lab.assess()
        assert_clean(run)
        assert report_of(run) == lab.reference()

    edit(lambda: bfs.write_text("import numpy as np\n" + BFS))
    edit(lambda: bfs.write_text(bfs.read_text() + "x = np.ones(8).sum().item()\n"))
    edit(lambda: (lab.tree / "kernel.py").unlink())
    edit(lambda: None)


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_a_checked_copy_holds_the_bytes_checked_or_is_not_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_copy: bool
) -> None:
    """The saved results are copied before an update opens them: by the kernel where it can,
    else through Python; either way the copy is what the seal was checked against, and a
    file that does not match its seal leaves no copy behind."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    if not kernel_copy:

        def unsupported(*_: object) -> int:
            raise OSError(38, "Function not implemented")

        monkeypatch.setattr(os, "copy_file_range", unsupported)
    source = tmp_path / "results.duckdb"
    payload = os.urandom(3 * (1 << 20) + 12345)
    source.write_bytes(payload)
    trust.write_seal(source, "results", "k", [source], {"key": "k"})
    copy = tmp_path / "copy.partial"
    trust.verify(source, "results", "k", [source], copy_to=copy)
    assert copy.read_bytes() == payload
    copy.unlink()
    source.write_bytes(payload[:-1] + bytes([payload[-1] ^ 1]))
    with pytest.raises(trust.Untrusted, match="does not match its seal"):
        trust.verify(source, "results", "k", [source], copy_to=copy)
    assert not copy.exists()
