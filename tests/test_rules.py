"""Rule tests: for every R-code of the catalogue, code that must and must not produce it.

Every code's folder holds its fixture, ``rules/codes/RXXX/fixture.py`` (and, for a scenario
that needs several modules, ``fixture_*.py``). The fixtures of all codes, written as modules
``rxxx.py`` / ``rxxx_*.py``, and the few modules below that are no one code's (import aliases,
``import cupynumeric as np``, a hot path across a package) make one small project that is
assessed once. A new code's fixture is collected with no edit here. Markers in the fixtures say
what the rules must conclude (see markers.py):

* ``# expect: R101`` on a line: a finding R101 is reported at that line, in the function
  that encloses the line (``<module>`` outside any function; a decorator line is outside).
* ``# reject: R101`` on a ``def`` line: no R101 anywhere in that function.
* ``# reject: R301`` on any other line: no R301 at that line.

Verdict tests assess tiny separate files, since the verdict is a property of the whole tree.
A case that the catalogue decides but the rules get wrong is kept and marked ``xfail``
(strict) in ``XFAIL`` with the diagnosis.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from markers import Mark, read_marks

from cpq.config.context import Context
from cpq.pipeline.assessment import Assessment, assess
from cpq.rules.registry import registry

# -- the project --------------------------------------------------------------------------

# Each code's fixtures: rules/codes/R104/fixture.py is written as r104.py, a further
# rules/codes/R108/fixture_launcher.py as r108_launcher.py. Read from the repository, not from the
# installed cpq, so that the fixtures under test are the ones beside the rules being changed.
CODES_DIR = Path(__file__).resolve().parents[1] / "rules" / "codes"


def _module_name(fixture: Path) -> str:
    return fixture.parent.name.lower() + fixture.name.removeprefix("fixture")


def _fixtures(folder: Path) -> list[Path]:
    return sorted([*folder.glob("fixture.py"), *folder.glob("fixture_*.py")])


FIXTURES = {
    _module_name(path): path.read_text(encoding="utf-8")
    for folder in sorted(CODES_DIR.iterdir())
    if folder.is_dir()
    for path in _fixtures(folder)
}

# What is not one code's: import aliases that every rule must see through.
ALIASES = """\
import numpy as np
from numpy import sum as npsum
from numpy import zeros

xp = np


def alias_from_import(n):
    a = zeros((n, 4))
    for row in a:  # expect: R103
        print(row)


def alias_sum_as(a):
    return npsum(a)  # expect: R002


def alias_xp(n):
    b = xp.ones(n)
    return b[::2]  # expect: R106
"""

# `import cupynumeric as np` counts like numpy.
CUPYNUMERIC = """\
import cupynumeric as np


def cn_loop(n):
    a = np.ones(n)
    out = np.zeros(n)
    for i in range(a.shape[0]):
        out[i] = a[i] + 1.0  # expect: R101
    return sum(out), np.sum(a)  # expect: R110, R002
"""

# A hot path through two calls across two modules: driver -> kernels.step -> helpers.measure.
PKG_DRIVER = """\
import numpy as np

from . import helpers
from .kernels import step


def run(n, n_steps):
    u = np.zeros(n)
    for _ in range(n_steps):
        u = step(u)
    return helpers.final_norm(u)
"""

PKG_KERNELS = """\
from .helpers import measure


def step(u):
    scale = measure(u)
    return u * scale
"""

PKG_HELPERS = """\
import numpy as np


def measure(u: np.ndarray):
    return 1.0 / float(np.abs(u).max())  # expect: R104


def final_norm(u: np.ndarray):  # reject: R104
    return float(np.linalg.norm(u))
