"""Before/after sketches for each recipe, built from the user's own line.

The rewrite is a sketch for a reader, not an automatic fix: it shows the
shape of the change on the line cpq cited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RECIPE_TEXT = {
    "RR-loop": "replace the Python loop by whole-array expressions over the indexed axis",
    "RR-broadcast": "broadcast the per-row operation over the whole array",
    "RR-batch": "stack the many small problems along a leading axis and call once",
    "RR-where": "express the per-element function with np.where / ufuncs",
    "RR-sync": "keep the value on the device; convert to a Python number once, after the loop",
    "RR-converge": "test convergence every k iterations, or run a fixed iteration count",
    "RR-alloc": "allocate once before the loop and write into the buffer",
    "RR-inplace": "update in place (x op= y, or np.op(x, y, out=x))",
    "RR-stack": "preallocate the result and fill slices instead of stacking in the loop",
    "RR-mask": "index with the boolean mask directly (a[c] = v, np.putmask)",
    "RR-reshape": "reshape once before the loop",
    "RR-mpi": "drop the MPI decomposition: one global array, launched with legate --nodes N",
    "RR-host-fallback": "keep the SciPy call at the boundary, outside the hot loop",
    "host-built boolean mask": "select with a boolean mask built once instead of a strided slice",
    "numeric restructuring": "restructure object arrays as numeric arrays (struct of arrays, offsets)",
    "drop order=": "drop the order= argument; convert layout once at a host boundary",
    "use np.sum, np.max, ...": "call the NumPy reduction instead of the Python builtin",
    "one runtime per loop": "keep the loop in one runtime; convert once before and once after",
    "write through": "write through to the original array instead of the copied view",
}


@dataclass
class Sketch:
    before: str
    after: str


_INDEX = re.compile(r"\[\s*([A-Za-z_]\w*)\s*\]")
_INDEX_FIRST = re.compile(r"\[\s*([A-Za-z_]\w*)\s*,")
_ORDER = re.compile(r",\s*order\s*=\s*(\"[^\"]*\"|'[^']*'|\w+)")
_BUILTIN = re.compile(r"(?<![\w.])(sum|max|min|any|all|sorted)\(")
_REBIND = re.compile(r"^(\s*)([A-Za-z_]\w*)\s*=\s*\2\s*([-+*/@%&|^]|//|\*\*)\s*(.+)$")


def sketch(code: str, line: str) -> Sketch:
    """A before/after for one finding's source line."""
    before = line.strip()
    after = _rewrite(code, before)
    return Sketch(before, after)


def _rewrite(code: str, line: str) -> str:
    if code == "R101":
        vector = _INDEX_FIRST.sub("[:, ", _INDEX.sub("[:]", line))
        return f"{vector}   # one whole-array statement; the loop goes away"
    if code == "R103":
        m = re.match(r"for\s+(.+?)\s+in\s+(.+?):\s*$", line)
        if m:
            return f"# operate on {m.group(2)} as a whole (e.g. np.sum({m.group(2)} * ...)), no loop"
        return f"# operate on the whole array instead of iterating it: {line}"
    if code == "R102":
        return "# replace np.vectorize(f) by the array expression, e.g. np.where(x > 0, x, 0.0)"
    if code == "R104":
        inner = re.sub(r"\.item\(\)|\.tolist\(\)", "", line)
        inner = re.sub(r"(?<![\w.])(float|int|bool|complex)\((.*)\)", r"\2", inner)
        return f"{inner}   # stays a 0-d array; convert once after the loop"
    if code == "R105":
        return f"if it % check_every == 0 and {_strip_if(line)}   # sync only every k steps"
    if code == "R106":
        m = re.search(r"(\w+)\[([^\]]*::[^\]]*)\]", line)
        if m:
            return (
                f"mask = np.zeros({m.group(1)}.shape[0], dtype=bool); mask[{m.group(2)}] = True  "
                f"# once, then {m.group(1)}[mask]"
            )
        return "# build a boolean mask once and index with it"
    if code == "R107":
        return "# numeric arrays instead of dtype=object (struct of arrays, offsets + values)"
    if code == "R108":
        return "# (removed) one global array; launch with: legate --nodes N --gpus G script.py"
    if code == "R109":
        return _ORDER.sub("", line)
    if code == "R110":
        return _BUILTIN.sub(lambda m: f"np.{m.group(1) if m.group(1) != 'sorted' else 'sort'}(", line)
    if code == "R111":
        return "# keep this loop in one runtime; convert once before and once after the loop"
    if code == "R201":
        return f"# before the loop: {line.strip()}\n# in the loop: write into it (buf[...] = ..., out=buf)"
    if code == "R202":
        m = _REBIND.match(line)
        if m:
            return f"{m.group(1)}{m.group(2)} {m.group(3)}= {m.group(4)}"
        return f"# compute into the existing buffer with out=: {line.strip()}"
    if code == "R203":
        return "# preallocate out = np.empty((n, ...)) before the loop; in the loop: out[k] = row"
    if code == "R204":
        m = re.search(r"np\.(?:nonzero|argwhere|where)\((.*)\)", line)
        if m:
            return f"mask = {m.group(1)}   # then a[mask] = value (or np.putmask)"
        return "# index with the boolean condition directly: a[cond] = value"
    if code == "R205":
        return f"# write into the original array, not the copy: {line.strip()}"
    if code == "R206":
        return f"# before the loop: {line.strip()}"
    return line


def _strip_if(line: str) -> str:
    return re.sub(r"^\s*(if|elif|while)\s+", "", line)
