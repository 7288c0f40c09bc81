"""`cpq fix` and `cpq assess --fix`: the mechanical recipes applied, as a user runs them.

Each fix is checked on a snippet by its exact diff; the R110 rewrites are run under NumPy beside
the code they replace, on 1-D and 2-D arrays, to show where they give the same results (and,
for the unsafe ones, where they do not).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
from conftest import write_notebook
from typer.testing import CliRunner

from cpq.cli.app import app

runner = CliRunner()


def cpq(*args: object):  # type: ignore[no-untyped-def]
    return runner.invoke(app, [str(a) for a in args])


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def diff_of(path: Path, *options: str) -> str:
    """The diff `cpq fix PATH --diff` shows, after checking the run ended well."""
    done = cpq("fix", path, "--diff", *options)
    assert done.exit_code == 0, done.output
    return done.stdout


# -- each fix, by its diff -----------------------------------------------------------------------

ANY_ALL = """\
import numpy as np


def f(m: np.ndarray):
    ok = any(m)
    if all(m):
        return ok
    return not any(m)
"""


def test_any_and_all_become_numpy_calls_bool_where_the_value_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path, "m.py", ANY_ALL)
    assert diff_of(path) == (
        "--- a/m.py\n"
        "+++ b/m.py\n"
        "@@ -2,7 +2,7 @@\n"
        " \n"
        " \n"
        " def f(m: np.ndarray):\n"
        "-    ok = any(m)\n"
        "-    if all(m):\n"
        "+    ok = bool(np.any(m))\n"
        "+    if np.all(m):\n"
        "         return ok\n"
        "-    return not any(m)\n"
        "+    return not np.any(m)\n"
    )


ORDER = """\
import numpy as np


def f(a: np.ndarray, n, m):
    b = a.reshape(n, m, order="C")
    c = np.zeros(n, order='C',)
    d = np.array(a, order="K")
    e = np.zeros(n, order="F")
    g = a.ravel(order="F")
    return b, c, d, e, g
"""


def test_an_order_that_is_the_default_is_dropped(tmp_path: Path) -> None:
    path = write(tmp_path, "o.py", ORDER)
    assert diff_of(path) == (
        "--- a/o.py\n"
        "+++ b/o.py\n"
        "@@ -2,9 +2,9 @@\n"
        " \n"
        " \n"
        " def f(a: np.ndarray, n, m):\n"
        '-    b = a.reshape(n, m, order="C")\n'
        "-    c = np.zeros(n, order='C',)\n"
        '-    d = np.array(a, order="K")\n'
        "+    b = a.reshape(n, m)\n"
        "+    c = np.zeros(n)\n"
        "+    d = np.array(a)\n"
        '     e = np.zeros(n, order="F")\n'
        '     g = a.ravel(order="F")\n'
        "     return b, c, d, e, g\n"
    )


def test_unsafe_fixes_sum_max_min_in_place_and_layout(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "u.py",
        "import numpy as np\n\n\n"
        "def f(a: np.ndarray, v: np.ndarray, n, steps):\n"
        "    s = sum(a) + max(a) - min(a)\n"
        '    e = np.zeros(n, order="F")\n'
        "    for _ in range(steps):\n"
        "        v = v * 0.5\n"
        '    g = a.ravel(order="F")\n'
        "    return s, e, v, g\n",
    )
    assert diff_of(path, "--unsafe-fixes") == (
        "--- a/u.py\n"
        "+++ b/u.py\n"
        "@@ -2,9 +2,9 @@\n"
        " \n"
        " \n"
        " def f(a: np.ndarray, v: np.ndarray, n, steps):\n"
        "-    s = sum(a) + max(a) - min(a)\n"
        '-    e = np.zeros(n, order="F")\n'
        "+    s = np.sum(a, axis=0) + np.max(a, axis=0) - np.min(a, axis=0)\n"
        "+    e = np.zeros(n)\n"
        "     for _ in range(steps):\n"
        "-        v = v * 0.5\n"
        "+        v *= 0.5\n"
        '     g = a.ravel(order="F")\n'
        "     return s, e, v, g\n"
    )


def test_an_unsafe_fix_waits_for_unsafe_fixes(tmp_path: Path) -> None:
    text = "import numpy as np\n\n\ndef f(a: np.ndarray):\n    return sum(a)\n"
    path = write(tmp_path, "s.py", text)
    done = cpq("fix", path)
    assert done.exit_code == 0, done.output
    assert done.stdout == "0 fixes applied (1 more with --unsafe-fixes)\n"
    assert path.read_text() == text
    shown = cpq("-v", "fix", path, "--diff")
    assert "sum(a) -> np.sum(a, axis=0) (unsafe: NumPy adds a float array in another order" in shown.stderr
    done = cpq("fix", path, "--unsafe-fixes")
    assert done.exit_code == 0, done.output
    assert done.stdout == "1 fix applied\n"
    assert path.read_text() == text.replace("sum(a)", "np.sum(a, axis=0)")


# -- R110: the NumPy forms beside the builtins ---------------------------------------------------

BUILTINS = "import numpy as np\n\n\n" + "".join(
    f"def {name}_of(a: np.ndarray):\n    return {name}(a)\n\n\n"
    for name in ("sum", "max", "min", "any", "all")
)


def _functions(text: str) -> dict:
    namespace: dict = {}
    exec(compile(text, "<fixed>", "exec"), namespace)  # the test's own snippet, before and after
    return namespace


def _outcome(function, array):  # type: ignore[no-untyped-def]
    """What the function gives for `array`: (type, dtype, shape, value), or the exception's type."""
    try:
        value = function(array.copy())
    except (ValueError, TypeError) as exc:  # the builtins raise on rows of several elements
        return type(exc).__name__
    found = np.asarray(value)
    return type(value).__name__, found.dtype.str, found.shape, found.tolist()


