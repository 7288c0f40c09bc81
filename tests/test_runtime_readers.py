"""The readers of runtime evidence: cProfile/pstats, speedscope JSON, cuPyNumeric Doctor JSON.

Profiles are made here by running small programs under the real cProfile; the speedscope and
Doctor fixtures in tests/runtime_data are written in the shape py-spy 0.3.14 and the Doctor of
nvidia-cupynumeric 26.6.1 write. Every malformed input must give `EvidenceError` with one line
naming the file, never another exception.
"""

from __future__ import annotations

import json
import marshal
import random
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpq.runtime import DoctorDiagnostic, EvidenceError, Profile, marshal_reader, read_doctor, read_profile
from cpq.runtime.doctor import check_of
from cpq.runtime.errors import FormatError

DATA = Path(__file__).resolve().parent / "runtime_data"
DOCTOR = DATA / "doctor"
SOLVER = "/home/user/wave/solver.py"
NUMPY_CORE = "/usr/lib/python3.11/site-packages/numpy/core/fromnumeric.py"

PLAIN_PROGRAM = """\
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def squares(n):
    for i in range(n):
        yield i * i


class Grid:
    def __init__(self, cells):
        self.cells = cells

    def size(self):
        return len(self.cells)


def main():
    total = fib(12)
    total += sum(squares(50))
    grid = Grid(list(range(10)))
    for _ in range(25):
        total += grid.size()
    return total


main()
"""

NUMPY_PROGRAM = """\
import numpy as np


def step(u):
    lap = np.zeros_like(u)
    lap[1:-1] = u[:-2] - 2 * u[1:-1] + u[2:]
    return u + 0.1 * lap


def run(steps):
    u = np.linspace(0.0, 1.0, 1000)
    for _ in range(steps):
        u = step(u)
        peak = u.item(0)  # ndarray.item: a built-in method in the profile
    return peak


run(40)
"""


def run_cprofile(tmp_path: Path, source: str, name: str = "prog.py") -> Path:
    """Profile `source` with the real cProfile; the file name in the profile is `name`."""
    (tmp_path / name).write_text(source)
    out = tmp_path / "run.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), name], cwd=tmp_path, check=True)
    return out


def function(profile: Profile, file: str, name: str) -> tuple[str, int, str, int, int, int]:
    (row,) = [row for row in profile.functions if row[0] == file and row[2] == name]
    return row


def assert_evidence_error(path: Path, reader=read_profile, *, says: str = "") -> str:
    with pytest.raises(EvidenceError) as caught:
        reader(path)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message, message
    assert message.startswith(f"{path}: "), message
    assert says in message, message
    return message


def write(tmp_path: Path, content: bytes | str, name: str = "evidence") -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    return path


# --- the marshal decoder ------------------------------------------------------


MARSHAL_VALUES = [
    None,
    True,
    False,
    ...,
    0,
    1,
    -1,
    2**31 - 1,
    -(2**31),
    2**31,
    -(2**62),
    2**300,
    -(2**300),
    0.0,
    -0.0,
    1.5,
    1e-300,
    float("inf"),
    3 + 4j,
    "",
    "abc",
    "é≠𝄞",
    "x" * 300,
    b"",
    b"\x00\xff",
    (),
    (1,),
    (1,) * 300,
    [],
    [1, [2, (3,)]],
    {},
    {1: 2, "a": (3,), (1, "b"): [None]},
    set(),
    {1, "x", (2,)},
    frozenset(),
    frozenset({1, 2}),
    {"shared": "s", "again": "s"},
]


@pytest.mark.parametrize("version", range(marshal.version + 1))
@pytest.mark.parametrize("value", MARSHAL_VALUES, ids=repr)
def test_decoder_matches_marshal_on_data_values(value: object, version: int) -> None:
    data = marshal.dumps(value, version)
    assert marshal_reader.loads(data) == marshal.loads(data)


