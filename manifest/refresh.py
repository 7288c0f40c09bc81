"""`cpq manifest refresh`: fetch cuPyNumeric's wheel, read its sources, write the manifest.

Only the wheel itself is downloaded (`pip download --no-deps`, ~200 MB rather than the
~1.9 GB that installing it with its dependencies costs) and only its `.py` files are
unpacked: the package is analysed without being imported, because `import cupynumeric`
needs the CUDA driver library.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from . import build, introspect, numpy_side, render_md
from .model import Manifest
from .static_scan import PackageScan

DISTRIBUTION = "nvidia-cupynumeric"
PACKAGE = "cupynumeric"
# Any manylinux wheel carries the same Python sources; used when none fits this interpreter.
FALLBACK_PLATFORM = ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11")
STATIC_METHOD = "static: ast-grep-py scan of the wheel's Python sources (package not imported)"
INTROSPECT_METHOD = "introspection: imported the package and read its objects"


class RefreshError(RuntimeError):
    """A refresh that cannot go on; the message is one line for the user."""


@dataclass
class RefreshResult:
    manifest: Manifest
    json_path: Path
    md_path: Path
    downloaded: Path | None = None
    download_bytes: int = 0
    download_seconds: float = 0.0
    python_files: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


def default_output() -> Path:
    assets = importlib.import_module("cpq.assets")
    return Path(assets.__file__).resolve().parent / "manifest.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_wheel(version: str | None, dest: Path, run: Callable = subprocess.run) -> Path:
    """`pip download --no-deps` the wheel into `dest` and return its path."""
    spec = DISTRIBUTION + (f"=={version}" if version else "")
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    attempts = [[*base, "-d", str(dest), spec], [*base, *FALLBACK_PLATFORM, "-d", str(dest), spec]]
    last = ""
    for cmd in attempts:
        proc = run(cmd, capture_output=True, text=True)
        wheels = sorted(dest.glob("*.whl"))
        if proc.returncode == 0 and wheels:
            return wheels[0]
        last = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or [""]
        last = last[0]
    raise RefreshError(f"pip could not download {spec}: {last}")


def unpack_sources(wheel: Path, dest: Path) -> int:
    """Extract the package's `.py` files and the wheel's METADATA; return the file count."""
    count = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = PurePosixPath(info.filename)
            if name.is_absolute() or ".." in name.parts:
                continue  # never write outside dest
            is_source = name.parts[0] == PACKAGE and name.suffix == ".py"
            is_metadata = name.parts[0].endswith(".dist-info") and name.name == "METADATA"
            if not (is_source or is_metadata):
                continue
            target = dest.joinpath(*name.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            count += is_source
    if count == 0:
        raise RefreshError(f"{wheel.name} has no {PACKAGE}/*.py files")
    return count


def find_root(path: Path) -> Path:
    """The folder that contains the `cupynumeric` package folder."""
    if (path / PACKAGE / "__init__.py").is_file():
        return path
    if path.name == PACKAGE and (path / "__init__.py").is_file():
        return path.parent
    raise RefreshError(f"{path} holds no {PACKAGE} package (no {PACKAGE}/__init__.py)")


def metadata_version(root: Path) -> str | None:
    for meta in sorted(root.glob("*.dist-info/METADATA")):
        found = re.search(r"^Version:\s*(\S+)", meta.read_text(encoding="utf-8"), re.M)
        if found:
            return found.group(1)
    return None


def analyse(root: Path, method: str, provenance: dict[str, object]) -> tuple[Manifest, list[str]]:
    """Build the manifest for the package under `root` with the chosen method."""
    try:
        np_side = numpy_side.collect()
    except ImportError:  # NumPy is optional: only this command needs it
        raise RefreshError(
            "refresh reads NumPy's API to compare it with cuPyNumeric's, and NumPy is not installed "
            "(pip install 'cpq[manifest]')"
        ) from None
    scan = PackageScan(root, PACKAGE)
    if method == "introspect":
        resolver, version, notes = introspect.resolver(root, PACKAGE)
        label = INTROSPECT_METHOD
    else:
        resolver, version, notes = scan.lookup, None, scan.warnings
        label = STATIC_METHOD
    prov = {
        # The version is read from the files either way: the wheel's METADATA, else
        # `_version.py`, which the package does not always re-export as `__version__`.
        "cupynumeric_version": metadata_version(root) or scan.version() or version or "unknown",
        "numpy_version": np_side.version,
        "date": _dt.date.today().isoformat(),
        "method": label,
        **provenance,
    }
    manifest = build.build(resolver, np_side, prov)
    return manifest, list(notes)


def write(manifest: Manifest, json_path: Path) -> Path:
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(manifest.dumps(), encoding="utf-8")
    md_path = json_path.with_suffix(".md")
    md_path.write_text(render_md.render(manifest), encoding="utf-8")
    return md_path


def refresh(
    version: str | None = None,
    wheel: Path | None = None,
    output: Path | None = None,
    method: str = "static",
    run: Callable = subprocess.run,
) -> RefreshResult:
    started = time.monotonic()
    json_path = output or default_output()
    with tempfile.TemporaryDirectory(prefix="cpq-manifest-") as tmp:
        tmpdir = Path(tmp)
        downloaded: Path | None = None
        size = 0
        fetch_seconds = 0.0
        files = 0
        if wheel is None:
            fetch_started = time.monotonic()
            downloaded = download_wheel(version, tmpdir / "download", run)
            fetch_seconds = time.monotonic() - fetch_started
            size = downloaded.stat().st_size
            # Wheel names are `{distribution}-{version}-{tags}.whl`.
            pinned = downloaded.name.split("-")[1]
            source = (
                f"PyPI {DISTRIBUTION}=={pinned}: {downloaded.name} "
                f"({size:,} bytes, sha256 {_sha256(downloaded)})"
            )
            wheel_file: Path | None = downloaded
        elif wheel.is_file():
            wheel_file = wheel
            source = f"wheel {wheel.name} (sha256 {_sha256(wheel)})"
        elif wheel.is_dir():
            wheel_file = None
            source = f"folder {wheel.resolve().name}"
        else:
            raise RefreshError(f"no such wheel or folder: {wheel}")
        if wheel_file is not None:
            root = tmpdir / "src"
            try:
                files = unpack_sources(wheel_file, root)
            except zipfile.BadZipFile as exc:
                raise RefreshError(f"{wheel_file.name} is not a wheel: {exc}") from exc
        else:
            root = find_root(wheel) if wheel is not None else tmpdir
            files = sum(1 for _ in (root / PACKAGE).rglob("*.py"))
        manifest, notes = analyse(root, method, {"source": source})
        if version and manifest.provenance["cupynumeric_version"] == "unknown":
            manifest.provenance["cupynumeric_version"] = version
        md_path = write(manifest, json_path)
    return RefreshResult(
        manifest,
        json_path,
        md_path,
        downloaded,
        size,
        fetch_seconds,
        files,
        time.monotonic() - started,
        notes,
    )