@pytest.fixture(scope="module")
def builtins_fixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """The builtins snippet as written and as `cpq fix --unsafe-fixes` leaves it."""
    path = tmp_path_factory.mktemp("builtins") / "b.py"
    path.write_text(BUILTINS)
    done = cpq("fix", path, "--unsafe-fixes")
    assert done.exit_code == 0 and done.stdout.startswith("5 fixes applied"), done.output
    fixed = path.read_text()
    assert "return np.sum(a, axis=0)" in fixed and "return bool(np.any(a))" in fixed
    return _functions(BUILTINS), _functions(fixed)


ONE_D = [np.array([3, -1, 7, 2]), np.array([0.5, 2.25, -1.0]), np.array([True, False]), np.array([0, 0])]
TWO_D = [np.arange(12).reshape(4, 3), np.array([[1.5], [-2.0], [4.0]]), np.array([[0], [3]])]
SHAPES = [np.zeros(0), np.zeros((0, 3)), np.ones((2, 1, 1)), np.zeros((3, 2), dtype=bool)]


@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.parametrize("array", ONE_D + TWO_D + SHAPES, ids=repr)
def test_any_all_fixed_give_what_the_builtin_gives(builtins_fixed, name: str, array: np.ndarray) -> None:
    """Safe: the same bool wherever the builtin returns (an empty (0, 3) array included); where it
    raises (rows of several elements) the fixed code may answer."""
    before, after = builtins_fixed
    expected = _outcome(before[f"{name}_of"], array)
    if expected != "ValueError":
        assert _outcome(after[f"{name}_of"], array) == expected


@pytest.mark.parametrize("name", ["sum", "max", "min"])
@pytest.mark.parametrize("array", ONE_D + TWO_D, ids=repr)
def test_reductions_along_axis_0_match_the_builtin_on_1d_and_2d(builtins_fixed, name, array) -> None:
    """axis=0 is the builtin's axis: along the rows of a 2-D array (the builtin max/min raise when
    a row has several elements), and for a 1-D array the same scalar."""
    before, after = builtins_fixed
    expected = _outcome(before[f"{name}_of"], array)
    if name == "sum" or array.ndim == 1 or array.shape[1] == 1:
        assert _outcome(after[f"{name}_of"], array) == expected
        assert isinstance(expected, tuple) and expected[2] == array.shape[1:]
    else:
        assert expected == "ValueError"


def test_why_sum_max_min_are_unsafe(builtins_fixed) -> None:
    before, after = builtins_fixed
    small = np.array([100, 100], dtype=np.int8)
    with np.errstate(over="ignore"):  # the builtin's int8 sum wraps around, as it is shown to
        assert int(before["sum_of"](small)) == -56 and int(after["sum_of"](small)) == 200
    with_nan = np.array([1.0, np.nan, 2.0])
    assert before["max_of"](with_nan) == 2.0 and np.isnan(after["max_of"](with_nan))
    assert _outcome(before["sum_of"], np.zeros(0)) == ("int", "<i8", (), 0)
    assert _outcome(after["sum_of"], np.zeros(0))[0] == "float64"


# -- re-assessment ------------------------------------------------------------------------------


def test_a_fix_the_reassessment_refuses_is_dropped(tmp_path: Path) -> None:
    """`if np.any(m):` in a loop is R105 (a branch on an array), and a shadowed np no NumPy."""
    path = write(
        tmp_path,
        "d.py",
        "import numpy as np\n\n\n"
        "def f(m: np.ndarray, steps):\n"
        "    for _ in range(steps):\n"
        "        if any(m):\n"
        "            print(steps)\n\n\n"
        "def g(m: np.ndarray):\n"
        "    np = None\n"
        "    return all(m), np\n",
    )
    done = cpq("fix", path, "--diff")
    assert done.exit_code == 0, done.output
    assert done.stdout == ""
    assert done.stderr == (
        "0 fixes would be applied\n"
        "2 dropped, the re-assessment refusing them:\n"
        "  d.py:6: R110 any(m) -> np.any(m): it brings R105\n"
        "  d.py:12: R110 all(m) -> bool(np.all(m)): the call it writes is not numpy.all there\n"
    )


