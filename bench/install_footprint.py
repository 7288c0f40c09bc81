"""The size and time of a fresh install of cpq: a new virtual environment, `pip install` of a
checkout (with extras, if asked), then the environment's size, its site-packages, what the
empty environment already held (pip, setuptools), and the largest packages.

    python bench/install_footprint.py [--source DIR] [--extras manifest] [--python EXE]

pip's own configuration applies (index, wheel cache): run it twice and take the second time for
a warm cache.  See bench/README.md, "Install footprint".
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 1024 * 1024


def tree_bytes(root: Path) -> int:
    """Bytes on disk (as `du` counts them: whole blocks) of the files under `root`."""
    return sum(p.lstat().st_blocks * 512 for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise SystemExit(f"no site-packages under {venv}")
    return found[0]


def largest(packages: Path, count: int = 8) -> list[tuple[str, int]]:
    sizes = []
    for entry in packages.iterdir():
        size = tree_bytes(entry) if entry.is_dir() else entry.lstat().st_blocks * 512
        sizes.append((entry.name, size))
    return sorted(sizes, key=lambda item: -item[1])[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--extras", default="", help="comma-separated extras, e.g. manifest")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the new environment")
    args = parser.parse_args()
    target = str(args.source) + (f"[{args.extras}]" if args.extras else "")
    with tempfile.TemporaryDirectory(prefix="cpq-footprint-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([args.python, "-m", "venv", str(venv)], check=True)
        empty = tree_bytes(venv)
        started = time.monotonic()
        pip = [str(venv / "bin" / "pip"), "install", "-q", target]
        done = subprocess.run(pip, capture_output=True, text=True)
        seconds = time.monotonic() - started
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        total = tree_bytes(venv)
        packages = site_packages(venv)
        print(f"pip install {target}: {seconds:.1f} s")
        added = (total - empty) / MB
        print(f"environment: {total / MB:.0f} MB (empty: {empty / MB:.0f} MB; cpq adds {added:.0f} MB)")
        print(f"site-packages: {tree_bytes(packages) / MB:.0f} MB; largest:")
        for name, size in largest(packages):
            print(f"  {size / MB:6.1f} MB  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
