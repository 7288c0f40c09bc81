"""One short paragraph per R-code: what it flags, why it matters on cuPyNumeric, what it leaves alone.

These are the long descriptions that SARIF viewers (GitHub code scanning, editors)
show next to a result. The catalogue itself (kind, title, recipe) stays in
rules.dl; this module only adds prose, so a code missing here still gets a rule
with its title as description.
"""

from __future__ import annotations

CODE_DOCS: dict[str, str] = {
    # SCALES: idioms to keep as they are.
    "R001": (
        "A whole-array elementwise expression (arithmetic, ufuncs, comparisons, broadcasting). "
        "cuPyNumeric runs it as one partitioned task per GPU, so it scales unchanged after the "
        "import swap."
    ),
    "R002": (
        "A NumPy reduction (np.sum, mean, max, norm, a.sum(), ...). On cuPyNumeric the result is "
        "a deferred 0-d array, computed in parallel; it only costs a sync when Python reads it."
    ),
    "R003": (
        "A matrix product (@, np.matmul, np.dot, np.einsum, np.tensordot). These map to "
        "distributed GEMM-style tasks and are among the best-scaling operations."
    ),
    "R004": (
        "A vectorized conditional (np.where, np.choose, np.select, np.putmask) that replaces a "
        "per-element if; it runs as one data-parallel task."
    ),
    "R005": (
        "Stencil slicing: shifted unit-step views of one array combined in one expression. "
        "cuPyNumeric partitions the views with halos, so stencils scale across GPUs."
    ),
    "R006": (
        "A preallocated output (out=, or a double-buffer swap a, b = b, a). Reusing buffers "
        "avoids allocation tasks and keeps memory steady on the device."
    ),
    "R007": (
        "Boolean-mask indexing (a[m] = 0, a[(a > lo) & (a < hi)]). The mask is an array, so "
        "selection stays on the device."
    ),
    # BLOCKS: must change before the port scales.
    "R101": (
        "A Python loop whose trip count follows an array's length or shape and whose body does "
        "element- or row-sized work. Each iteration launches tiny tasks below the runtime's "
        "65,536-element partition floor, so the loop runs serially and slower than NumPy. Not "
        "flagged: loops over steps, epochs, taps or files whose body does whole-array work, and "
        "sequential recurrences (y[n] depends on y[n-1]), which the workload gate judges."
    ),
    "R102": (
        "np.vectorize (call or decorator). It is a Python loop in disguise: every element goes "
        "through the interpreter, nothing runs on the GPU. Rewrite the function with ufuncs and "
        "np.where."
    ),
    "R103": (
        "Iterating an array directly (for row in arr, enumerate(arr), a comprehension over an "
        "array). Each step pulls one row or element back to Python. Iterating lists, ranges, "
        "dicts or file lists is not flagged."
    ),
    "R104": (
        "Host materialization inside a hot loop: .item(), .tolist(), float(a), int(a), bool(a) "
        "on an array value. Each one forces the runtime to finish all pending work and hand a "
        "value to Python (a sync), every iteration. The same call once, outside any loop, is a "
        "boundary value and is not flagged."
    ),
    "R105": (
        "Branching on an array inside a loop (while norm(r) > tol, if np.any(bad)). Python needs "
        "the truth value now, so every iteration syncs. Not flagged when the tested name already "
        "holds a Python scalar (that conversion is reported as R104)."
    ),
    "R106": (
        "Non-unit step slicing (a[::2], a[::-1], any axis). Strided views do not partition well "
        "on the distributed path. Build a boolean mask once and index with it. A step of 1 or "
        "an omitted step is not flagged."
    ),
    "R107": (
        "Object dtype (dtype=object, .astype(object)). Object arrays cannot live on the GPU. "
        "Restructure into numeric arrays (struct of arrays, offsets)."
    ),
    "R108": (
        "mpi4py beside array code. cuPyNumeric already distributes one global array across "
        "nodes; a hand-written MPI decomposition fights it. Drop it and launch with "
        "legate --nodes N --gpus G. A mention in a string, comment or separate launcher that does "
        "no MPI calls is not flagged."
    ),
    "R109": (
        "An order= keyword (reshape, ravel, flatten, asarray, zeros, ...). Memory order is ignored "
        "or warned about on the distributed path; convert layout once at a host boundary."
    ),
    "R110": (
        "A Python builtin applied to an array (sum(a), max(a), any(m), sorted(a), list(a), x in a). "
        "The builtin iterates element by element on the host. Use np.sum, np.max, ... instead. "
        "len(a) and builtins on Python lists are fine."
    ),
    "R111": (
        "Conversions between cuPyNumeric and CuPy inside a hot loop (cp.asarray, cp.asnumpy, "
        ".get()). Each crossing copies and syncs. Convert once before the loop and once after."
    ),
    # REFACTOR: a mechanical recipe fixes it.
    "R201": (
        "An array allocation inside a loop body (np.zeros, np.array, random draws, arange, "
        ".copy()). Each one is a new task and new device memory per iteration; allocate once "
        "before the loop and write into the buffer."
    ),
    "R202": (
        "Rebinding x = x op y on an array inside a loop. It allocates a fresh array every "
        "iteration; update in place with x op= y or np.op(x, y, out=x). Augmented assignment and "
        "swaps are not flagged."
    ),
    "R203": (
        "Stacking inside a loop (np.vstack, concatenate, append, ...). The result is copied in "
        "full every iteration (quadratic work); preallocate and fill slices."
    ),
    "R204": (
        "np.nonzero / one-argument np.where / np.argwhere whose result then indexes an array. "
        "Integer index arrays gather and scatter; index with the boolean mask directly."
    ),
    "R205": (
        "Writing into the result of np.diag, np.diagonal, np.flip, .flat, .flatten() or .ravel(). "
        "NumPy returns a view (or raises); cuPyNumeric returns a copy, so the write is silently "
        "lost. Write through to the original array. Read-only use is not flagged."
    ),
    "R206": (
        "A reshape inside a hot loop. Reshapes of partitioned arrays can copy; reshape once "
        "before the loop."
    ),
    # INFO: cost or compatibility notes.
    "R301": (
        "A SciPy import or call. SciPy runs on the host: fine once at a boundary, a host "
        "round-trip per call on a hot path."
    ),
    "R302": (
        "linalg.qr / linalg.svd run on a single device. Stack many problems along a leading "
        "axis to parallelize them."
    ),
    "R303": (
        "An FFT: one transform runs on one GPU; batched transforms along an axis parallelize."
    ),
    "R304": (
        "Random numbers with more than one GPU or node: results are reproducible only for a "
        "fixed GPU count (legate --gpus N)."
    ),
    "R305": (
        "linalg.solve / linalg.cholesky go multi-GPU only above a size threshold (solve n >= 512, "
        "cholesky n >= 8192, with cuSolverMp); below it they run on one device."
    ),
}


def code_doc(code: str, title: str = "") -> str:
    """The long description of `code`, falling back to its title for a code without prose."""
    return CODE_DOCS.get(code, title)