"""

PROJECT = {
    **FIXTURES,
    "aliases.py": ALIASES,
    "cn.py": CUPYNUMERIC,
    "pkg/__init__.py": "",
    "pkg/driver.py": PKG_DRIVER,
    "pkg/kernels.py": PKG_KERNELS,
    "pkg/helpers.py": PKG_HELPERS,
}

# Cases the catalogue decides and the rules currently get wrong: (file, function, code).
XFAIL: dict[tuple[str, str, str], str] = {}


# -- reading the markers ----------------------------------------------------------------------

MARKS = read_marks(PROJECT)


def _params(kind: str) -> list:
    out = []
    for m in MARKS:
        if m.kind != kind:
            continue
        marks = ()
        reason = XFAIL.get((m.file, m.function, m.code))
        if reason:
            marks = (pytest.mark.xfail(strict=True, reason=reason),)
        ident = f"{m.code}-{m.file}:{m.line}-{m.function}"
        out.append(pytest.param(m, id=ident, marks=marks))
    return out


# -- assessing --------------------------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Assessment:
    root = _write(tmp_path_factory.mktemp("project"), PROJECT)
    return assess(root, Context.from_options(elements="50M", gpus=2))


def found(result: Assessment, file: str, function: str, code: str) -> list[int]:
    return sorted(
        f.line for f in result.findings if f.file == file and f.function == function and f.code == code
    )


# -- the markers hold -------------------------------------------------------------------------


def test_project_is_assessed_whole(project: Assessment) -> None:
    assert sorted(project.files) == sorted(PROJECT)
    assert project.skipped == []


@pytest.mark.parametrize("mark", _params("expect"))
def test_expected_finding(project: Assessment, mark: Mark) -> None:
    lines = found(project, mark.file, mark.function, mark.code)
    assert mark.line in lines, (
        f"{mark.code} expected at {mark.file}:{mark.line} in {mark.function}; {mark.code} there: {lines}"
    )


@pytest.mark.parametrize("mark", _params("reject"))
def test_rejected_finding(project: Assessment, mark: Mark) -> None:
    if mark.whole_function:
        lines = found(project, mark.file, mark.function, mark.code)
        assert lines == [], f"{mark.code} must not be reported in {mark.function}: {lines}"
    else:
        hits = [
            f for f in project.findings if f.file == mark.file and f.line == mark.line and f.code == mark.code
        ]
        assert hits == [], f"{mark.code} must not be reported at {mark.file}:{mark.line}"


def test_every_code_has_a_positive_and_a_negative() -> None:
    # Every code of the registry, each judged by its own fixtures (a marker elsewhere does not count).
    codes = sorted(registry())
    assert codes, "the registry lists no codes"
    without_fixture = [code for code in codes if not _fixtures(CODES_DIR / code)]
    assert without_fixture == [], f"no rules/codes/<code>/fixture.py for {without_fixture}"

    def marked(kind: str, code: str) -> bool:
        modules = {_module_name(path) for path in _fixtures(CODES_DIR / code)}
        return any(m.kind == kind and m.code == code and m.file in modules for m in MARKS)

    without_expect = [code for code in codes if not marked("expect", code)]
    assert without_expect == [], f"no '# expect: <code>' in the fixture of {without_expect}"
    # R304 also has a single-GPU negative: test_r304_not_reported_on_one_gpu.
    without_reject = [code for code in codes if not marked("reject", code)]
    assert without_reject == [], f"no '# reject: <code>' in the fixture of {without_reject}"


def test_findings_carry_kind_and_recipe(project: Assessment) -> None:
    kinds = {"R0": "SCALES", "R1": "BLOCKS", "R2": "REFACTOR", "R3": "INFO"}
    for f in project.findings:
        assert f.kind == kinds[f.code[:2]], f
        if f.kind in ("BLOCKS", "REFACTOR"):
            assert f.recipe, f


# -- counting: one finding per loop nest ------------------------------------------------------


@pytest.mark.parametrize(
    "function, n",
    [("r101_nest", 1), ("r101_lu", 1), ("r101_product", 1), ("r101_two_nests", 2)],
)
def test_r101_one_finding_per_nest(project: Assessment, function: str, n: int) -> None:
    assert len(found(project, "r101.py", function, "R101")) == n


def test_r111_one_finding_per_nest(project: Assessment) -> None:
    # four conversions in a two-deep nest: one finding, at the first offending line (marked)
    assert found(project, "r111.py", "r111_pos", "R111") == [
        m.line for m in MARKS if m.file == "r111.py" and m.function == "r111_pos" and m.code == "R111"
    ]


def test_scales_reported_once_per_function(project: Assessment) -> None:
    # r005_pos has several shifted views and arithmetic; r002_pos two reductions
    assert found(project, "r002.py", "r002_pos", "R002") == [
        m.line for m in MARKS if m.file == "r002.py" and m.function == "r002_pos" and m.code == "R002"
    ]
    for f in project.findings:
        if f.kind == "SCALES":
            same = found(project, f.file, f.function, f.code)
            assert same == [f.line], f


# -- hot paths --------------------------------------------------------------------------------


def test_r104_hot_through_two_calls_across_modules(project: Assessment) -> None:
    [finding] = [f for f in project.findings if f.code == "R104" and f.file == "pkg/helpers.py"]
    assert finding.function == "measure"
    assert finding.hot and finding.counts
    assert "float(" in finding.source_line


def test_boundary_conversion_is_not_hot(project: Assessment) -> None:
    # float(np.sum(a)) after the loop: a boundary value, neither R104 nor on the hot path
    assert found(project, "r104.py", "r104_neg_boundary", "R104") == []
    r002 = [
        f
        for f in project.findings
        if f.file == "r104.py" and f.function == "r104_neg_boundary" and f.code == "R002"
    ]
    assert r002 and not r002[0].hot


@pytest.mark.parametrize("file", ["r108_launcher.py", "r108_mention.py"])
def test_no_r108_without_mpi_beside_array_work(project: Assessment, file: str) -> None:
    assert [f for f in project.findings if f.file == file and f.code == "R108"] == []


def test_r108_counts_although_at_module_level(project: Assessment) -> None:
    [finding] = [f for f in project.findings if f.code == "R108" and f.file == "r108.py"]
    assert finding.function == "<module>"
    assert finding.counts


# -- R304 needs several GPUs ------------------------------------------------------------------

RANDOM_ONE_GPU = """\
import numpy as np


