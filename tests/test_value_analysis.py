"""Rule tests for the value analysis (catalogue.md, "Real code hides its arrays; follow them").

Each pattern has code where the evidence reaches a finding and code where it must not: flow
sensitivity, scalars next to arrays, host NumPy beside cuPyNumeric, dead code (TYPE_CHECKING,
`if 0:`), closures, attributes, returns, the array module as a parameter, call-site arguments,
interior loops, SciPy summaries, callbacks, ufunc methods and setters in the manifest, and the
"unresolved" count. Markers as in test_rules.py (see markers.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from markers import Mark, read_marks

from cpq.config.context import Context
from cpq.pipeline.assessment import Assessment, assess

FLOW = """\
import numpy as np


def list_then_array(n):  # reject: R103
    xs = [0.0] * n
    for v in xs:  # resolved: loop
        print(v)
    xs = np.array(xs)
    return xs * 2.0  # expect: R001


def array_after_list(n):
    xs = [0.0] * n
    xs = np.array(xs)
    for v in xs:  # expect: R103
        print(v)
"""

SCALARS = """\
import numpy as np


def advance(u: np.ndarray, t_end):  # reject: R105
    dx = 1.0 / 64
    sigma = 0.5
    dt = sigma * dx  # reject: R001
    t = 0.0
    while t < t_end:
        u = u - dt * np.roll(u, 1)  # expect: R001
        t += dt
    return u


def converge(r: np.ndarray, tol):
    while np.linalg.norm(r) > tol:  # expect: R105
        r = r * 0.5
    return r
"""

HOST_DEVICE = """\
import cupynumeric as np
import numpy as host_np


def step(u, xs, n_steps):
    for _ in range(n_steps):
        w = float(host_np.sum(xs))  # reject: R104
        k = host_np.interp(w, xs, xs)  # nogap: numpy.interp
        u = u * k + float(np.sum(u))  # expect: R104
        v = np.interp(u, u, u)  # gap: numpy.interp
    return u, v


step(np.zeros(10), host_np.ones(3), 5)
"""

DEAD_CODE = """\
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mpi4py import MPI  # reject: R108


def run(n):
    a = np.zeros(n)
    if 0:
        for i in range(len(a)):
            a[i] = 1.0  # reject: R101
    for i in range(len(a)):
        a[i] = 2.0  # expect: R101
    return a
"""

MPI_LIVE = """\
import numpy as np
from mpi4py import MPI  # expect: R108


def exchange(n):
    u = np.zeros(n)
    MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, u)
    return u
"""

CLOSURES = """\
import numpy as np


def outer(n, n_steps):
    a = np.ones(n)

    def norm_now():
        return a.sum().item()  # expect: R104

    for _ in range(n_steps):
        norm_now()
    return a


def outer_list(n, n_steps):
    a = [1.0] * n

    def total():  # reject: R104
        return float(a[0])

    for _ in range(n_steps):
        total()
    return a
"""

ATTRIBUTES = """\
import numpy as np


class Swarm:
    def __init__(self, n):
        self.vel = np.zeros((n, 3))
        self.names = ["a", "b"]

    def speeds(self):
        out = []
        for v in self.vel:  # expect: R103
            out.append(v)
        return out

    def labels(self):  # reject: R103
        out = []
        for v in self.names:
            out.append(v)
        return out


def drive(n):
    s = Swarm(n)
    for _ in range(10):
        s.speeds()
        s.labels()
"""

RETURNS = """\
import numpy as np


def profile(x):
    return np.sin(x)


def names():
    return ["a", "b"]


def pair(n):
    return np.zeros(n), 3


def use(x):
    depth = profile(x)
    for d in depth:  # expect: R103
        print(d)


def use_names():  # reject: R103
    for d in names():
        print(d)


def use_pair(n):
    grid, k = pair(n)
    for row in grid:  # expect: R103
        print(row, k)


def identity(obj):
    return obj


def use_identity(n):
    grid = identity(np.zeros(n))
    for row in grid:  # expect: R103
        print(row)
    names = identity(["a", "b"])
    for name in names:  # reject: R103
        print(name)


def mixed(flag):
    out = "none"
    if flag:
        out = np.zeros(3)
    return out


def use_mixed(flag):  # reject: R103
    for v in mixed(flag):
        print(v)
"""

MODULE_PARAM = """\
import numpy


def run(np, n, n_steps):
    grid = np.zeros((n, n))
    for _ in range(n_steps):
        s = float(grid.sum())  # expect: R104
    return s


def run_backend(backend, n, n_steps):
    grid = backend.zeros((n, n))
    for _ in range(n_steps):
        s = float(grid.sum())  # expect: R104
    return s


