"""The API-support manifest: the shipped asset, lookups, refresh on a fake package, diff."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cpq.manifest as manifest_pkg
from cpq.manifest import Entry, Manifest, load
from cpq.manifest.build import build
from cpq.manifest.cli import app
from cpq.manifest.diff import compare
from cpq.manifest.numpy_side import collect
from cpq.manifest.refresh import RefreshError, refresh, unpack_sources
from cpq.manifest.render_md import render
from cpq.manifest.static_scan import PackageScan
from cpq.manifest.upstream_md import parse_file, parse_text

UPSTREAM = Path(__file__).resolve().parents[1].parent / "shared/data/api-support.md"
runner = CliRunner()
# `manifest refresh` reads NumPy's API: NumPy is optional (the `manifest` extra).
needs_numpy = pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="NumPy is not installed")


def invoke(*args: str):
    return runner.invoke(app, list(args))


# -- the shipped asset --------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped() -> Manifest:
    return load()


def test_shipped_manifest_has_provenance(shipped: Manifest) -> None:
    prov = shipped.provenance
    for key in ("cupynumeric_version", "numpy_version", "date", "method", "source"):
        assert prov.get(key), key
    dt.date.fromisoformat(prov["date"])
    assert "nvidia-cupynumeric" in prov["source"]
    assert prov["method"].startswith("static")
    assert load() is shipped  # cached


@pytest.mark.parametrize(
    ("name", "glyph", "words"),
    [
        ("numpy.interp", "✗", "not implemented"),
        ("numpy.linalg.svd", "✓", "single-GPU"),
        ("numpy.fft.fft", "🟡", "partial"),
    ],
)
def test_show_known_facts(name: str, glyph: str, words: str) -> None:
    result = invoke("show", name)
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith(f"{name}: {glyph} ")
    assert words in first


def test_show_partial_prints_its_note(shipped: Manifest) -> None:
    entry = shipped.lookup("numpy.fft.fft")
    assert entry is not None and entry.level == "partial" and entry.glyph == "🟡"
    assert "multi-GPU partial" in entry.note and "batching" in entry.note
    assert f"note: {entry.note}" in invoke("show", "numpy.fft.fft").output


def test_show_levels_in_the_asset(shipped: Manifest) -> None:
    svd = shipped.lookup("numpy.linalg.svd")
    assert svd is not None and (svd.level, svd.glyph) == ("single", "✓")
    interp = shipped.lookup("numpy.interp")
    assert interp is not None and (interp.level, interp.glyph) == ("none", "✗")


def test_unlisted_names_are_silent(shipped: Manifest) -> None:
    for name in ("numpy.mgrid", "numpy.newaxis", "numpy.float64", "numpy.pi", "scipy.fft.fft"):
        assert shipped.lookup(name) is None, name
    result = invoke("show", "numpy.mgrid")
    assert result.exit_code == 0
    assert "not listed" in result.output


@pytest.mark.parametrize(
    "api",
    [
        "numpy.subtract.outer",  # methods of binary ufuncs
        "numpy.add.reduceat",
        "numpy.add.accumulate",
        "numpy.multiply.at",
        "numpy.ma.masked_invalid",  # submodules cuPyNumeric does not have
        "numpy.ma.masked_where",
        "numpy.char.add",
        "numpy.polynomial.Polynomial",
        "numpy.ndarray.shape=",  # attributes NumPy lets code set and cuPyNumeric does not
        "numpy.ndarray.dtype=",
    ],
)
def test_ufunc_methods_submodules_and_setters_are_listed(shipped: Manifest, api: str) -> None:
    entry = shipped.lookup(api)
    assert entry is not None, f"{api} is not listed"
    assert (entry.level, entry.glyph) == ("none", "✗")


def test_a_ufunc_method_the_package_defines_is_not_a_gap(shipped: Manifest) -> None:
    reduce = shipped.lookup("numpy.add.reduce")
    assert reduce is not None and reduce.level != "none"


def test_alias_lookups(shipped: Manifest) -> None:
    abs_entry = shipped.lookup("numpy.abs")
    assert abs_entry is not None and abs_entry.api == "numpy.absolute"
    max_entry = shipped.lookup("numpy.max")
    assert max_entry is not None and max_entry.api == "numpy.amax"
    method = shipped.lookup("numpy.ndarray.sum")
    assert method is not None and method.api == "numpy.ndarray.sum" and method.level == "multi"
    assert shipped.lookup("cupynumeric.abs") == abs_entry
    assert shipped.lookup("np.max") == max_entry
    # An alias cuPyNumeric does not define keeps its own entry and says what to write.
    atan2 = shipped.lookup("numpy.atan2")
    assert atan2 is not None and atan2.api == "numpy.atan2" and atan2.level == "none"
    assert "numpy.arctan2" in atan2.note
    assert "numpy.abs → numpy.absolute" in invoke("show", "numpy.abs").output


def test_datalog_facts(shipped: Manifest) -> None:
    facts = shipped.datalog_facts()
    support = facts["api_support"]
    assert len(support) == len(shipped.entries)
    assert all(len(row) == 4 for row in support)
    assert ("numpy.linalg.svd", "single", "✓", "") in {r[:3] + ("",) for r in support}
    alias = set(facts["api_alias"])
    assert ("numpy.abs", "numpy.absolute") in alias
    assert ("numpy.absolute", "numpy.absolute") in alias
    assert ("cupynumeric.abs", "numpy.absolute") in alias
    assert ("numpy.ndarray.sum", "numpy.ndarray.sum") in alias
    # Every alias row lands on exactly one api_support row.
    listed = {row[0] for row in support}
    assert {canonical for _name, canonical in alias} <= listed
    names = [name for name, _canonical in alias]
    assert len(names) == len(set(names))


# -- status -------------------------------------------------------------------------------


def _write_manifest(path: Path, date: str) -> Path:
    data = Manifest(
        {"numpy.add": Entry("numpy.add", "multi")},
        {},
        {
            "cupynumeric_version": "1.0",
            "numpy_version": "2.0",
            "date": date,
            "method": "test",
            "source": "test",
        },
    )
    path.write_text(data.dumps(), encoding="utf-8")
    return path


def test_status_warns_when_stale(tmp_path: Path) -> None:
    old = _write_manifest(tmp_path / "old.json", "2020-01-01")
    result = invoke("status", "--manifest", str(old))
    assert result.exit_code == 0
    assert "warning:" in result.output and "cpq manifest refresh" in result.output
    assert load(old).stale
    fresh = _write_manifest(tmp_path / "fresh.json", dt.date.today().isoformat())
    result = invoke("status", "--manifest", str(fresh))
    assert result.exit_code == 0 and "warning" not in result.output
    assert "0 days old" in result.output
    assert not load(fresh).stale
    assert load(fresh).age_days(dt.date.today() + dt.timedelta(days=91)) == 91


def test_no_subcommand_is_status() -> None:
    result = invoke()
    assert result.exit_code == 0
    assert "cuPyNumeric:" in result.output and "date:" in result.output


def test_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    for args in (
        ("show", "numpy.add", "--manifest", str(missing)),
        ("diff", str(missing)),
        ("refresh", "--wheel", str(missing), "--output", str(tmp_path / "m.json")),
    ):
        result = invoke(*args)
        assert result.exit_code == 2, args
        assert len(result.output.strip().splitlines()) == 1, result.output


# -- diff ---------------------------------------------------------------------------------


@pytest.mark.skipif(not UPSTREAM.is_file(), reason="upstream table snapshot not present")
def test_diff_against_upstream_table(shipped: Manifest) -> None:
    result = invoke("diff", str(UPSTREAM))
    print(result.output)  # the disagreements, for the record (pytest -s)
    assert result.exit_code == 0
    outcome = compare(shipped, parse_file(UPSTREAM))
    assert outcome.both >= 500
    assert outcome.agreement >= 99.0, result.output
    assert f"agreements: {outcome.agree} ({outcome.agreement:.2f}%)" in result.output
    for d in outcome.disagreements:
        assert d.name in result.output


def test_markdown_round_trip(shipped: Manifest, tmp_path: Path) -> None:
    parsed = parse_text(render(shipped))
    assert set(parsed.entries) == set(shipped.entries)
    for api, entry in shipped.entries.items():
        assert parsed.entries[api].level == entry.level, api
        assert parsed.entries[api].note == entry.note, api
    md = tmp_path / "shipped.md"
    md.write_text(render(shipped), encoding="utf-8")
    result = invoke("diff", str(md))
    assert result.exit_code == 0 and "(100.00%)" in result.output


def test_diff_two_manifests(tmp_path: Path) -> None:
    before = Manifest(
        {"numpy.add": Entry("numpy.add", "multi"), "numpy.foo": Entry("numpy.foo", "none")},
        {"numpy.plus": "numpy.add"},
    )
    after = Manifest(
        {"numpy.add": Entry("numpy.add", "multi"), "numpy.foo": Entry("numpy.foo", "single")},
        {},
    )
    result = compare(after, before)
    assert (result.both, result.agree) == (2, 1)
    assert result.only_theirs == ["numpy.plus"]
    assert [d.name for d in result.disagreements] == ["numpy.foo"]
    a, b = tmp_path / "after.json", tmp_path / "before.json"
    a.write_text(after.dumps(), encoding="utf-8")
    b.write_text(before.dumps(), encoding="utf-8")
    out = invoke("diff", str(b), "--manifest", str(a), "--list")
    assert out.exit_code == 0
    assert "numpy.foo" in out.output and "✓ single" in out.output and "✗ none" in out.output
    assert "only in other: numpy.plus" in out.output


# -- refresh on a tiny fake package -------------------------------------------------------

AVAIL_MULTI = "\n    Availability\n    --------\n    Multiple GPUs, Multiple CPUs\n    "
AVAIL_SINGLE = "\n    Availability\n    --------\n    Single GPU, Single CPU\n    "
FAKE_FILES: dict[str, str] = {
    "cupynumeric/__init__.py": """