def draws(n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    return x + np.random.rand(n)
"""


def test_r304_not_reported_on_one_gpu(tmp_path: Path) -> None:
    path = tmp_path / "draws.py"
    path.write_text(RANDOM_ONE_GPU)
    result = assess(path, Context.from_options(elements="50M", gpus=1))
    codes = {f.code for f in result.findings}
    assert "R304" not in codes


def test_r304_reported_on_several_gpus(tmp_path: Path) -> None:
    path = tmp_path / "draws.py"
    path.write_text(RANDOM_ONE_GPU)
    result = assess(path, Context.from_options(elements="50M", gpus=4))
    assert sorted(f.line for f in result.findings if f.code == "R304") == [5, 6, 7]


# -- verdicts ---------------------------------------------------------------------------------

THREE_BLOCKS = """\
import numpy as np


def evens(a: np.ndarray):
    return a[::2]


def total(a: np.ndarray):
    return sum(a)


def fortran(a: np.ndarray, n, m):
    return a.reshape(n, m, order="F")
"""

TWO_BLOCKS = """\
import numpy as np


def evens(a: np.ndarray):
    return a[::2]


def total(a: np.ndarray):
    return sum(a)
"""

MPI_ONLY = """\
import numpy as np
from mpi4py import MPI


def reduce_all(a: np.ndarray):
    out = np.empty_like(a)
    MPI.COMM_WORLD.Allreduce(a, out)
    return out
"""

REFACTOR_ONLY = """\
import numpy as np


def diffuse(u: np.ndarray, n_steps):
    for _ in range(n_steps):
        tmp = np.zeros_like(u)
        tmp[1:-1] = 0.5 * (u[:-2] + u[2:])
        u[:] = tmp
    return u
"""

CLEAN = """\
import numpy as np


def diffuse(u: np.ndarray, n_steps):
    tmp = np.zeros_like(u)
    for _ in range(n_steps):
        tmp[1:-1] = 0.5 * (u[:-2] + u[2:])
        u[:] = tmp
    return u
"""

# CLEAN plus a library function (nothing calls it) using np.interp, which the manifest marks
# not implemented.
CLEAN_WITH_INTERP = (
    CLEAN
    + """

def resample(x: np.ndarray, xp: np.ndarray, fp: np.ndarray):
    return np.interp(x, xp, fp)
"""
)


@pytest.mark.parametrize(
    "source, verdict, rule, blocks, refactor",
    [
        pytest.param(THREE_BLOCKS, "SIGNIFICANT REFACTOR", 5, 3, 0, id="three-blocks"),
        pytest.param(TWO_BLOCKS, "LIGHT REFACTOR", 6, 2, 0, id="two-blocks"),
        pytest.param(MPI_ONLY, "SIGNIFICANT REFACTOR", 4, 1, 0, id="r108-alone"),
        pytest.param(REFACTOR_ONLY, "LIGHT REFACTOR", 7, 0, 1, id="refactor-only"),
        pytest.param(CLEAN, "READY", 8, 0, 0, id="nothing"),
        pytest.param(CLEAN_WITH_INTERP, "LIGHT REFACTOR", 9, 0, 0, id="interp-demotes"),
    ],
)
def test_verdict(tmp_path: Path, source: str, verdict: str, rule: int, blocks: int, refactor: int) -> None:
    path = tmp_path / "code.py"
    path.write_text(source)
    result = assess(path, Context.from_options(elements="50M", gpus=1))
    assert result.db.rows("verdict") == [(verdict, rule)]
    counted = [f for f in result.findings if f.counts]
    assert sum(f.kind == "BLOCKS" for f in counted) == blocks
    assert sum(f.kind == "REFACTOR" for f in counted) == refactor


def test_interp_demotion_names_the_api(tmp_path: Path) -> None:
    path = tmp_path / "code.py"
    path.write_text(CLEAN_WITH_INTERP)
    result = assess(path, Context.from_options(elements="50M", gpus=1))
    gaps = result.db.rows("api_gap")
    assert [(api, level, line) for api, level, _glyph, _f, line, _hot in gaps] == [
        ("numpy.interp", "none", 13)
    ]