def test_suppressed_findings_are_not_fixed(tmp_path: Path) -> None:
    text = "import numpy as np\n\n\ndef f(m: np.ndarray):\n    return any(m)  # cpq: ignore[R110]\n"
    path = write(tmp_path, "q.py", text)
    assert diff_of(path) == ""
    assert path.read_text() == text


def test_codes_turned_off_in_the_configuration_are_not_fixed(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[tool.cpq]\nignore = ["R110"]\n')
    path = write(tmp_path, "m.py", ANY_ALL)
    assert diff_of(tmp_path) == ""
    assert path.read_text() == ANY_ALL


# -- what is written, and what not --------------------------------------------------------------


def test_diff_writes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, "m.py", ANY_ALL)
    before = path.stat()
    assert diff_of(tmp_path) != ""
    assert path.read_text() == ANY_ALL and path.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]  # no .cpq/, no temporary file


def test_assess_fix_diff_is_the_dry_run(tmp_path: Path) -> None:
    path = write(tmp_path, "m.py", ANY_ALL)
    assert cpq("assess", tmp_path, "--fix", "--diff").stdout == diff_of(tmp_path)
    assert path.read_text() == ANY_ALL
    alone = cpq("assess", tmp_path, "--diff")
    assert alone.exit_code == 2 and "--diff and --unsafe-fixes go with --fix" in alone.output
    done = cpq("assess", tmp_path, "--fix")
    assert done.exit_code == 0 and done.stdout == "3 fixes applied\n"
    assert "ok = bool(np.any(m))" in path.read_text()


def test_notebooks_are_skipped_and_said_so(tmp_path: Path) -> None:
    notebook = tmp_path / "n.ipynb"
    write_notebook(
        notebook,
        [
            {"cell_type": "code", "metadata": {}, "source": ["import numpy as np\n", "m = np.ones(3) > 0\n"]},
            {"cell_type": "code", "metadata": {}, "source": ["ok = any(m)\n"]},
        ],
    )
    before = notebook.read_bytes()
    done = cpq("fix", tmp_path)
    assert done.exit_code == 0, done.output
    assert done.stdout == "0 fixes applied\nnotebooks are not rewritten: 1 fixable finding left in n.ipynb\n"
    assert notebook.read_bytes() == before


def test_encoding_line_endings_and_mode_are_kept(tmp_path: Path) -> None:
    body = "import numpy as np\n\n\ndef f(m: np.ndarray):\n    return any(m)  # caf\xe9\n"
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(body.replace("\n", "\r\n").encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n" + body).encode("latin-1"))
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + body.rstrip("\n").encode())
    os.chmod(latin, 0o750)
    done = cpq("fix", tmp_path)
    assert done.exit_code == 0 and done.stdout == "3 fixes applied\n", done.output
    fixed = body.replace("any(m)", "bool(np.any(m))")
    assert crlf.read_bytes() == fixed.replace("\n", "\r\n").encode()
    assert latin.read_bytes() == ("# -*- coding: latin-1 -*-\n" + fixed).encode("latin-1")
    assert bom.read_bytes() == b"\xef\xbb\xbf" + fixed.rstrip("\n").encode()
    assert stat.S_IMODE(latin.stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bom.py", "crlf.py", "latin.py"]


def test_only_path_is_written(tmp_path: Path) -> None:
    """PATH one file: its neighbours stay as they are; PATH a link: the file it names too."""
    one = write(tmp_path, "one.py", ANY_ALL)
    other = write(tmp_path, "other.py", ANY_ALL)
    done = cpq("fix", one)
    assert done.exit_code == 0 and done.stdout == "3 fixes applied\n", done.output
    assert one.read_text() != ANY_ALL and other.read_text() == ANY_ALL
    link = tmp_path / "inside" / "link.py"
    link.parent.mkdir()
    link.symlink_to(other)
    done = cpq("fix", link)
    assert done.exit_code == 2
    assert "link.py: not fixed: a symbolic link: not rewritten" in done.stderr
    assert other.read_text() == ANY_ALL and link.is_symlink()


def test_a_file_changed_since_it_was_read_is_left_alone(tmp_path: Path) -> None:
    from cpq.fix.edits import Edit
    from cpq.fix.write import NotWritten, write_fixed

    path = write(tmp_path, "c.py", "x = sum(a)\n")
    with pytest.raises(NotWritten, match="changed since it was read"):
        write_fixed(path, "0" * 64, "x = sum(a)\n", [Edit(4, 7, "np.sum")])
    assert path.read_text() == "x = sum(a)\n"


def test_fix_help_and_nothing_to_fix(tmp_path: Path) -> None:
    """`cpq fix --help` says what is safe and the exit statuses; a tree with nothing to fix says so."""
    done = cpq("fix", "--help")
    assert done.exit_code == 0 and "--unsafe-fixes" in done.stdout and "Notebooks" in done.stdout
    write(tmp_path, "plain.py", "print(1)\n")
    done = cpq("fix", tmp_path)
    assert done.exit_code == 0 and done.stdout == "0 fixes applied\n"
    assert cpq("fix", tmp_path / "missing").exit_code == 2