def test_decoder_keeps_shared_references() -> None:
    key = ("a.py", 3, "f")
    data = marshal.dumps({key: (1, 1, 0.5, 0.5, {key: (1, 1, 0.5, 0.5)})})
    assert b"r" in data  # the second `key` is a back reference
    assert marshal_reader.loads(data) == marshal.loads(data)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "empty"),
        (b"c", "a code object"),
        (marshal.dumps(compile("1", "x", "eval")), "a code object"),
        (marshal.dumps(StopIteration), "StopIteration"),
        (b"Q", "unknown type code"),
        (b"NN", "1 bytes after the value"),
        (b"u" + struct.pack("<i", 2**31 - 1) + b"abc", "claims 2147483647 elements"),
        (b"[" + struct.pack("<i", -1), "claims -1 elements"),
        (b"(" + struct.pack("<i", 10**9) + b"N", "claims 1000000000 elements"),
        (b"l" + struct.pack("<i", 10**6), "an integer of 1000000 digits"),
        (b"l\x01\x00\x00\x00\x00\x80", "digit out of range"),
        (b"l\x01\x00\x00\x00\x00\x00", "unnormalized"),
        (b"r\x00\x00\x00\x00", "reference 0 to none"),
        (b"\xdb\x01\x00\x00\x00r\x00\x00\x00\x00", "from inside itself"),  # a list holding itself
        (b"[" + b"\x01\x00\x00\x00[" * 100 + b"\x00\x00\x00\x00", "nested deeper"),
        (b"{[\x00\x00\x00\x00N0", "cannot be one (list)"),
        (b"<\x01\x00\x00\x00{0", "cannot be one (dict)"),
        (b"u\x02\x00\x00\x00\xed\xa0", "not valid UTF-8"),  # a lone surrogate
        (b"a\x01\x00\x00\x00\xe9", "not valid ASCII"),
        (b"f\x031_0", "is not a number"),
        (b"N0", "1 bytes after the value"),
        (b"0", "a null marker outside a dict"),
        (b"{N", "truncated"),
        (b"g\x00\x00", "truncated"),
    ],
)
def test_decoder_refuses_malformed_data(data: bytes, says: str) -> None:
    with pytest.raises(FormatError, match="bad marshal data") as caught:
        marshal_reader.loads(data)
    assert says in str(caught.value)


# --- cProfile -------------------------------------------------------------------


def test_cprofile_of_a_plain_program(tmp_path: Path) -> None:
    prof = run_cprofile(tmp_path, PLAIN_PROGRAM)
    profile = read_profile(prof)
    assert (profile.kind, profile.unit, profile.lines) == ("cprofile", "us", ())
    # (file, line, name, calls, own, cum): fib(12) makes 465 calls, all counted (not only primitive)
    _, line, _, calls, own, cum = function(profile, "prog.py", "fib")
    assert (line, calls) == (1, 465) and 0 <= own <= cum
    assert function(profile, "prog.py", "squares")[1:4] == (5, "squares", 51)  # a generator resumes 51 times
    assert function(profile, "prog.py", "size")[1:4] == (14, "size", 25)
    assert function(profile, "prog.py", "main")[1:4] == (18, "main", 1)
    _, line, _, calls, _, _ = function(profile, "~", "<built-in method builtins.len>")
    assert line == 0 and calls >= 25
    main_cum = function(profile, "prog.py", "main")[5]
    assert main_cum >= function(profile, "prog.py", "fib")[5]
    assert profile.total == sum(row[4] for row in profile.functions)
    assert profile.total >= main_cum
    assert list(profile.functions) == sorted(profile.functions)


