"""End-to-end benchmark of `cpq assess` against its peers, ruff and Semgrep, on real trees.

    python bench/run_bench.py [--work DIR] [--trees numpy,scipy-astropy,small] [--skip-peers]
                              [--repeat N] [--timeout S] [--skip-semgrep-defaults]

Trees are built from sdists fetched from the package index with pip (pinned versions below;
nothing else touches the network): `numpy` is the `.py` files of the numpy package, and
`scipy-astropy` those of scipy and astropy side by side.  `small` is one example file.

For each tree, in each of `--repeat` rounds: cpq cold (store deleted), cpq warm (same command
again), cpq after a comment edit and after a code edit of one file, cpq --no-cache, `ruff check
--select ALL`, and Semgrep with bench/semgrep-rules.yml (on every file, then with its default
ignores).  The rounds interleave the tools, so a drift of the host's speed weighs on all alike.
Each command runs in its own process; its wall time, its CPU time and peak RSS (the largest
process among it and its descendants; both from wait4) and the peak of the summed RSS of its
whole process tree (sampled from /proc every 100 ms) are reported, with the ratios and the
targets of the issue.  See bench/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "bench" / "semgrep-rules.yml"
SMALL_FILE = REPO / "tests" / "examples" / "sync_in_loop.py"

# Pinned sdists: (distribution, version, package folder inside the sdist).
PINS: dict[str, tuple[str, str, str]] = {
    "numpy": ("numpy", "2.4.6", "numpy"),
    "scipy": ("scipy", "1.17.1", "scipy"),
    "astropy": ("astropy", "8.0.2", "astropy"),
}
TREES: dict[str, list[str]] = {"numpy": ["numpy"], "scipy-astropy": ["scipy", "astropy"]}
TREE_LAYOUT = "py-only-2"  # change to rebuild existing trees when build_tree changes
SEMGREP_PIN = "semgrep==1.185.0"
RUFF_SPEC = "ruff>=0.5"

DEFAULT_TIMEOUT_S = 300.0
SAMPLE_INTERVAL_S = 0.1
MB = 1024 * 1024
EDIT_MARK = b"\n# cpq bench edit"
# A statement: it adds facts, so the edited tree is evaluated again.
CODE_EDIT_MARK = b"\n_cpq_bench_edit = "
EDIT_MODES = ("edit comment", "edit code")

# Targets from the issue.
TARGET_COLD_VS_SEMGREP = 0.5
TARGET_PEAK_MB = 1500.0
TARGET_WARM_S = 1.0
TARGET_EDIT_S = 1.5
TARGET_SMALL_S = 0.6


# --------------------------------------------------------------------------------------------
# Measuring one command


@dataclass
class Measure:
    seconds: float
    rc: int
    maxrss_mb: float  # largest single process (the command or a descendant), from wait4
    tree_rss_mb: float  # peak of the summed RSS of the process tree (sampled)
    # User + system time of the command and of the descendants it waited for, from wait4.
    cpu_s: float = 0.0
    stderr: str = ""
    timed_out: bool = False


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    return children


def _memory_kb(pid: int) -> int:
    """RSS of one process in kB.  (Not PSS: smaps_rollup walks the page tables, some 30 ms for a
    1.5 GB process, which would steal a good part of a core from the command being timed.)"""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return 0


class TreeSampler(threading.Thread):
    """Samples the summed memory of a process and all its descendants until stopped."""

    def __init__(self, root_pid: int) -> None:
        super().__init__(daemon=True)
        self.root_pid = root_pid
        self.peak_kb = 0
        self.stop_event = threading.Event()
        self.enabled = os.path.isdir("/proc/self")

    def run(self) -> None:
        while self.enabled and not self.stop_event.is_set():
            children = _children_map()
            todo, total = [self.root_pid], 0
            while todo:
                pid = todo.pop()
                total += _memory_kb(pid)
                todo.extend(children.get(pid, ()))
            self.peak_kb = max(self.peak_kb, total)
            self.stop_event.wait(SAMPLE_INTERVAL_S)


def measure(
    cmd: Sequence[str],
    timeout_s: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Measure:
    """Run `cmd` once in a fresh process (killed, with its descendants, after `timeout_s`);
    wall time, peak memory, exit status, stderr."""
    err_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"cpq-bench-{os.getpid()}.stderr"
    # What the commands before wrote (a 274 MB results file, a removed store) is flushed to disk
    # first: the system would otherwise write it back while this command runs, at its expense
    # (4 s of spread between three cold runs of cpq on SciPy + Astropy).
    os.sync()
    with open(err_path, "w+b") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        sampler = TreeSampler(proc.pid)
        sampler.start()
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        # wait4 reports the child's rusage merged with its reaped descendants' (RUSAGE_BOTH):
        # ru_maxrss is then the largest process of the command's tree, for this command only.
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted: take the command down with us
            timer.cancel()
            sampler.stop_event.set()
            kill()
            proc.wait()
            raise
        seconds = time.perf_counter() - start
        timer.cancel()
        sampler.stop_event.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    err_path.unlink(missing_ok=True)
    scale = 1024 if sys.platform != "darwin" else 1  # ru_maxrss: kB on Linux, bytes on macOS
    return Measure(
        seconds=seconds,
        rc=proc.returncode,
        maxrss_mb=usage.ru_maxrss * scale / MB,
        tree_rss_mb=sampler.peak_kb / 1024,
        cpu_s=usage.ru_utime + usage.ru_stime,
        stderr=stderr,
        timed_out=timed_out.is_set(),
    )


# --------------------------------------------------------------------------------------------
# Trees


@dataclass
class Tree:
    name: str
    root: Path
    files: int
    lines: int
    versions: list[str]


def count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def py_files(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
    return out


def tree_size(files: Sequence[Path]) -> tuple[int, int]:
    return len(files), sum(count_lines(f.read_bytes()) for f in files)


def fetch_sdist(dist: str, version: str, dest: Path) -> Path | None:
    """The sdist of dist==version from the configured package index, through pip."""
    dest.mkdir(parents=True, exist_ok=True)
    for existing in dest.glob(f"{dist}-{version}.tar.gz"):
        return existing
    try:
        return _fetch_with_pip_finder(dist, version, dest)
    except Exception as exc:  # noqa: BLE001 - pip's internal API moves; fall back to the CLI
        print(f"  pip finder unavailable ({type(exc).__name__}: {exc}); trying `pip download`")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q"]
    done = subprocess.run([*cmd, "-d", str(dest), f"{dist}=={version}"], capture_output=True, text=True)
    found = sorted(dest.glob(f"{dist}-{version}.tar.gz"))
    if done.returncode != 0 or not found:
        print(f"  `pip download` failed: {done.stderr.strip().splitlines()[-1:]}")
        return None
    return found[0]


def _fetch_with_pip_finder(dist: str, version: str, dest: Path) -> Path | None:
    # `pip download` would prepare the sdist's metadata, i.e. run its build backend (for
    # meson-python, a full compile).  pip's own finder and session locate and fetch the
    # sdist with the user's pip configuration (index, extra indexes, certificates) instead.
    from pip._internal.commands import create_command
    from pip._vendor.packaging.specifiers import SpecifierSet

    command: Any = create_command("download")
    options, _ = command.parse_args(["--no-deps", "--no-binary", ":all:", f"{dist}=={version}"])
    with command.main_context():
        session = command.get_default_session(options)
        finder = command._build_package_finder(options=options, session=session)
        best = finder.find_best_candidate(dist, SpecifierSet(f"=={version}")).best_candidate
        if best is None:
            print(f"  no sdist of {dist}=={version} on the index")
            return None
        link = best.link
        target: Path = dest / link.filename
        partial = target.with_suffix(".partial")
        digest = hashlib.new(link.hash_name or "sha256")
        response = session.get(link.url, stream=True)
        response.raise_for_status()
        with open(partial, "wb") as fh:
            for chunk in response.iter_content(1 << 20):
                fh.write(chunk)
                digest.update(chunk)
        if link.hash and digest.hexdigest() != link.hash:
            partial.unlink()
            print(f"  {link.filename}: {link.hash_name} mismatch, discarded")
            return None
        partial.replace(target)
        return target


def build_tree(name: str, work: Path) -> Tree | None:
    """The tree `name` under WORK/trees/ (rebuilt unless its marker says it is complete)."""
    parts = TREES[name]
    versions = [f"{PINS[p][0]}=={PINS[p][1]}" for p in parts]
    root = work / "trees" / name
    marker = work / "trees" / f"{name}.ok"
    stamp = " ".join([TREE_LAYOUT, *versions])
    if not (marker.exists() and marker.read_text() == stamp and root.is_dir()):
        shutil.rmtree(root, ignore_errors=True)
        marker.unlink(missing_ok=True)
        for part in parts:
            dist, version, package = PINS[part]
            print(f"  fetching the sdist of {dist}=={version} ...")
            archive = fetch_sdist(dist, version, work / "sdists")
            if archive is None:
                print(f"  SKIP tree {name}: no sdist of {dist}=={version}")
                shutil.rmtree(root, ignore_errors=True)
                return None
            prefix = f"{archive.name.removesuffix('.tar.gz')}/{package}/"
            dest = root / package if len(parts) > 1 else root
            with tarfile.open(archive) as tar:
                for member in tar.getmembers():
                    if not (
                        member.isfile() and member.name.startswith(prefix) and member.name.endswith(".py")
                    ):
                        continue
                    relative = member.name[len(prefix) :]
                    if any(part.startswith(".") for part in relative.split("/")):
                        continue  # .github/ and the like: not package source
                    out = dest / relative
                    out.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    if source is not None:
                        out.write_bytes(source.read())
        marker.write_text(stamp)
    files, lines = tree_size(py_files(root))
    return Tree(name, root, files, lines, versions)


def pick_edit_file(root: Path) -> Path:
    """A mid-sized file: the median by line count."""
    sized = sorted((count_lines(f.read_bytes()), str(f)) for f in py_files(root))
    return Path(sized[len(sized) // 2][1])


# --------------------------------------------------------------------------------------------
# Tools


@dataclass
class Row:
    tree: str
    mode: str
    files: int
    lines: int
    runs: list[Measure] = field(default_factory=list)
    note: str = ""

    @property
    def seconds(self) -> float:
        return statistics.median(m.seconds for m in self.runs)

    @property
    def cpu_s(self) -> float:
        return statistics.median(m.cpu_s for m in self.runs)

    @property
    def maxrss_mb(self) -> float:
        return max(m.maxrss_mb for m in self.runs)

    @property
    def tree_rss_mb(self) -> float:
        return max(m.tree_rss_mb for m in self.runs)

    @property
    def ok(self) -> bool:
        return all(m.rc == 0 and not m.timed_out for m in self.runs)

    @property
    def timed_out(self) -> bool:
        return any(m.timed_out for m in self.runs)


def cpq_cmd() -> list[str]:
    found = shutil.which("cpq", path=str(Path(sys.executable).parent)) or shutil.which("cpq")
    return [found] if found else [sys.executable, "-m", "cpq"]


def compile_cpq() -> str:
    """Byte-compile the cpq that runs, as `pip install` does: in an editable install, or
    under PYTHONDONTWRITEBYTECODE, it would otherwise compile its modules on every run (some
    40 ms a command), which no installed cpq does."""
    script = (
        "import compileall, os, re, cpq; d = os.path.dirname(cpq.__file__); "
        r"skip = re.compile(re.escape(d) + r'[/\\](\.|tests|bench)'); "
        "print(d if compileall.compile_dir(d, quiet=1, rx=skip) else '')"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    return done.stdout.strip() if done.returncode == 0 else ""


def cpq_timing(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.startswith("cpq:")]
    return lines[-1].removeprefix("cpq: ") if lines else ""


def tool_version(cmd: Sequence[str], env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (done.stdout.strip() or done.stderr.strip()).splitlines()[-1] if done.returncode == 0 else "?"


def find_ruff() -> list[str] | None:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found:
        return [found]
    print(f"ruff not found: installing {RUFF_SPEC} (from the `test` extra) with pip ...")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", RUFF_SPEC], capture_output=True)
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if done.returncode != 0 or not found:
        print("  could not install ruff: ruff is skipped")
        return None
    return [found]


def semgrep_env() -> dict[str, str]:
    env = dict(os.environ)
    # Offline, Semgrep's version check blocks ~100 s on connection timeouts before exiting.
    env.update(SEMGREP_ENABLE_VERSION_CHECK="0", SEMGREP_SEND_METRICS="off")
    return env


def find_semgrep(work: Path) -> list[str] | None:
    found = shutil.which("semgrep", path=str(Path(sys.executable).parent)) or shutil.which("semgrep")
    if found:
        return [found]
    venv = work / "venv-semgrep"
    exe = venv / "bin" / "semgrep"
    if exe.exists():
        return [str(exe)]
    # Its own virtual environment: semgrep pins versions (jsonschema, wrapt, ...) that would
    # otherwise replace cpq's in the current one.
    print(f"semgrep not found: installing {SEMGREP_PIN} into {venv} with pip (about a minute) ...")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", SEMGREP_PIN],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"  could not install semgrep ({exc}): semgrep is skipped")
        return None
    return [str(exe)] if exe.exists() else None


def semgrep_scanned(report: Path) -> list[str] | None:
    try:
        data = json.loads(report.read_text())
        return list(data["paths"]["scanned"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def semgrep_errors(report: Path) -> int:
    try:
        return len(json.loads(report.read_text()).get("errors", []))
    except (OSError, ValueError):
        return -1


def findings_equal(reports: dict[str, Path]) -> tuple[bool, str]:
    """Whether the JSON reports agree, `stats` aside; and on what (findings count, verdict)."""
    docs: dict[str, dict[str, Any]] = {}
    for mode, path in reports.items():
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            return False, f"{mode}: unreadable report ({exc})"
        doc.pop("stats", None)
        docs[mode] = doc
    modes = list(docs)
    first = docs[modes[0]]
    differing = [m for m in modes[1:] if docs[m] != first]
    summary = f"{len(first.get('findings', []))} findings, verdict {first.get('verdict')}"
    if differing:
        detail = []
        for m in differing:
            same_findings = docs[m].get("findings") == first.get("findings")
            detail.append(f"{m} differs from {modes[0]} ({'other fields' if same_findings else 'findings'})")
        return False, "; ".join(detail)
    return True, summary


# --------------------------------------------------------------------------------------------
# The runs


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    identical: dict[str, tuple[bool | None, str]] = field(default_factory=dict)
    # After each edit: the edited run against --no-cache on the edited tree.
    edits_identical: dict[str, tuple[bool | None, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def find(self, tree: str, mode: str) -> Row | None:
        for row in self.rows:
            if row.tree == tree and row.mode == mode and row.runs:
                return row
        return None

    def get(self, tree: str, mode: str) -> Row | None:
        """The row, when all its runs succeeded."""
        row = self.find(tree, mode)
        return row if row is not None and row.ok else None


class CpqRuns:
    """cpq's runs on a tree, one round at a time (see `run_tree`): cold, warm, the two edits
    and --no-cache per round; `finish` adds the rows and the same-findings checks."""

    def __init__(self, tree: Tree, out: Path, timeout_s: float, results: Results) -> None:
        self.tree, self.out, self.timeout_s, self.results = tree, out, timeout_s, results
        self.cpq = cpq_cmd()
        self.rounds = 0
        self.stopped = False  # a cold run failed: no further round
        self.reports = {m: out / f"{tree.name}-{m}.json" for m in ("cold", "warm", "no-cache")}
        self.rows = {
            m: Row(tree.name, f"cpq {m}", tree.files, tree.lines)
            for m in ("cold", "warm", *EDIT_MODES, "no-cache")
        }
        self.edit_file = pick_edit_file(tree.root)
        original = self.edit_file.read_bytes()
        for mark in (EDIT_MARK, CODE_EDIT_MARK):
            if mark in original:  # left by an interrupted run
                original = original[: original.index(mark)]
                self.edit_file.write_bytes(original)
        self.original = original
        self.stat = self.edit_file.stat()
        name = self.edit_file.relative_to(tree.root)
        self.edits = {
            "edit comment": f"appended a comment line to {name} ({count_lines(original)} lines)",
            "edit code": f"appended an assignment to {name}",
        }
        for mode, what in self.edits.items():
            self.rows[mode].note = what

    def round(self) -> None:
        if self.stopped:
            return
        first = self.rounds == 0
        self.rounds += 1
        shutil.rmtree(self.tree.root / ".cpq", ignore_errors=True)
        cold = self._assess("cold")
        if cold.timed_out or cold.rc != 0:
            why = f"timed out after {self.timeout_s:.0f} s" if cold.timed_out else f"exited {cold.rc}"
            self.results.notes.append(
                f"{self.tree.name}: cpq warm, edit and no-cache not run: the cold run {why}"
            )
            self.stopped = True
            return
        self._assess("warm")
        try:
            self.edit_file.write_bytes(
                self.original + EDIT_MARK + f" {self.rounds} {time.time_ns()}\n".encode()
            )
            self._assess("edit comment")
            if first:
                self._check_edit("edit comment")
            self.edit_file.write_bytes(self.original + CODE_EDIT_MARK + f"{time.time_ns()}\n".encode())
            self._assess("edit code")
            if first:
                self._check_edit("edit code")
        finally:
            self.edit_file.write_bytes(self.original)
            os.utime(self.edit_file, ns=(self.stat.st_atime_ns, self.stat.st_mtime_ns))
        self._assess("no-cache", ["--no-cache"])

    def finish(self) -> None:
        rows = self.rows
        self.results.rows.extend(rows.values())
        name = self.tree.name
        if all(r.ok and r.runs for r in rows.values()):
            self.results.identical[name] = findings_equal(self.reports)
        elif any(r.runs and not r.ok and not r.timed_out for r in rows.values()):
            self.results.identical[name] = (False, "a cpq run failed")
        else:
            self.results.identical[name] = (None, "not checked: a cpq run timed out")

    def _assess(self, mode: str, extra: Sequence[str] = ()) -> Measure:
        tree = self.tree
        target = self.reports.get(mode, self.out / f"{tree.name}-{mode}.json")
        cmd = [*self.cpq, "-v", "assess", str(tree.root), "--format", "json", "-o", str(target), *extra]
        m = measure(cmd, self.timeout_s, cwd=self.out)
        self.rows[mode].runs.append(m)
        timing = cpq_timing(m.stderr)
        if timing:
            self.rows[mode].note = f"{self.edits[mode]}; {timing}" if mode in self.edits else timing
        if m.timed_out:
            print(f"  cpq {mode} killed after {self.timeout_s:.0f} s (--timeout)")
        elif m.rc != 0:
            print(f"  cpq {mode} exited {m.rc}: {m.stderr.strip()[-400:]}")
        print(f"  {tree.name:14} cpq {mode:13} {m.seconds:8.2f} s  {m.maxrss_mb:7.0f} MB")
        return m

    def _check_edit(self, mode: str) -> None:
        """The edited tree once more with --no-cache (not timed): the saved results an edit
        reused, or the facts it copied, must give what a fresh run gives."""
        tree = self.tree
        fresh = self.out / f"{tree.name}-{mode.replace(' ', '-')}-no-cache.json"
        cmd = [*self.cpq, "assess", str(tree.root), "--format", "json", "-o", str(fresh), "--no-cache"]
        m = measure(cmd, self.timeout_s, cwd=self.out)
        edited = self.out / f"{tree.name}-{mode}.json"  # where _assess(mode) wrote it
        if m.rc != 0:
            self.results.edits_identical[f"{tree.name}: {mode}"] = (False, f"--no-cache exited {m.rc}")
        else:
            self.results.edits_identical[f"{tree.name}: {mode}"] = findings_equal(
                {mode: edited, "--no-cache": fresh}
            )


@dataclass
class Peers:
    ruff: list[str] | None
    semgrep: list[str] | None
    skip_semgrep_defaults: bool
    timeout_s: float


class PeerRuns:
    """ruff's and Semgrep's runs on a tree, one of each per round (see `run_tree`)."""

    def __init__(self, tree: Tree, out: Path, peers: Peers, results: Results) -> None:
        self.tree, self.out, self.peers, self.results = tree, out, peers, results
        self.ruff_row = Row(
            tree.name, "ruff ALL", tree.files, tree.lines, note="--select ALL --no-cache --isolated"
        )
        self.ruff_cmd: list[str] | None = None
        if peers.ruff is not None:
            self.ruff_cmd = [
                *peers.ruff,
                "check",
                "--select",
                "ALL",
                "--no-cache",
                "--exit-zero",
                "-q",
                "--isolated",
                "--no-respect-gitignore",
                str(tree.root),
            ]
        # (row, report, command, on every file) per Semgrep variant.  "semgrep" reads every .py
        # file, as cpq does: the basis of the 0.5 x target.  "semgrep defaults" is a plain
        # invocation, which skips tests/ and the like: shown for information.
        self.semgrep_runs: list[tuple[Row, Path, list[str], bool]] = []
        if peers.semgrep is None:
            return
        variants = [("semgrep", True)] + (
            [] if peers.skip_semgrep_defaults else [("semgrep defaults", False)]
        )
        for mode, all_files in variants:
            report = out / f"{tree.name}-{mode.replace(' ', '-')}.json"
            cmd = [
                *peers.semgrep,
                "scan",
                "--config",
                str(RULES),
                "--jobs",
                "2",
                "--metrics",
                "off",
                "--quiet",
                "--disable-version-check",
                "--json",
                "-o",
                str(report),
            ]
            if all_files:
                # The tree is its own project root, with a .semgrepignore of its own: Semgrep's
                # default ignores (tests/, ...) do not apply and it reads every .py file, as cpq
                # does.
                cmd += ["--project-root", str(tree.root)]
            else:
                # Semgrep's defaults (it skips tests/ and the like), git left out: the work folder
                # may be git-ignored, which would hide the whole tree.
                cmd += ["--no-git-ignore"]
            row = Row(tree.name, mode, tree.files, tree.lines)
            self.semgrep_runs.append((row, report, [*cmd, str(tree.root)], all_files))

    def round(self) -> None:
        name = self.tree.name
        if self.ruff_cmd is not None:
            m = measure(self.ruff_cmd, self.peers.timeout_s, cwd=self.out)
            self.ruff_row.runs.append(m)
            print(f"  {name:14} ruff          {m.seconds:8.2f} s  {m.maxrss_mb:7.0f} MB")
        ignore_file = self.tree.root / ".semgrepignore"
        for row, _, cmd, all_files in self.semgrep_runs:
            try:
                if all_files:
                    ignore_file.write_text("# cpq bench: every .py file\n.cpq/\n")
                m = measure(cmd, self.peers.timeout_s, cwd=self.out, env=semgrep_env())
            finally:
                ignore_file.unlink(missing_ok=True)
            row.runs.append(m)
            if m.rc != 0:
                print(f"  {row.mode} exited {m.rc}: {m.stderr.strip()[-400:]}")
            print(f"  {name:14} {row.mode:17} {m.seconds:8.2f} s  {m.maxrss_mb:7.0f} MB")

    def finish(self) -> None:
        name = self.tree.name
        if self.ruff_cmd is not None:
            self.results.rows.append(self.ruff_row)
        else:
            self.results.notes.append(f"{name}: ruff skipped (not installable)")
        if self.peers.semgrep is None:
            self.results.notes.append(f"{name}: semgrep skipped (not installable)")
        for row, report, _, _ in self.semgrep_runs:
            scanned = semgrep_scanned(report)
            if scanned is not None:
                row.files, row.lines = tree_size([Path(p) for p in scanned])
                row.note = (
                    f"scanned {row.files} of {self.tree.files} .py files, {semgrep_errors(report)} errors"
                )
            self.results.rows.append(row)


def run_tree(
    tree: Tree, out: Path, repeat: int, timeout_s: float, peers: Peers | None, results: Results
) -> None:
    """cpq's runs and its peers', in rounds: one of each per round.  The host's speed drifts by
    10-40 % over the minutes a bench takes; run one tool's repeats after the other's, and their
    ratio would measure the drift as well."""
    cpq = CpqRuns(tree, out, timeout_s, results)
    others = PeerRuns(tree, out, peers, results) if peers is not None else None
    for _ in range(repeat):
        cpq.round()
        if others is not None:
            others.round()
    cpq.finish()
    if others is not None:
        others.finish()


def run_small(out: Path, repeat: int, timeout_s: float, results: Results) -> None:
    folder = out / "small"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / SMALL_FILE.name
    shutil.copy2(SMALL_FILE, target)
    files, lines = tree_size([target])
    cpq = cpq_cmd()
    rows = {m: Row("small", f"cpq {m}", files, lines) for m in ("no-cache", "store cold", "store warm")}
    for _ in range(repeat):
        for mode in rows:
            if mode == "store cold":
                shutil.rmtree(folder / ".cpq", ignore_errors=True)
            extra = ["--no-cache"] if mode == "no-cache" else []
            m = measure([*cpq, "assess", str(target), *extra], timeout_s, cwd=folder)
            rows[mode].runs.append(m)
            if m.rc != 0:
                print(f"  small cpq {mode} exited {m.rc}: {m.stderr.strip()[-400:]}")
            print(f"  {'small':14} cpq {mode:10} {m.seconds:7.2f} s  {m.maxrss_mb:7.0f} MB")
    for row in rows.values():
        row.note = f"{SMALL_FILE.relative_to(REPO)}, startup included"
    results.rows.extend(rows.values())


# --------------------------------------------------------------------------------------------
# Report


def fmt_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def report(results: Results, context: list[str]) -> str:
    out = ["", "== cpq bench ==", *context, ""]
    table = []
    for r in results.rows:
        if not r.runs:
            continue
        status = "" if r.ok else (" TIMEOUT" if r.timed_out else " FAILED")
        lps = f"{r.lines / r.seconds:,.0f}" if r.seconds > 0 else "-"
        if r.timed_out:
            lps = f"< {lps}"
        table.append(
            [
                r.tree,
                r.mode + status,
                f"{r.files:,}",
                f"{r.lines:,}",
                f"{'> ' if r.timed_out else ''}{r.seconds:.2f}",
                f"{r.cpu_s:.2f}",
                lps,
                f"{r.maxrss_mb:.0f}",
                f"{r.tree_rss_mb:.0f}",
                r.note,
            ]
        )
    headers = [
        "tree",
        "tool/mode",
        "files",
        "lines",
        "seconds",
        "CPU s",
        "lines/s",
        "peak RSS MB",
        "tree RSS MB",
        "note",
    ]
    out.append(fmt_table(headers, table, right={2, 3, 4, 5, 6, 7, 8}))
    out.append("")
    out.append("peak RSS MB: largest single process of the command (wait4 ru_maxrss);")
    out.append(
        f"tree RSS MB: peak summed RSS of the command's process tree, sampled every "
        f"{SAMPLE_INTERVAL_S * 1000:.0f} ms (pages that forked workers share with their parent count "
        "once per process: an upper bound). The peak-memory target is checked on peak RSS."
    )
    out.append(f"seconds: median of {max(len(r.runs) for r in results.rows) if results.rows else 0} run(s).")
    out.append(
        "CPU s: median user + system time of the command and of the processes it waited for (wait4:"
        " cpq's workers, semgrep-core): the processor time a run used, on however many cores."
    )

    ratios: list[list[str]] = []
    targets: list[list[str]] = []

    def ratio_row(tree: str, label: str, mine: float, theirs: float, bound: str) -> list[str]:
        """A row of the ratios table (`bound`: "> " when cpq's run was cut short)."""
        return [tree, label, f"{bound}{mine / theirs:.2f}", f"{bound}{mine:.2f} s / {theirs:.2f} s"]

    def limit_target(tree: str, mode: str, limit: float) -> None:
        row = results.find(tree, mode)
        if row is None or not (row.ok or row.timed_out):
            targets.append([tree, f"{mode} < {limit} s", "-", verdict(None)])
            return
        shown = f"> {row.seconds:.2f} s (timed out)" if row.timed_out else f"{row.seconds:.2f} s"
        targets.append([tree, f"{mode} < {limit} s", shown, verdict(row.ok and row.seconds < limit)])

    for tree in TREES:
        cold = results.find(tree, "cpq cold")
        if cold is None or not (cold.ok or cold.timed_out):
            continue
        bound = "> " if cold.timed_out else ""
        for peer in ("semgrep", "semgrep defaults", "ruff ALL"):
            other = results.get(tree, peer)
            if other is not None:
                ratios.append(ratio_row(tree, f"cpq cold / {peer}", cold.seconds, other.seconds, bound))
        semgrep = results.get(tree, "semgrep")
        if semgrep is not None and len(semgrep.runs) > 1 and len(cold.runs) == len(semgrep.runs):
            # Each round's pair, run minutes apart at most: how much of the ratio is the host.
            rounds = [c.seconds / s.seconds for c, s in zip(cold.runs, semgrep.runs, strict=True)]
            ratios.append(
                [
                    tree,
                    "cpq cold / semgrep, by round",
                    " ".join(f"{r:.2f}" for r in rounds),
                    ", ".join(
                        f"{c.seconds:.2f}/{s.seconds:.2f}"
                        for c, s in zip(cold.runs, semgrep.runs, strict=True)
                    ),
                ]
            )
        if semgrep is not None and semgrep.cpu_s > 0:
            # Wall time decides the target; CPU time shows how much of cpq's lead is using more cores.
            ratios.append(ratio_row(tree, "cpq cold / semgrep, CPU time", cold.cpu_s, semgrep.cpu_s, bound))
        ratio = None if semgrep is None else cold.seconds / semgrep.seconds
        ratio_ok = None if ratio is None else (ratio <= TARGET_COLD_VS_SEMGREP and cold.ok)
        if cold.timed_out and ratio is not None and ratio <= TARGET_COLD_VS_SEMGREP:
            ratio_ok = None  # killed early (a --timeout below Semgrep's time): undecided
        targets.append(
            [
                tree,
                f"cpq cold <= {TARGET_COLD_VS_SEMGREP} x semgrep",
                "-" if ratio is None else f"{bound}{ratio:.2f} x",
                verdict(ratio_ok),
            ]
        )
        if tree == "scipy-astropy":
            memory_ok: bool | None = cold.maxrss_mb < TARGET_PEAK_MB
            if cold.timed_out and memory_ok:
                memory_ok = None  # the peak before the kill is a lower bound
            targets.append(
                [
                    tree,
                    f"cpq cold peak RSS < {TARGET_PEAK_MB:.0f} MB",
                    f"{'>= ' if cold.timed_out else ''}{cold.maxrss_mb:.0f} MB "
                    f"(tree RSS {cold.tree_rss_mb:.0f} MB)",
                    verdict(memory_ok),
                ]
            )
        if tree == "numpy":
            limit_target(tree, "cpq warm", TARGET_WARM_S)
            for mode in EDIT_MODES:
                limit_target(tree, f"cpq {mode}", TARGET_EDIT_S)
    for mode in ("cpq no-cache", "cpq store cold", "cpq store warm"):
        if results.find("small", mode) is not None:
            limit_target("small", mode, TARGET_SMALL_S)
    for tree, (same, detail) in results.identical.items():
        targets.append([tree, "same findings cold / warm / --no-cache", detail, verdict(same)])
    for what, (same, detail) in results.edits_identical.items():
        tree, mode = what.split(": ", 1)
        targets.append([tree, f"same findings {mode} / --no-cache", detail, verdict(same)])
    if ratios:
        out += ["", fmt_table(["tree", "ratio", "value", "times"], ratios, right={2})]
    if targets:
        out += ["", fmt_table(["tree", "target", "measured", "result"], targets, right=set())]
    if results.notes:
        out += ["", *results.notes]
    return "\n".join(out)


def machine() -> str:
    mem = ""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            kb = int(fh.readline().split()[1])
        mem = f", {kb / MB:.0f} GB RAM"
    except (OSError, ValueError, IndexError):
        pass
    system = f"{platform.system()} {platform.machine()}"
    return f"{system}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}"


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / ".bench", help="work folder (default: .bench/)")
    parser.add_argument(
        "--trees", default="numpy,scipy-astropy,small", help="comma-separated: numpy, scipy-astropy, small"
    )
    parser.add_argument("--skip-peers", action="store_true", help="time cpq only, not ruff and semgrep")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measurement (median time)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds before a command is killed and marked TIMEOUT (default {DEFAULT_TIMEOUT_S:.0f})",
    )
    parser.add_argument(
        "--skip-semgrep-defaults",
        action="store_true",
        help="do not run semgrep a second time with its default ignores (it skips tests/)",
    )
    args = parser.parse_args()
    wanted = [t.strip() for t in args.trees.split(",") if t.strip()]
    unknown = [t for t in wanted if t not in (*TREES, "small")]
    if unknown or args.repeat < 1:
        parser.error(f"unknown tree(s): {', '.join(unknown)}" if unknown else "--repeat must be >= 1")
    if not os.path.isdir("/proc/self"):
        print("no /proc: the tree RSS column stays 0 (peak RSS still comes from wait4)")

    work: Path = args.work.resolve()
    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load_before = load_average()
    if load_before > 0.5 * (os.cpu_count() or 1):
        print(f"warning: load average {load_before:.1f} before the bench: other work will skew the times")
    results = Results()
    compiled = compile_cpq()
    context = [
        f"machine: {machine()}",
        f"cpq: {tool_version(cpq_cmd())}"
        + (f" (byte-compiled in {compiled})" if compiled else " (could not byte-compile it)"),
    ]
    peers = Peers(None, None, args.skip_semgrep_defaults, args.timeout)
    if not args.skip_peers and any(t != "small" for t in wanted):
        peers.ruff, peers.semgrep = find_ruff(), find_semgrep(work)
        context.append(
            f"ruff: {tool_version(peers.ruff) if peers.ruff else 'skipped'}; semgrep: "
            f"{tool_version(peers.semgrep, semgrep_env()) if peers.semgrep else 'skipped'} "
            f"({RULES.relative_to(REPO)}, --jobs 2)"
        )
    trees: list[Tree] = []
    for name in wanted:
        if name == "small":
            continue
        print(f"tree {name}:")
        tree = build_tree(name, work)
        if tree is None:
            results.notes.append(f"{name}: skipped (sdist unavailable)")
            continue
        print(f"  {tree.root}: {tree.files:,} .py files, {tree.lines:,} lines ({', '.join(tree.versions)})")
        trees.append(tree)

    for tree in trees:
        print(f"running on {tree.name}:")
        run_tree(tree, out, args.repeat, args.timeout, None if args.skip_peers else peers, results)
    if "small" in wanted:
        print("running on one small file:")
        run_small(out, args.repeat, args.timeout, results)

    for tree in trees:
        context.append(
            f"tree {tree.name}: {', '.join(tree.versions)} sdist(s); {tree.files:,} .py files, "
            f"{tree.lines:,} lines"
        )
    context.append(
        f"bench wall time: {time.perf_counter() - started:.0f} s; load average {load_before:.1f} before, "
        f"{load_average():.1f} after; reports in {out}"
    )
    text = report(results, context)
    print(text)
    (work / "results.txt").write_text(text + "\n")
    return 0 if all(r.ok for r in results.rows) else 1


if __name__ == "__main__":
    # SIGTERM unwinds like Ctrl-C: the edited file is restored and the running command killed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sys.exit(main())