from . import fft, linalg, random
from ._array.array import ndarray
from ._module import *
from ._ufunc import *
from numpy import iinfo, float64

acos = arccos
""",
    "cupynumeric/_version.py": '__version__ = version = "0.0.1"\n',
    "cupynumeric/_module/__init__.py": "from .math import *\nfrom .extra import *\n",
    "cupynumeric/_module/math.py": f'''
__all__ = ["amax", "max", "sum"]

def amax(a):
    """Maximum.{AVAIL_MULTI}"""
    return a

max = amax

def sum(a):
    """Sum.{AVAIL_MULTI}"""
    return a

def interp(x):
    """Left out of __all__, so not exported.{AVAIL_MULTI}"""
    return x
''',
    "cupynumeric/_module/extra.py": f'''
from __future__ import annotations
from typing import TYPE_CHECKING
import numpy as np

if TYPE_CHECKING:
    from .math import interp

def roots(p):
    """Roots.

    Notes
    -----
    The eigenvalues are computed on a single GPU.
    {AVAIL_SINGLE}"""
    return p

def nanstd(a):
    """Standard deviation.{AVAIL_MULTI}"""
    raise NotImplementedError("not yet")

def ravel_multi_index(i, dims):
    return i

def _private(x):
    """{AVAIL_MULTI}"""
    return x
''',
    "cupynumeric/_ufunc/__init__.py": "from .math import *\nfrom .ufunc import ufunc\n",
    "cupynumeric/_ufunc/ufunc.py": '''
_UNARY = """{}