def test_cprofile_of_a_numpy_program(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    profile = read_profile(run_cprofile(tmp_path, NUMPY_PROGRAM, name="wave.py"))
    assert function(profile, "wave.py", "step")[1:4] == (4, "step", 40)
    assert function(profile, "wave.py", "run")[1:4] == (10, "run", 1)
    assert function(profile, "~", "<method 'item' of 'numpy.ndarray' objects>")[3] == 40
    # linspace is Python code (numpy/_core/function_base.py), keyed by its absolute path
    assert any(row[2] == "linspace" and row[3] == 1 for row in profile.functions)
    assert profile.total == sum(row[4] for row in profile.functions)


def test_decoder_matches_marshal_on_real_profiles(tmp_path: Path) -> None:
    """Trusted files made here, so marshal.loads may read them for the comparison."""
    programs = {"plain": PLAIN_PROGRAM}
    try:
        import numpy  # noqa: F401

        programs["numpy"] = NUMPY_PROGRAM
    except ImportError:
        pass
    for name, source in programs.items():
        (tmp_path / name).mkdir()
        data = run_cprofile(tmp_path / name, source).read_bytes()
        assert marshal_reader.loads(data) == marshal.loads(data)


def test_cprofile_written_by_pstats_dump_stats(tmp_path: Path) -> None:
    """`pstats.Stats.dump_stats` after merging two runs writes the same format."""
    first = run_cprofile(tmp_path, PLAIN_PROGRAM)
    second = tmp_path / "second.prof"
    first.rename(second)
    first = run_cprofile(tmp_path, PLAIN_PROGRAM)
    merged = tmp_path / "merged.prof"
    script = f"import pstats; pstats.Stats({str(first)!r}, {str(second)!r}).dump_stats({str(merged)!r})"
    subprocess.run([sys.executable, "-c", script], check=True)
    profile = read_profile(merged)
    assert function(profile, "prog.py", "fib")[3] == 2 * 465


def pstats_file(tmp_path: Path, stats: object) -> Path:
    """A pstats-format file (marshal.dumps writes; nothing here loads)."""
    return write(tmp_path, marshal.dumps(stats))


def test_cprofile_paths_are_normalised_and_spellings_merged(tmp_path: Path) -> None:
    stats = {
        (".\\pkg\\solver.py", 10, "step"): (3, 3, 0.25, 0.5, {}),
        ("./pkg/solver.py", 10, "step"): (1, 1, 0.000_000_4, 0.000_000_6, {}),
        ("/abs/pkg/solver.py", 2, "<module>"): (1, 1, 1, 2.5, {}),
        ("~", 0, "<built-in method builtins.len>"): (7, 7, 1e-6, 1e-6, {("x.py", 1, "f"): 7}),
    }
    profile = read_profile(pstats_file(tmp_path, stats))
    assert profile.functions == (
        ("/abs/pkg/solver.py", 2, "<module>", 1, 1_000_000, 2_500_000),
        ("pkg/solver.py", 10, "step", 4, 250_000, 500_001),
        ("~", 0, "<built-in method builtins.len>", 7, 1, 1),
    )
    assert profile.total == 1_250_001


def test_an_empty_pstats_dict_is_an_empty_profile(tmp_path: Path) -> None:
    assert read_profile(pstats_file(tmp_path, {})) == Profile("cprofile", "us", 0, (), ())


GOOD_VALUE = (1, 1, 0.1, 0.2, {})


@pytest.mark.parametrize(
    ("stats", "says"),
    [
        ([1, 2], "not a cProfile/pstats file or a speedscope JSON profile (starts with byte 0xdb)"),
        ({1: 2}, "cProfile entry 1: the key is not a (file, line, name) tuple"),
        ({("a.py", "x", "f"): GOOD_VALUE}, "cProfile entry 1: line is not a number"),
        (
            {("a.py", 1, "f"): GOOD_VALUE, ("a.py", True, "g"): GOOD_VALUE},
            "cProfile entry 2: line is not a number",
        ),
        ({("a.py", -1, "f"): GOOD_VALUE}, "line -1 is out of range"),
        ({(1, 1, "f"): GOOD_VALUE}, "the file is not a string"),
        ({("a.py", 1, b"f"): GOOD_VALUE}, "the function name is not a string"),
        ({("a\nb.py", 1, "f"): GOOD_VALUE}, "control character"),
        ({("a.py", 1, "f"): (1, 1, 0.1, 0.2)}, "the value is not a (calls"),
        ({("a.py", 1, "f"): (1, -1, 0.1, 0.2, {})}, "calls is not a count"),
        ({("a.py", 1, "f"): (1, 1.5, 0.1, 0.2, {})}, "calls is not a count"),
        ({("a.py", 1, "f"): (1, 1, float("nan"), 0.2, {})}, "own time nan s is out of range"),
        ({("a.py", 1, "f"): (1, 1, 0.1, float("inf"), {})}, "cumulative time inf s is out of range"),
        ({("a.py", 1, "f"): (1, 1, -0.1, 0.2, {})}, "out of range"),
        ({("a.py", 1, "f"): (1, 1, "0.1", 0.2, {})}, "own time is not a number"),
        ({("a.py", 1, "f"): (1, 1, 0.1, 0.2, [])}, "callers is not a dict"),
    ],
)
def test_cprofile_of_the_wrong_shape(tmp_path: Path, stats: object, says: str) -> None:
    assert_evidence_error(pstats_file(tmp_path, stats), says=says)


# --- malformed files, any reader ----------------------------------------------------


def test_malformed_profiles_give_one_line_errors(tmp_path: Path) -> None:
    real = run_cprofile(tmp_path, PLAIN_PROGRAM).read_bytes()
    rng = random.Random(13)
    cases: list[tuple[bytes, str]] = [
        (b"", "not a cProfile/pstats file or a speedscope JSON profile (empty file)"),
        (bytes([0x89]) + rng.randbytes(4000), "starts with byte 0x89"),
        (real[: len(real) // 2], "truncated"),
        (marshal.dumps(compile("1", "x", "eval")), "not a cProfile/pstats file"),
        (marshal.dumps({("a.py", 1, "f"): compile("1", "x", "eval")}), "a code object"),
        (b"{" + b"u" + struct.pack("<i", 2**31 - 1) + b"abc", "claims 2147483647 elements"),
        (b"{" + b"(\x01\x00\x00\x00" * 500 + b"N", "nested deeper"),
        (b'{"a": 1}', "JSON without speedscope's"),
        (b"[1, 2]", "a JSON array: is it a cuPyNumeric Doctor report?"),
        (b'{"profiles": [], "shared": {"frames": []}', "invalid JSON"),
        (b"[" * 100_000, "JSON nested too deeply"),
        (b"\xff\xfe{\x00}\x00", "starts with byte 0xff"),
        (b'{ "profiles": [], "shared": {"frames": []}, "x": "\xff" }', "not UTF-8"),
    ]
    for number, (content, says) in enumerate(cases):
        assert_evidence_error(write(tmp_path, content, f"case{number}"), says=says)


def test_unreadable_paths(tmp_path: Path) -> None:
    assert_evidence_error(
        tmp_path / "missing.prof", read_profile, says="cannot read: No such file or directory"
    )
    # A clean Doctor run writes no file: the message says what to give instead.
    assert_evidence_error(
        tmp_path / "missing.json",
        read_doctor,
        says="no such file; the Doctor writes no report when it finds nothing",
    )
    for reader in (read_profile, read_doctor):
        assert_evidence_error(tmp_path, reader, says="cannot read: Is a directory")


def test_the_error_stays_on_one_line_for_a_path_with_a_newline(tmp_path: Path) -> None:
    path = write(tmp_path, b"", "two\nlines.prof")
    with pytest.raises(EvidenceError) as caught:
        read_profile(path)
    expected = "not a cProfile/pstats file or a speedscope JSON profile (empty file)"
    assert str(caught.value) == f"{tmp_path}/two\\nlines.prof: {expected}"


def test_a_file_over_the_size_cap_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cpq.runtime import reading

    monkeypatch.setattr(reading, "MAX_FILE_BYTES", 1 << 30 >> 20)  # 1 KiB, shown as 0 GiB
    assert_evidence_error(write(tmp_path, b"{" + b"N" * 2000), says="larger than")


# --- speedscope -------------------------------------------------------------------


def test_pyspy_speedscope_fixture() -> None:
    """py-spy's shape: one sampled profile per thread, unit seconds, weight 1/rate (100 Hz)."""
    profile = read_profile(DATA / "pyspy_solver.speedscope.json")
    assert (profile.kind, profile.unit, profile.functions) == ("speedscope", "us", ())
    assert profile.total == 150_000  # 15 samples of 10 ms, both threads
    assert profile.lines == (
        (SOLVER, 30, 20_000, 20_000),  # fib: recursion counts once per sample
        (SOLVER, 42, 40_000, 40_000),
        (SOLVER, 43, 10_000, 40_000),  # the line calling np.sum: own 1 sample, cum 4
        (SOLVER, 51, 0, 80_000),
        (SOLVER, 60, 0, 100_000),  # <module>: on every main-thread stack
        (NUMPY_CORE, 88, 30_000, 30_000),
        (NUMPY_CORE, 2313, 0, 30_000),
    )  # the watcher thread's frame has line 0 (unknown): skipped, but its samples count in total


def speedscope(profiles: list[dict], frames: list[dict] | None = None) -> str:
    if frames is None:
        frames = [
            {"name": "main", "file": "app.py", "line": 10},
            {"name": "work", "file": ".\\lib\\work.py", "line": 5},
            {"name": "<native>"},
            {"name": "inner", "file": "lib/work.py", "line": 7},
        ]
    return json.dumps(
        {
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": {"frames": frames},
            "profiles": profiles,
        }
    )


def test_speedscope_sample_counts(tmp_path: Path) -> None:
    profile = read_profile(
        write(
            tmp_path,
            speedscope(
                [
                    {
                        "type": "sampled",
                        "unit": "none",
                        "startValue": 0,
                        "endValue": 6,
                        "samples": [[0, 1], [0, 1, 2], [0, 1, 3], [0], []],
                        "weights": [1, 2, 1, 1, 1],
                    },
                ]
            ),
        )
    )
    assert (profile.unit, profile.total) == ("samples", 6)
    # [0, 1, 2]: the innermost frame has no file, so its own weight goes to work.py:5
    assert profile.lines == (("app.py", 10, 1, 5), ("lib/work.py", 5, 3, 4), ("lib/work.py", 7, 1, 1))


def test_speedscope_time_units_become_microseconds(tmp_path: Path) -> None:
    profiles = [
        {
            "type": "sampled",
            "unit": "milliseconds",
            "startValue": 0,
            "endValue": 3,
            "samples": [[0, 1]],
            "weights": [3],
        },
        {
            "type": "sampled",
            "unit": "nanoseconds",
            "startValue": 0,
            "endValue": 2000,
            "samples": [[0]],
            "weights": [2000],
        },
    ]
    profile = read_profile(write(tmp_path, speedscope(profiles)))
    assert (profile.unit, profile.total) == ("us", 3002)
    assert profile.lines == (("app.py", 10, 2, 3002), ("lib/work.py", 5, 3000, 3000))


def read_evented(tmp_path: Path, events: list[dict], unit: str, end: int) -> Profile:
    """The profile of one evented speedscope profile from 0 to `end`."""
    evented = {"type": "evented", "unit": unit, "startValue": 0, "endValue": end, "events": events}
    return read_profile(write(tmp_path, speedscope([evented])))


def test_speedscope_evented(tmp_path: Path) -> None:
    events = [
        {"type": "O", "frame": 0, "at": 0},
        {"type": "O", "frame": 1, "at": 2},
        {"type": "O", "frame": 3, "at": 3},
        {"type": "C", "frame": 3, "at": 7},
        {"type": "O", "frame": 2, "at": 7},  # no file: own time stays with work.py:5
        {"type": "C", "frame": 2, "at": 8},
        {"type": "C", "frame": 1, "at": 9},
        {"type": "O", "frame": 1, "at": 10},  # left open: runs until endValue
    ]
    profile = read_evented(tmp_path, events, "microseconds", 12)
    assert (profile.unit, profile.total) == ("us", 12)
    # own: app.py:10 in [0, 2) and [9, 10); work.py:5 in [2, 3), [7, 9) and [10, 12); inner in [3, 7)
    assert profile.lines == (("app.py", 10, 3, 12), ("lib/work.py", 5, 5, 9), ("lib/work.py", 7, 4, 4))


def test_speedscope_evented_recursion_counts_once(tmp_path: Path) -> None:
    events = [
        {"type": "O", "frame": 0, "at": 0},
        {"type": "O", "frame": 0, "at": 1},
        {"type": "C", "frame": 0, "at": 3},
        {"type": "C", "frame": 0, "at": 4},
    ]
    profile = read_evented(tmp_path, events, "none", 4)
    assert profile.lines == (("app.py", 10, 4, 4),)


def test_speedscope_without_profiles(tmp_path: Path) -> None:
    assert read_profile(write(tmp_path, speedscope([]))) == Profile("speedscope", "samples", 0, (), ())


SAMPLED = {
    "type": "sampled",
    "unit": "none",
    "startValue": 0,
    "endValue": 1,
    "samples": [[0]],
    "weights": [1],
}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"samples": [[0, 4]]}, "profiles[0].samples[0]: frame index 4 is out of range (4 frames)"),
        ({"samples": [[-1]]}, "frame index -1 is out of range"),
        ({"samples": [["0"]]}, "profiles[0].samples[0] is not a list of frame indices"),
        ({"samples": [[True]]}, "not a list of frame indices"),
        ({"weights": [1, 1]}, "1 samples but 2 weights"),
        ({"weights": "NaN"}, "samples and weights are not lists"),
        ({"weights": [-1]}, "profiles[0].weights[0] is not a weight"),
        ({"weights": [10**30]}, "is not a weight"),
        ({"unit": "bytes"}, "profiles[0].unit is not a time unit"),
        ({"type": "flamegraph"}, "profiles[0].type is not"),
    ],
)
def test_speedscope_malformed_sampled(tmp_path: Path, change: dict, says: str) -> None:
    assert_evidence_error(write(tmp_path, speedscope([{**SAMPLED, **change}])), says=says)