def run_lib(lib, n, n_steps):  # reject: R104
    grid = lib.zeros((n, n))  # unresolved: call
    for _ in range(n_steps):
        s = float(grid.sum())  # unresolved: call
    return s


run(numpy, 64, 10)
run_backend(numpy, 64, 10)
"""

CALL_SITES = """\
import numpy as np


def smooth(u, out):
    for i in range(1, len(u) - 1):
        out[i] = 0.5 * (u[i - 1] + u[i + 1])  # expect: R101
    return out


def smooth_lists(u, out):  # reject: R101
    for i in range(1, len(u) - 1):  # resolved: loop
        out[i] = 0.5 * (u[i - 1] + u[i + 1])
    return out


def smooth_unknown(u, out):  # reject: R101
    for i in range(1, len(u) - 1):  # unresolved: loop
        out[i] = 0.5 * (u[i - 1] + u[i + 1])
    return out


def doubled(x):
    m = x.shape[0]
    out = np.zeros(m)
    for j in range(m):
        out[j] = 2 * x[j]  # expect: R101
    return out


smooth(np.zeros(100), np.zeros(100))
smooth_lists([0.0] * 100, [0.0] * 100)
doubled(np.zeros(100))
doubled(float(3))  # a number at one call site, an array at another: still an array
"""

SIGNATURES = """\
import numpy as np


def namespace(*arrays):  # reject: R103
    for arr in arrays:
        print(type(arr))


def spaced(u, spacing: float):  # reject: R105
    if spacing <= 0:
        raise ValueError(spacing)
    return u * spacing


def scaled(u, k):  # reject: R105
    if k > 0:
        return u * k
    return u


def scaled_by_array(u, k):
    if k > 0:  # expect: R105
        return u * k
    return u


def caller(n):
    u = np.zeros(n)
    for _ in range(10):
        namespace(u)
        spaced(u, u.max())
        scaled(u, 2)
        scaled_by_array(u, u.max())
"""

SCIPY_VALUES = """\
import numpy as np
from scipy.ndimage import find_objects, gaussian_filter, label
from scipy.optimize import minimize
from scipy.spatial.distance import cdist


def nearest(a, b):
    d = cdist(a, b)
    for row in d:  # expect: R103
        print(np.argmin(row))


def fit(f, x0):  # reject: R103
    res = minimize(f, x0)
    for v in res.x:
        print(v)


def regions(im, n_steps):  # reject: R103, R105
    for _ in range(n_steps):
        labels, n = label(im > 0)
        if n > 1:
            im = im * 0.5
        for box in find_objects(labels):
            print(box)
    return im


def smoothed(im, n_steps):
    for _ in range(n_steps):
        im = gaussian_filter(im, 1.0)
        if im.max() > 1.0:  # expect: R105
            im = im / 2.0
    return im
"""

CALLBACKS = """\
import matplotlib.animation as animation
import numpy as np


def make(fig, n):
    u = np.zeros(n)

    def update(frame):
        return float(u.max())  # expect: R104

    def once(frame):  # reject: R104
        return float(u.max())

    animation.FuncAnimation(fig, update, frames=100)
    once(0)
"""

UFUNCS = """\
import numpy as np


def table(a: np.ndarray, b: np.ndarray, idx):
    t = np.subtract.outer(a, b)  # gap: numpy.subtract.outer
    s = np.add.reduceat(a, idx)  # gap: numpy.add.reduceat
    m = np.ma.masked_invalid(a)  # gap: numpy.ma.masked_invalid
    a.shape = (a.size,)  # gap: numpy.ndarray.shape=
    c = np.add(a, b)  # nogap: numpy.add
    return t, s, m, c
"""

BLIND_SPOTS = """\
import numpy as np


def blind(items, n):
    a = np.zeros(n)
    for v in items:  # unresolved: loop
        a += v
    for w in [1, 2, 3]:  # resolved: loop
        a *= w
    return a
"""

# A range loop's variable and enumerate's count are ints, even beside an array in arithmetic;
# np.ndindex yields index tuples, not an array to iterate.
LOOP_COUNTERS = """\
import numpy as np


def cosine_sum(M, a):
    fac = np.linspace(-np.pi, np.pi, M)
    w = np.zeros(M)
    for k in range(a.shape[0]):
        w += a[k] * np.cos(k * fac)  # reject: R007
    for j, c in enumerate(a):
        w = w + a[j] * fac  # reject: R007
    return w