Availability
------------
Multiple GPUs, Multiple CPUs
"""

class ufunc:
    def __init__(self, name, doc):
        self.__name__ = name
        self.__doc__ = doc

    def __call__(self, *args):
        return args[0]

def create_unary_ufunc(summary, name):
    doc = _UNARY.format(summary)
    return ufunc(name, doc)
''',
    "cupynumeric/_ufunc/math.py": """
from .ufunc import create_unary_ufunc

absolute = create_unary_ufunc("Absolute value.", "absolute")
abs = absolute
arccos = create_unary_ufunc("Inverse cosine.", "arccos")
arctan2 = create_unary_ufunc("Two-argument arctangent.", "arctan2")
""",
    "cupynumeric/_array/__init__.py": "",
    "cupynumeric/_array/array.py": f'''
class ndarray:
    def sum(self):
        """Sum.{AVAIL_MULTI}"""
        return self

    def getfield(self, dtype):
        raise NotImplementedError("no type reinterpretation")

    def cumsum(self):
        return self
''',
    "cupynumeric/fft/__init__.py": "from .fft import *\n",
    "cupynumeric/fft/fft.py": '''
def fft(a):
    """FFT.

    Notes
    -----
    Multi-GPU usage is limited to data parallel axis-wise batching.

    Availability
    --------
    Multiple GPUs (partial)
    """
    return a
''',
    "cupynumeric/linalg/__init__.py": "from .linalg import *\n",
    "cupynumeric/linalg/linalg.py": f'''
def svd(a):
    """SVD.{AVAIL_SINGLE}"""
    return a

def cholesky(a):
    """Cholesky.{AVAIL_MULTI}"""
    return a
''',
    "cupynumeric/random/__init__.py": "from ._random import *\n",
    "cupynumeric/random/_random.py": f'''
def random_sample(size=None):
    """Uniform.{AVAIL_MULTI}"""
    return size

ranf = random_sample

def normal(loc=0.0, scale=1.0, size=None):
    """Normal.{AVAIL_MULTI}"""
    return size
''',
}

EXPECTED = {
    "numpy.amax": ("multi", "numpy.amax"),
    "numpy.max": ("multi", "numpy.amax"),
    "numpy.sum": ("multi", "numpy.sum"),
    "numpy.interp": ("none", "numpy.interp"),
    "numpy.roots": ("single", "numpy.roots"),
    "numpy.nanstd": ("none", "numpy.nanstd"),
    "numpy.ravel_multi_index": ("partial", "numpy.ravel_multi_index"),
    "numpy.iinfo": ("partial", "numpy.iinfo"),
    "numpy.abs": ("multi", "numpy.absolute"),
    "numpy.acos": ("multi", "numpy.arccos"),
    "numpy.atan2": ("none", "numpy.atan2"),
    "numpy.arctan2": ("multi", "numpy.arctan2"),
    "numpy.ndarray.sum": ("multi", "numpy.ndarray.sum"),
    "numpy.ndarray.getfield": ("none", "numpy.ndarray.getfield"),
    "numpy.ndarray.cumsum": ("partial", "numpy.ndarray.cumsum"),
    "numpy.ndarray.std": ("none", "numpy.ndarray.std"),
    "numpy.fft.fft": ("partial", "numpy.fft.fft"),
    "numpy.fft.fftfreq": ("none", "numpy.fft.fftfreq"),
    "numpy.linalg.svd": ("single", "numpy.linalg.svd"),
    "numpy.linalg.cholesky": ("multi", "numpy.linalg.cholesky"),
    "numpy.random.normal": ("multi", "numpy.random.normal"),
    "numpy.random.ranf": ("multi", "numpy.random.random_sample"),
    "numpy.random.choice": ("none", "numpy.random.choice"),
}


def _check_fake(m: Manifest) -> None:
    for name, (level, api) in EXPECTED.items():
        entry = m.lookup(name)
        assert entry is not None, name
        assert (entry.level, entry.api) == (level, api), name
    assert "batching" in m.lookup("numpy.fft.fft").note  # type: ignore[union-attr]
    assert "NotImplementedError" in m.lookup("numpy.nanstd").note  # type: ignore[union-attr]
    assert "single GPU" in m.lookup("numpy.roots").note  # type: ignore[union-attr]
    assert "arctan2" in m.lookup("numpy.atan2").note  # type: ignore[union-attr]
    for unlisted in ("numpy.mgrid", "numpy.float64", "numpy._private", "numpy.test"):
        assert m.lookup(unlisted) is None, unlisted
    assert m.provenance["cupynumeric_version"] == "0.0.1"


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "fake"
    for rel, text in FAKE_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"), encoding="utf-8")
    return root


def _make_wheel(root: Path, wheel: Path) -> Path:
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted((root / "cupynumeric").rglob("*.py")):
            zf.write(path, path.relative_to(root).as_posix())
        zf.writestr("cupynumeric/libfake.so", b"\0" * 16)  # must not be unpacked
        zf.writestr("nvidia_cupynumeric-0.0.1.dist-info/METADATA", "Name: x\nVersion: 0.0.1\n")
    return wheel


@needs_numpy
def test_refresh_fake_folder(fake_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "manifest.json"
    result = invoke("refresh", "--wheel", str(fake_root), "--output", str(out))
    assert result.exit_code == 0, result.output
    assert out.is_file() and out.with_suffix(".md").is_file()
    made = load(out)
    _check_fake(made)
    assert made.provenance["source"].startswith("folder")
    md = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "## Discrete Fourier Transform" in md and "🟡 numpy.fft.fft — multi-GPU partial" in md


@needs_numpy
def test_refresh_fake_wheel_file(fake_root: Path, tmp_path: Path) -> None:
    wheel = _make_wheel(fake_root, tmp_path / "nvidia_cupynumeric-0.0.1-py3-none-any.whl")
    out = tmp_path / "wheel.json"
    result = invoke("refresh", "--wheel", str(wheel), "--output", str(out))
    assert result.exit_code == 0, result.output
    made = Manifest.from_file(out)
    _check_fake(made)
    assert made.provenance["source"].startswith("wheel nvidia_cupynumeric-0.0.1")


@needs_numpy
def test_refresh_downloads_with_pip(fake_root: Path, tmp_path: Path) -> None:
    """No network: a stand-in for `pip download` drops the fake wheel where pip would."""
    calls: list[list[str]] = []

    def fake_pip(cmd: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        _make_wheel(fake_root, dest / "nvidia_cupynumeric-0.0.1-py3-none-any.whl")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    out = tmp_path / "dl.json"
    result = refresh(version="0.0.1", output=out, run=fake_pip)
    assert calls[0][:4] == [sys.executable, "-m", "pip", "download"]
    assert "--no-deps" in calls[0] and calls[0][-1] == "nvidia-cupynumeric==0.0.1"
    assert result.downloaded is not None and result.download_bytes > 0
    assert result.python_files == sum(1 for k in FAKE_FILES if k.endswith(".py"))
    _check_fake(result.manifest)
    assert result.manifest.provenance["source"].startswith("PyPI nvidia-cupynumeric==0.0.1")


@needs_numpy
def test_introspection_agrees_with_static_scan(fake_root: Path, tmp_path: Path) -> None:
    try:
        result = refresh(wheel=fake_root, output=tmp_path / "intro.json", method="introspect")
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "cupynumeric"]:
            del sys.modules[name]
    _check_fake(result.manifest)
    static = build(PackageScan(fake_root).lookup, collect(), {})
    assert {a: e.level for a, e in static.entries.items()} == {
        a: e.level for a, e in result.manifest.entries.items()
    }
    assert static.aliases == result.manifest.aliases


def test_refresh_without_numpy_says_what_to_install(fake_root: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` then fails
    result = invoke("refresh", "--wheel", str(fake_root), "--output", str(tmp_path / "m.json"))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: refresh reads NumPy's API to compare it with cuPyNumeric's, and NumPy is not installed "
        "(pip install 'cpq[manifest]')"
    ]
    assert not (tmp_path / "m.json").exists()


def test_shipped_json_is_what_refresh_writes(shipped: Manifest) -> None:
    text = Path(str(manifest_pkg.default_path())).read_text(encoding="utf-8")
    assert Manifest.from_json(json.loads(text)).dumps() == text


def test_refresh_reports_a_failed_download(tmp_path: Path) -> None:
    def failing_pip(cmd: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found")

    with pytest.raises(RefreshError, match="No matching distribution"):
        refresh(version="0.0.0", output=tmp_path / "x.json", run=failing_pip)
    assert not (tmp_path / "x.json").exists()


def test_unpack_keeps_to_the_package_sources(fake_root: Path, tmp_path: Path) -> None:
    wheel = _make_wheel(fake_root, tmp_path / "w.whl")
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("../escape.py", "x = 1\n")
        zf.writestr("other_pkg/mod.py", "x = 1\n")
    dest = tmp_path / "unpacked"
    count = unpack_sources(wheel, dest)
    assert count == sum(1 for k in FAKE_FILES if k.endswith(".py"))
    assert not (tmp_path / "escape.py").exists() and not (dest / "other_pkg").exists()
    assert not (dest / "cupynumeric" / "libfake.so").exists()