@pytest.mark.parametrize(
    ("weight", "says"),
    [("NaN", "invalid JSON: NaN is not a number"), ("1e400", "profiles[0].weights[0] is not a weight (inf)")],
)
def test_speedscope_nan_and_overflowing_weights(tmp_path: Path, weight: str, says: str) -> None:
    text = speedscope([{**SAMPLED, "weights": [0]}]).replace('"weights": [0]', f'"weights": [{weight}]')
    assert_evidence_error(write(tmp_path, text), says=says)


EVENTED = {"type": "evented", "unit": "seconds", "startValue": 0, "endValue": 5}


@pytest.mark.parametrize(
    ("profile", "says"),
    [
        (
            {**EVENTED, "events": [{"type": "O", "frame": 0, "at": 1}, {"type": "C", "frame": 1, "at": 2}]},
            "closes frame 1 but the open frame is 0",
        ),
        ({**EVENTED, "events": [{"type": "C", "frame": 0, "at": 1}]}, "the open frame is None"),
        (
            {**EVENTED, "events": [{"type": "O", "frame": 0, "at": 3}, {"type": "O", "frame": 1, "at": 2}]},
            "events[1].at is not a time between",
        ),
        ({**EVENTED, "events": [{"type": "O", "frame": 0, "at": 6}]}, "events[0].at is not a time between"),
        ({**EVENTED, "events": [{"type": "X", "frame": 0, "at": 1}]}, "events[0].type is not"),
        ({**EVENTED, "events": [{"type": "O", "frame": 9, "at": 1}]}, "frame index 9 is out of range"),
        ({**EVENTED, "endValue": -1, "events": []}, "startValue and endValue are not an interval"),
        ({**EVENTED, "events": {}}, "events is not a list"),
        ([{**EVENTED, "events": []}, {**SAMPLED}], "profiles mix sample counts"),
    ],
)
def test_speedscope_malformed_evented(tmp_path: Path, profile: dict | list, says: str) -> None:
    profiles = profile if isinstance(profile, list) else [profile]
    assert_evidence_error(write(tmp_path, speedscope(profiles)), says=says)