def positions(a, lo):
    for i in np.ndindex(a.shape):  # reject: R103
        a[i] = 0.0
    return a[a > lo]  # expect: R007


def masked(a, m):
    a = np.asarray(a)
    keep = a > m
    for step in range(3):
        a = a + a[keep]  # expect: R007
    return a
"""

# No array work in this file; its loops are not counted as blind spots.
PLAIN = """\
def names(items):
    for v in items:  # resolved: loop
        print(v)
"""

PROJECT = {
    "flow.py": FLOW,
    "scalars.py": SCALARS,
    "host_device.py": HOST_DEVICE,
    "dead_code.py": DEAD_CODE,
    "mpi_live.py": MPI_LIVE,
    "closures.py": CLOSURES,
    "attributes.py": ATTRIBUTES,
    "returns.py": RETURNS,
    "module_param.py": MODULE_PARAM,
    "call_sites.py": CALL_SITES,
    "signatures.py": SIGNATURES,
    "scipy_values.py": SCIPY_VALUES,
    "callbacks.py": CALLBACKS,
    "ufuncs.py": UFUNCS,
    "blind_spots.py": BLIND_SPOTS,
    "loop_counters.py": LOOP_COUNTERS,
    "plain.py": PLAIN,
}

MARKS = read_marks(PROJECT)


def _params(*kinds: str) -> list:
    return [pytest.param(m, id=f"{m.kind}-{m.code}-{m.file}:{m.line}") for m in MARKS if m.kind in kinds]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Assessment:
    root = tmp_path_factory.mktemp("values")
    for rel, text in PROJECT.items():
        (root / rel).write_text(text)
    return assess(root, Context.from_options(elements="50M", gpus=2))


def test_every_file_is_assessed(project: Assessment) -> None:
    assert sorted(project.files) == sorted(PROJECT)
    assert project.skipped == []


@pytest.mark.parametrize("mark", _params("expect"))
def test_expected_finding(project: Assessment, mark: Mark) -> None:
    lines = [
        f.line
        for f in project.findings
        if f.file == mark.file and f.function == mark.function and f.code == mark.code
    ]
    assert mark.line in lines, f"{mark.code} expected at {mark.file}:{mark.line}; there: {lines}"


@pytest.mark.parametrize("mark", _params("reject"))
def test_rejected_finding(project: Assessment, mark: Mark) -> None:
    hits = [
        f
        for f in project.findings
        if f.file == mark.file
        and f.code == mark.code
        and (f.function == mark.function if mark.whole_function else f.line == mark.line)
    ]
    assert hits == [], f"{mark.code} must not be reported at {mark.file}:{mark.line}"


@pytest.mark.parametrize("mark", _params("gap", "nogap"))
def test_api_gap(project: Assessment, mark: Mark) -> None:
    gaps = {(g.api, g.file, g.line) for g in project.decision.api_gaps}
    listed = (mark.code, mark.file, mark.line) in gaps
    assert listed == (mark.kind == "gap"), f"{mark.code} at {mark.file}:{mark.line}: gaps {gaps}"


@pytest.mark.parametrize("mark", _params("unresolved", "resolved"))
def test_unresolved_site(project: Assessment, mark: Mark) -> None:
    counted = (mark.code, mark.file, mark.line) in set(project.unresolved)
    assert counted == (mark.kind == "unresolved"), (
        f"{mark.code} at {mark.file}:{mark.line}: unresolved sites {project.unresolved}"
    )


def test_every_pattern_has_a_positive_and_a_negative() -> None:
    for file in PROJECT:
        kinds = {m.kind for m in MARKS if m.file == file}
        if file == "plain.py":
            assert kinds == {"resolved"}
            continue
        positive = kinds & {"expect", "gap", "unresolved"}
        negative = kinds & {"reject", "nogap", "resolved"}
        if file == "mpi_live.py":  # its negative is dead_code.py's TYPE_CHECKING import
            negative = {"reject"}
        assert positive and negative, f"{file}: {kinds}"


# -- across calls: constants, sizes and recursion ---------------------------------------------


def _assess_json(tmp_path: Path, text: str, *args: str) -> dict:
    (tmp_path / "main.py").write_text(text)
    out = subprocess.run(
        [sys.executable, "-m", "cpq", "assess", str(tmp_path), "--no-cache", "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_recursive_call_with_a_counted_down_constant_ends(tmp_path: Path) -> None:
    """f(n - 1) inside f must not make n take every value below 10 (nor loop for ever)."""
    report = _assess_json(
        tmp_path,
        (
            "import numpy as np\n\n\n"
            "def countdown(n):\n"
            "    if n > 0:\n"
            "        return countdown(n - 1)\n"
            "    return np.zeros((n, n))\n\n\n"
            "countdown(4096)\n"
        ),
    )
    assert report["context"]["elements"]["source"] in ("inferred", "default")


def test_a_name_whose_value_reads_itself_ends(tmp_path: Path) -> None:
    """`x = x + 1` bound once (at module or class level, or over several lines) has no
    constant value: the arithmetic on constants must not chase it for ever."""
    report = _assess_json(
        tmp_path,
        (
            "import numpy as np\n\n"
            "LIMIT = LIMIT + 1\n"
            "total = (1 +\n    total)\n\n\n"
            "class Grid:\n"
            "    n = n * 2\n\n\n"
            "def solve():\n"
            "    return np.zeros((LIMIT, total))\n"
        ),
    )
    assert report["context"]["elements"]["source"] == "default"


def test_test_data_does_not_size_the_problem(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_solver.py").write_text(
        "import numpy as np\n\nfrom solver import step\n\n\n"
        "def test_step():\n"
        "    for _ in range(3):\n"
        "        step(np.zeros((500, 4)))\n"
    )
    report = _assess_json(
        tmp_path, ("import numpy as np\n\n\ndef step(u):\n    return u * 2.0 + np.roll(u, 1)\n")
    )
    assert report["context"]["elements"]["source"] == "default"


SMALL_KERNEL = (
    "import numpy as np\n\n\n"
    "def kernel(r):\n"
    "    return np.ones((2 * r + 1, 2 * r + 1))\n\n\n"
    "def run(image, steps):\n"
    "    for _ in range(steps):\n"
    "        out = {alloc}\n"
    "        out += image * kernel(10).sum()\n"
    "    return out\n"
)


def test_a_small_fixed_size_is_the_size_when_every_hot_array_has_it(tmp_path: Path) -> None:
    report = _assess_json(tmp_path, SMALL_KERNEL.format(alloc="np.zeros(441)"))
    assert report["context"]["elements"]["source"] == "inferred"
    assert report["context"]["elements"]["value"] == 441


def test_a_small_fixed_size_beside_an_unsized_hot_array_is_not_the_size(tmp_path: Path) -> None:
    """A 21 x 21 kernel next to an array sized by the data: the size is not fixed by the
    code, and Gate 2 must not fail on the kernel."""
    report = _assess_json(tmp_path, SMALL_KERNEL.format(alloc="np.zeros(image.shape)"))
    assert report["context"]["elements"]["source"] == "default"
    assert {g["gate"]: g["status"] for g in report["gates"]}[2] != "fail"


def test_size_from_call_site_constants_not_from_a_plot(tmp_path: Path) -> None:
    report = _assess_json(
        tmp_path,
        (
            "import numpy as np\n\n\n"
            "def solve(n, steps):\n"
            "    u = np.zeros((n, n))\n"
            "    for _ in range(steps):\n"
            "        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])\n"
            "    return u\n\n\n"
            "def plot(u):\n"
            "    x = np.linspace(0.0, 1.0, 2500)\n"
            "    return x, u\n\n\n"
            "plot(solve(8192, 100))\n"
        ),
    )
    elements = report["context"]["elements"]
    assert elements["source"] == "inferred"
    assert elements["value"] == 8192 * 8192
    assert elements["where"].startswith("main.py:")


LOOP_FILES = "loop(L, _, _, _, _), node(L, _, S, _, _), scope(S, _, _, F, _, _)"


def test_pure_python_grid_beside_array_code_is_assessed(tmp_path: Path) -> None:
    """Every file gets facts: a list-of-lists loop in a file that neither mentions NumPy nor is
    imported by a file that does is still there for the rules and for `cpq query`."""
    (tmp_path / "grid.py").write_text(
        "def relax(grid, n_steps):\n"
        "    for _ in range(n_steps):\n"
        "        for r in range(1, len(grid) - 1):\n"
        "            for c in range(1, len(grid[0]) - 1):\n"
        "                grid[r][c] = 0.25 * (grid[r - 1][c] + grid[r + 1][c])\n"
        "    return grid\n"
    )
    report = _assess_json(
        tmp_path,
        (
            "import numpy as np\n\n\n"
            "def main(n):\n"
            "    for _ in range(10):\n"
            "        u = np.ones(n) * 2.0\n"
            "    return u\n"
        ),
    )
    assert report["files"]["assessed"] == 2
    fact_rows = subprocess.run(
        [sys.executable, "-m", "cpq", "query", LOOP_FILES, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "grid.py" in fact_rows.stdout, fact_rows.stdout + fact_rows.stderr