@pytest.mark.parametrize(
    ("frames", "says"),
    [
        ({"a": 1}, "shared.frames is not a list"),
        ([{"name": "f", "file": "a.py", "line": "3"}], "shared.frames[0].line is not a line number"),
        ([{"name": "f", "file": "a.py", "line": 1.5}], "is not a line number"),
        ([{"name": "f", "file": 3, "line": 1}], "shared.frames[0].file is not a string"),
        ([{"file": "a.py", "line": 1}], "shared.frames[0].name is not a string"),
        ([{"name": "f", "file": "a\u001b[31m.py", "line": 1}], "control character"),
        (["f"], "shared.frames[0] is not an object"),
    ],
)
def test_speedscope_malformed_frames(tmp_path: Path, frames: object, says: str) -> None:
    assert_evidence_error(write(tmp_path, speedscope([], frames=frames)), says=says)  # type: ignore[arg-type]


# --- cuPyNumeric Doctor --------------------------------------------------------------


DOCTOR_FILES = {
    "repeated-item-ops": ("/home/user/wave/main.py", 31, "u[i, j] = u_prev[i, j] + c * lap[i, j]"),
    "repeated-slice-access": ("/home/user/wave/main.py", 44, "grid[k, :] = row * k"),
    "array-gather": ("/home/user/wave/main.py", 58, "print(np.asarray(u).max())"),
    "stack-ops": ("/home/user/wave/main.py", 66, "history = np.vstack([history, u[None, :]])"),
    "nonzero": ("/home/user/wave/main.py", 72, "idx = np.nonzero(u > threshold)"),
    "advanced-indexing": ("/home/user/wave/main.py", 73, "u[idx] = 0.0"),
    "builtin-reduction": ("/home/user/wave/main.py", 80, "peak = max(u)"),
    "mpi4py": ("main.py", 3, "from mpi4py import MPI"),
    "iter": ("/home/user/wave/main.py", 90, "for value in u:"),
}


@pytest.mark.parametrize("check", sorted(DOCTOR_FILES))
def test_doctor_fixture_per_check(check: str) -> None:
    diagnostics = read_doctor(DOCTOR / f"{check}.json")
    assert {d.check for d in diagnostics} == {check}
    file, line, source = DOCTOR_FILES[check]
    first = diagnostics[0]
    assert (first.file, first.line, first.source) == (file, line, source)
    raw = json.loads((DOCTOR / f"{check}.json").read_text())[0]
    assert first.description == raw["description"]
    assert first.reference == (raw["reference"] or "")


def test_doctor_builtin_reduction_singular_and_plural() -> None:
    diagnostics = read_doctor(DOCTOR / "builtin-reduction.json")
    assert [(d.line, d.check) for d in diagnostics] == [(80, "builtin-reduction"), (85, "builtin-reduction")]
    assert diagnostics[1].description.startswith("Python built-ins max, min used with")


def test_doctor_unknown_description_is_kept(tmp_path: Path) -> None:
    entry = {
        "filename": "solver.py",
        "lineno": 12,
        "traceback": "",
        "source": "x = np.fft.fft(u)",
        "description": "a check from a newer Doctor",
        "reference": None,
        "severity": "warning",
    }
    (diagnostic,) = read_doctor(write(tmp_path, json.dumps([entry]) + "\n"))
    assert diagnostic == DoctorDiagnostic(
        "solver.py", 12, "unknown", "a check from a newer Doctor", "x = np.fft.fft(u)", ""
    )


def test_doctor_printed_to_stdout_after_the_program_output() -> None:
    diagnostics = read_doctor(DOCTOR / "stdout-capture.txt")
    assert [(d.line, d.check) for d in diagnostics] == [(31, "repeated-item-ops"), (72, "nonzero")]


def test_doctor_empty_array_is_a_clean_run(tmp_path: Path) -> None:
    assert read_doctor(write(tmp_path, "[]\n")) == ()
    assert read_doctor(write(tmp_path, "program output\n[]\n\n")) == ()


def test_doctor_sorted_and_paths_normalised(tmp_path: Path) -> None:
    entries = [
        {
            "filename": "b.py",
            "lineno": 1,
            "traceback": "",
            "source": None,
            "description": "use of nonzero can be slow in cuPyNumeric",
            "reference": None,
        },
        {
            "filename": ".\\a\\z.py",
            "lineno": 9,
            "traceback": "  File ...\n",
            "source": "y = x[i]",
            "description": "use of advanced indexing can be slow in cuPyNumeric",
            "reference": None,
        },
        {
            "filename": "./a/z.py",
            "lineno": 9,
            "traceback": "",
            "source": "y = x[i]",
            "description": "multiple scalar item accesses repeated on the same line",
            "reference": None,
        },
    ]
    diagnostics = read_doctor(write(tmp_path, json.dumps(entries)))
    assert [(d.file, d.line, d.check) for d in diagnostics] == [
        ("a/z.py", 9, "advanced-indexing"),
        ("a/z.py", 9, "repeated-item-ops"),
        ("b.py", 1, "nonzero"),
    ]


def test_check_of_every_description_of_doctor_26_6_1() -> None:
    assert check_of("multiple scalar item accesses repeated on the same line") == "repeated-item-ops"
    assert check_of("Python built-in sum used with cuPyNumeric array; prefer: sum -> np.sum(arr)") == (
        "builtin-reduction"
    )
    assert check_of("") == "unknown"


DOCTOR_ENTRY = {
    "filename": "a.py",
    "lineno": 3,
    "traceback": "",
    "source": "x",
    "description": "d",
    "reference": None,
}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (
            "",
            "not a cuPyNumeric Doctor JSON report (empty); the Doctor writes no report when it finds nothing",
        ),
        ("\n  \n", "empty"),
        (json.dumps([{**DOCTOR_ENTRY, "lineno": "x"}]), "Doctor entry 1: lineno is not a number"),
        (
            json.dumps([DOCTOR_ENTRY, {**DOCTOR_ENTRY, "lineno": True}]),
            "Doctor entry 2: lineno is not a number",
        ),
        (json.dumps([{**DOCTOR_ENTRY, "lineno": -3}]), "lineno -3 is out of range"),
        (json.dumps([{**DOCTOR_ENTRY, "filename": None}]), "Doctor entry 1: filename is not a string"),
        (json.dumps([{**DOCTOR_ENTRY, "source": 3}]), "Doctor entry 1: source is not a string"),
        (json.dumps([{**DOCTOR_ENTRY, "reference": ["u"]}]), "Doctor entry 1: reference is not a string"),
        (json.dumps([{**DOCTOR_ENTRY, "traceback": None}]), "traceback is not a string"),
        (
            json.dumps([{k: v for k, v in DOCTOR_ENTRY.items() if k != "description"}]),
            "Doctor entry 1: no description",
        ),
        (json.dumps([{**DOCTOR_ENTRY, "description": "two\nlines"}]), "control character"),
        (json.dumps([{**DOCTOR_ENTRY, "filename": "\ud800.py"}]), "lone surrogate"),
        (json.dumps(["a.py:3"]), "Doctor entry 1 is not an object"),
        (json.dumps({"profiles": [], "shared": {}}), "(a JSON object, not an array)"),
        ("null", "(a JSON null, not an array)"),
        ('Traceback (most recent call last):\n  File "main.py"\nValueError: boom\n', "neither the file nor"),
        ("[1, 2", "neither the file nor its last line is a JSON array"),
    ],
)
def test_doctor_malformed(tmp_path: Path, content: str, says: str) -> None:
    assert_evidence_error(write(tmp_path, content), read_doctor, says=says)


def test_doctor_reader_refuses_profiles(tmp_path: Path) -> None:
    assert_evidence_error(
        DATA / "pyspy_solver.speedscope.json", read_doctor, says="a JSON object, not an array"
    )
    assert_evidence_error(run_cprofile(tmp_path, PLAIN_PROGRAM), read_doctor, says="not UTF-8 text")


# --- fuzzing: never anything but EvidenceError -------------------------------------------


def only_evidence_errors(path: Path, content: bytes) -> None:
    path.write_bytes(content)
    for reader in (read_profile, read_doctor):
        try:
            reader(path)
        except EvidenceError as exc:
            assert "\n" not in str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=200), prefix=st.sampled_from([b"", b"{", b"\xfb", b"{)", b"[", b"{ "]))
def test_fuzz_random_bytes(tmp_path: Path, content: bytes, prefix: bytes) -> None:
    only_evidence_errors(tmp_path / "fuzz", prefix + content)


@pytest.fixture(scope="module")
def small_pstats(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    source = "def f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)\n\nf(5)\n"
    return run_cprofile(tmp_path_factory.mktemp("pstats"), source).read_bytes()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mutated_pstats(tmp_path: Path, small_pstats: bytes, data: st.DataObject) -> None:
    content = bytearray(small_pstats)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(content) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if action == "flip":
            content[at] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del content[at:]
        elif action == "insert":
            content[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        else:
            del content[at : at + data.draw(st.integers(1, 16))]
        if not content:
            break
    only_evidence_errors(tmp_path / "mutated.prof", bytes(content))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    )
)
def test_fuzz_json_shapes(tmp_path: Path, value: object) -> None:
    """Any JSON value, bare or under the keys the readers look at."""
    for document in (
        value,
        [value],
        {"shared": {"frames": value}, "profiles": []},
        {"shared": {"frames": [{"name": "f", "file": "a.py", "line": 1}]}, "profiles": [value]},
        {
            "shared": {"frames": [{"name": "f", "file": "a.py", "line": 1}]},
            "profiles": [{"type": "sampled", "unit": "none", "samples": value, "weights": value}],
        },
        [{"filename": "a.py", "lineno": 1, "description": "d", "source": value}],
    ):
        only_evidence_errors(tmp_path / "fuzz.json", json.dumps(document).encode())


def test_importing_the_package_loads_no_parser() -> None:
    code = (
        "import sys, cpq.runtime\n"
        "loaded = [m for m in ('cpq.runtime.cprofile', 'cpq.runtime.speedscope', 'cpq.runtime.doctor',"
        " 'cpq.runtime.marshal_reader') if m in sys.modules]\n"
        "print(loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


PROGRAM_WITH_ENTRIES = textwrap.dedent(
    """\
    def step(u):
        return [x * 2 for x in u]


    u = list(range(100))
    for _ in range(3):
        u = step(u)
    """
)


def test_cprofile_comprehension_and_module_entries(tmp_path: Path) -> None:
    profile = read_profile(run_cprofile(tmp_path, PROGRAM_WITH_ENTRIES))
    names = {row[2] for row in profile.functions if row[0] == "prog.py"}
    assert {"<module>", "step"} <= names
    assert function(profile, "prog.py", "step")[3] == 3
