"""Rule tests: for every R-code of the catalogue, code that must and must not produce it.

The snippets below are written into a small project (several modules and a package) that is
assessed once. Markers in the snippets say what the rules must conclude:

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

from cpq.assessment import Assessment, assess
from cpq.context import Context

# -- the project --------------------------------------------------------------------------

SNIPPETS = '''\
import itertools
import random
import statistics

import numpy as np
import scipy.signal  # expect: R301
import scipy_helpers  # reject: R301
from mylib import vectorize as my_vectorize
from numpy import sum as npsum
from numpy import vectorize
from numpy import zeros

xp = np


# -- R001 vectorized elementwise ------------------------------------------------------------


def r001_pos(n, w):
    t = np.linspace(0.0, 1.0, n)
    y = np.exp(-t) * np.cos(w * t)  # expect: R001
    return y


def r001_mask_pos(a: np.ndarray, lo, hi):
    return (a > lo) & (a < hi)  # expect: R001


def r001_neg(n, k):  # reject: R001
    m = n * 2 + k
    return m - 1


# -- R002 reduction ---------------------------------------------------------------------------


def r002_pos(n):
    a = np.ones(n)
    s = np.sum(a)  # expect: R002
    return s + a.mean()


def r002_method_pos(a: np.ndarray):
    return a.max()  # expect: R002


def r002_norm_pos(r: np.ndarray):
    return np.linalg.norm(r)  # expect: R002


def r002_neg(xs):  # reject: R002
    return statistics.mean(xs)


# -- R003 matrix product ----------------------------------------------------------------------


def r003_pos(A: np.ndarray, B: np.ndarray):
    C = A @ B  # expect: R003
    return np.einsum("ij,jk->ik", C, B)


def r003_dot_pos(a: np.ndarray, b: np.ndarray):
    return a.dot(b)  # expect: R003


def r003_neg(A: np.ndarray, B: np.ndarray):  # reject: R003
    return A * B


# -- R004 vectorized conditional --------------------------------------------------------------


def r004_pos(a: np.ndarray):
    return np.where(a > 0.0, a, 0.0)  # expect: R004


def r004_putmask_pos(a: np.ndarray, m: np.ndarray):
    np.putmask(a, m, 0.0)  # expect: R004
    return a


def r004_neg(a: np.ndarray):  # reject: R004
    idx = np.where(a > 0.0)
    return idx


# -- R005 stencil slicing ---------------------------------------------------------------------


def r005_pos(g: np.ndarray, new: np.ndarray):
    new[1:-1, 1:-1] = 0.25 * (  # expect: R005
        g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:]
    )
    return new


def r005_neg(u: np.ndarray, v: np.ndarray, out: np.ndarray):  # reject: R005
    out[1:-1] = u[1:-1] + v[1:-1]
    return out


# -- R006 preallocated output -----------------------------------------------------------------


def r006_pos(a: np.ndarray, b: np.ndarray, c: np.ndarray):
    np.add(a, b, out=c)  # expect: R006
    return c


def r006_swap_pos(n, n_steps):
    cur = np.zeros(n)
    nxt = np.zeros(n)
    for _ in range(n_steps):
        nxt[1:-1] = 0.5 * (cur[:-2] + cur[2:])
        cur, nxt = nxt, cur  # expect: R006
    return cur


def r006_rotation_pos(n, n_steps):
    a, b, c = np.zeros(n), np.ones(n), np.zeros(n)
    for _ in range(n_steps):
        a[:] = b + c
        a, b, c = b, c, a  # expect: R006
    return a


def r006_neg(a: np.ndarray, b: np.ndarray):  # reject: R006
    c = np.add(a, b)
    return c


def r006_neg_not_a_permutation(n, n_steps):  # reject: R006
    cur, nxt, other = np.zeros(n), np.zeros(n), np.ones(n)
    for _ in range(n_steps):
        nxt[1:-1] = 0.5 * (cur[:-2] + cur[2:])
        cur, nxt = nxt, other
    return cur


# -- R007 boolean-mask indexing ---------------------------------------------------------------


def r007_pos(a: np.ndarray, lo, hi):
    a[(a > lo) & (a < hi)] = 0.0  # expect: R007
    return a


def r007_mask_var_pos(a: np.ndarray, lo):
    m = a > lo
    a[m] = 0.0  # expect: R007
    return a


def r007_neg_argsort(a: np.ndarray):  # reject: R007
    order = np.argsort(a)
    return a[order]


def r007_neg_nonzero(a: np.ndarray, b: np.ndarray):  # reject: R007
    idx = np.nonzero(a > 0.0)[0]
    return b[idx]


# -- R101 Python loop over array elements or rows ---------------------------------------------


def r101_element_write(a: np.ndarray):
    out = np.empty_like(a)
    for i in range(len(a)):
        out[i] = a[i] * 2.0  # expect: R101
    return out


def r101_scalar_accumulation(a: np.ndarray, w: np.ndarray):
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i] * w[i]  # expect: R101
    return total


def r101_tanh_accumulation(m: np.ndarray):
    acc = 0.0
    for i in range(m.shape[0]):
        acc += np.tanh(m[i, i])  # expect: R101
    return acc


def r101_row_broadcast(d: np.ndarray, w: np.ndarray):
    out = np.zeros_like(d)
    for i in range(d.shape[0]):
        out[i, :] = d[i, :] * w[i]  # expect: R101
    return out


def r101_sized_by_count(n):
    e = np.zeros(n)
    for i in range(n):
        e[i] = i * 0.5  # expect: R101
    return e


def r101_count_from_len(a: np.ndarray):
    n = len(a)
    out = np.zeros(n)
    for i in range(1, n - 1):
        out[i] = a[i - 1] + a[i + 1]  # expect: R101
    return out


def r101_nest(g: np.ndarray):
    n, m = g.shape
    for i in range(n):
        for j in range(m):
            g[i, j] -= 0.5  # expect: R101
            g[i, j] *= 2.0
    return g


def r101_lu(A: np.ndarray):
    n = A.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            A[i, j] -= A[i, :j] @ A[:j, j]  # expect: R101
    return A


def r101_product(g: np.ndarray):
    n, m = g.shape
    for i, j in itertools.product(range(n), range(m)):
        g[i, j] = 0.0  # expect: R101
    return g


def r101_two_nests(g: np.ndarray):
    for i in range(g.shape[0]):
        g[i] = 0.0  # expect: R101
    for j in range(g.shape[0]):
        g[j] = 1.0  # expect: R101
    return g


def r101_neg_taps(x: np.ndarray, c: np.ndarray, acc: np.ndarray):  # reject: R101
    w = x.shape[1] - c.shape[0] + 1
    for k in range(c.shape[0]):
        acc[:, :w] += c[k] * x[:, k : k + w]
    return acc


def r101_neg_taps_roll(x: np.ndarray, taps: np.ndarray):  # reject: R101
    y = np.zeros_like(x)
    for k in range(len(taps)):
        y += taps[k] * np.roll(x, k)
    return y


def r101_neg_time_steps(s0, g: np.ndarray, n_paths, n_steps):  # reject: R101
    p = np.empty((n_paths, n_steps))
    p[:, 0] = s0
    for t in range(1, n_steps):
        p[:, t] = p[:, t - 1] * g
    return p


def r101_neg_time_history(x: np.ndarray, n, n_steps):  # reject: R101
    p = np.zeros((n, n_steps))
    for t in range(n_steps):
        p[:, t] = np.sin(t * x)
    return p


def r101_neg_channels(v: np.ndarray, out: np.ndarray):  # reject: R101
    for c in range(3):
        out[c] = np.tanh(v[c])
    return out


def r101_neg_recurrence(x: np.ndarray, a):  # reject: R101
    y = np.zeros(len(x))
    for n in range(1, len(x)):
        y[n] = a * y[n - 1] + x[n]
    return y


def r101_neg_epochs(w: np.ndarray, X: np.ndarray, y: np.ndarray, n_epochs, lr):  # reject: R101
    for _ in range(n_epochs):
        w -= lr * (X.T @ (X @ w - y))
    return w


# -- R102 np.vectorize ------------------------------------------------------------------------


def r102_pos(a: np.ndarray):
    f = np.vectorize(lambda v: v + 1)  # expect: R102
    return f(a)


@np.vectorize  # expect: R102
def r102_decorated(v):
    return v * 2


@vectorize  # expect: R102
def r102_decorated_from_import(v):
    return v * 3


def r102_neg(a):  # reject: R102
    return my_vectorize(abs)(a)


# -- R103 iterating an array ------------------------------------------------------------------


def r103_rows(n):
    arr = np.zeros((n, 3))
    rows = []
    for row in arr:  # expect: R103
        rows.append(row)
    return rows


def r103_enumerate(a: np.ndarray, out):
    for i, v in enumerate(a):  # expect: R103
        out.append((i, v))
    return out


def r103_arange(n):
    acc = []
    for x in np.arange(n):  # expect: R103
        acc.append(x)
    return acc


def r103_comprehension(a: np.ndarray):
    return [v * 2 for v in a]  # expect: R103


def r103_zip(a: np.ndarray, b: np.ndarray):
    return [x + y for x, y in zip(a, b)]  # expect: R103


def r103_neg_list_range_param(names):  # reject: R103
    out = []
    for name in ["a", "b", "c"]:
        out.append(name)
    for i in range(10):
        out.append(i)
    for item in names:
        out.append(item)
    return out


def r103_neg_dict(table: dict):  # reject: R103
    for key in table:
        print(key)


# -- R104 host materialization in a hot loop --------------------------------------------------


def r104_pos(a: np.ndarray, n_iter):
    hist = []
    for _ in range(n_iter):
        a = np.tanh(a)
        hist.append(float(np.sum(a)))  # expect: R104
    return hist


def r104_over_array(a: np.ndarray):
    out = []
    for row in a:  # expect: R103
        out.append(float(row.sum()))  # expect: R104
    return out


def r104_item_pos(a: np.ndarray):
    out = []
    for row in range(a.shape[0]):
        out.append(a[row].sum().item())  # expect: R104
    return out


def r104_more(a: np.ndarray, n_steps):
    out = []
    for _ in range(n_steps):
        out.append(a.tolist())  # expect: R104
        out.append(bool(a.any()))  # expect: R104
        out.append(complex(a.sum()))  # expect: R104
    return out


def r104_neg_boundary(a: np.ndarray, n_iter):  # reject: R104
    for _ in range(n_iter):
        a = np.tanh(a)
    return float(np.sum(a))


def r104_neg_scalars(n_steps):  # reject: R104
    out = []
    for i in range(n_steps):
        out.append(float(i) + int("3"))
    return out


class Solver:
    def run(self, a: np.ndarray, n_steps):
        for _ in range(n_steps):
            a = self.update(a)
        return a

    def update(self, a: np.ndarray):
        return float(a.sum()) * a  # expect: R104


# -- R105 branching on an array inside a loop -------------------------------------------------


def r105_while_pos(A: np.ndarray, x: np.ndarray, b: np.ndarray, tol):
    r = b - A @ x
    while np.linalg.norm(r) > tol:  # expect: R105
        x += 0.1 * r
        r = b - A @ x
    return x


def r105_if_any_pos(u: np.ndarray, n_steps):
    for _ in range(n_steps):
        u = np.sqrt(u)
        if np.any(u > 1.0):  # expect: R105
            break
    return u


def r105_err_pos(u: np.ndarray, n_steps, tol):
    for _ in range(n_steps):
        u = np.tanh(u)
        err = np.max(np.abs(u))
        if err < tol:  # expect: R105
            break
    return u


def r105_neg_float(r: np.ndarray, n_steps, tol):  # reject: R105
    for _ in range(n_steps):
        r = np.tanh(r)
        x = float(np.linalg.norm(r))  # expect: R104
        if x < tol:
            break
    return r


def r105_neg_shape_tests(a: np.ndarray, n_steps):  # reject: R105
    for _ in range(n_steps):
        if a.ndim == 2 and len(a) > 3:
            a = np.tanh(a)
        if a.shape[0] > 3:
            break
    return a


# -- R106 non-unit step slicing ---------------------------------------------------------------


def r106_pos(a: np.ndarray):
    return a[::2]  # expect: R106


def r106_more(a: np.ndarray, k):
    b = a[1::2]  # expect: R106
    c = a[::-1]  # expect: R106
    d = a[::k]  # expect: R106
    return b, c, d, a[:, ::2]  # expect: R106


def r106_every_site(items):
    return items[::2]  # expect: R106


def r106_caller(n):
    return r106_every_site(np.arange(n))


def r106_neg_unknown(items):  # reject: R106
    return items[::2]


def r106_neg_list(xs: list):  # reject: R106
    return xs[::2]


def r106_pos_mixed_sites(items):
    # One caller passes an array: an array argument makes the parameter an array inside.
    return items[1::2]  # expect: R106


def r106_mixed_caller(n):
    return r106_pos_mixed_sites(np.arange(n)), r106_pos_mixed_sites([1, 2, 3])


def r106_neg_unit(a: np.ndarray, n):  # reject: R106
    return a[0:n:1] + a[1:-1] + a[::1]


# -- R107 object dtype ------------------------------------------------------------------------


def r107_pos(xs):
    return np.array(xs, dtype=object)  # expect: R107


def r107_more(a: np.ndarray, n):
    b = a.astype("O")  # expect: R107
    c = a.astype(object)  # expect: R107
    d = np.empty(n, dtype="O")  # expect: R107
    return b, c, d


def r107_neg(n, a: np.ndarray):  # reject: R107
    return np.zeros(n, dtype=np.float32), a.astype("float64")


# -- R109 order= ------------------------------------------------------------------------------


def r109_pos(a: np.ndarray, n, m):
    return a.reshape(n, m, order="F")  # expect: R109


def r109_more(a: np.ndarray, xs, n):
    b = np.asarray(xs, order="C")  # expect: R109
    c = a.ravel(order="F")  # expect: R109
    d = a.flatten(order="C")  # expect: R109
    e = np.zeros(n, order="F")  # expect: R109
    f = np.array(xs, order="C")  # expect: R109
    return b, c, d, e, f


def make_plan(order):
    return order


def r109_neg(a: np.ndarray, n, m):  # reject: R109
    make_plan(order="F")
    return a.reshape(n, m), sorted([3, 1], reverse=True)


# -- R110 Python builtins on arrays -----------------------------------------------------------


def r110_sum_pos(a: np.ndarray):
    return sum(a)  # expect: R110


def r110_max_pos(n):
    a = np.ones(n)
    return max(a)  # expect: R110


def r110_in_pos(a: np.ndarray, v):
    return v in a  # expect: R110


def r110_more(a: np.ndarray, m: np.ndarray, v):
    r1 = min(a)  # expect: R110
    r2 = any(m)  # expect: R110
    r3 = all(m)  # expect: R110
    r4 = sorted(a)  # expect: R110
    r5 = list(a)  # expect: R110
    r6 = tuple(a)  # expect: R110
    r7 = iter(a)  # expect: R110
    r8 = reversed(a)  # expect: R110
    r9 = v not in a  # expect: R110
    return r1, r2, r3, r4, r5, r6, r7, r8, r9


def r110_neg(a: np.ndarray, b: np.ndarray, i):  # reject: R110
    n = len(a)
    m = max(a[i], b[i])
    return n, m


def r110_neg_lists(xs: list, d: dict, v):  # reject: R110
    return sum(xs), max(xs), v in d, sorted(xs), sum([1, 2, 3])


# -- R201 allocation inside a loop ------------------------------------------------------------


def r201_pos(u: np.ndarray, n_steps):
    for _ in range(n_steps):
        tmp = np.zeros_like(u)  # expect: R201
        tmp[1:-1] = u[:-2] + u[2:]
        u[:] = tmp
    return u


def r201_more(a: np.ndarray, n_steps, n):
    rng = np.random.default_rng(1)
    for _ in range(n_steps):
        b = a.copy()  # expect: R201
        c = rng.normal(size=n)  # expect: R201
        d = np.random.randn(n)  # expect: R201
        e = np.arange(n)  # expect: R201
        f = np.linspace(0, 1, n)  # expect: R201
        g = np.full(n, 1.0)  # expect: R201
        h = np.array([1.0, 2.0])  # expect: R201
        a = b + c + d + e + f + g + h[0]
    return a


def r201_neg_hoisted(u: np.ndarray, n_steps):  # reject: R201
    tmp = np.zeros_like(u)
    for _ in range(n_steps):
        tmp[1:-1] = u[:-2] + u[2:]
        u[:] = tmp
    return u


def r201_neg_setup(n):  # reject: R201
    fields = []
    for _ in range(3):
        fields.append(np.zeros(n))
    named = {}
    for name in ["u", "v", "w"]:
        named[name] = np.ones(n)
    return fields, named


# -- R202 rebinding x = x op y in a loop ------------------------------------------------------


def r202_pos(x: np.ndarray, v: np.ndarray, dt, n_steps):
    for _ in range(n_steps):
        x = x + dt * v  # expect: R202
    return x


def r202_sqrt_pos(x: np.ndarray, y: np.ndarray, n_steps):
    for _ in range(n_steps):
        x = np.sqrt(x) + y  # expect: R202
    return x


def r202_neg_inplace(x: np.ndarray, v: np.ndarray, dt, n_steps):  # reject: R202
    for _ in range(n_steps):
        x += dt * v
    return x


def r202_neg_scalar(n_steps):  # reject: R202
    s = 0
    for _ in range(n_steps):
        s = s + 1
    return s


def r202_neg_outside_loop(x: np.ndarray, y: np.ndarray):  # reject: R202
    x = x + y
    return x


def r202_neg_swap(n, n_steps):  # reject: R202
    a = np.zeros(n)
    b = np.ones(n)
    for _ in range(n_steps):
        b[:] = np.tanh(a)
        a, b = b, a
    return a


# -- R203 stacking in a loop ------------------------------------------------------------------


def r203_pos(rows: list, n):
    acc = np.zeros((0, n))
    for row in rows:
        acc = np.vstack([acc, row])  # expect: R203
    return acc


def r203_more(a: np.ndarray, n_steps):
    out = np.zeros(0)
    for _ in range(n_steps):
        out = np.concatenate([out, a])  # expect: R203
        out = np.append(out, 1.0)  # expect: R203
    return out


def r203_neg(rows: list):  # reject: R203
    parts = []
    for row in rows:
        parts.append(row)
    return np.vstack(parts)


# -- R204 nonzero then indexing ---------------------------------------------------------------


def r204_pos(a: np.ndarray):
    idx = np.nonzero(a > 0.0)  # expect: R204
    a[idx] = 0.0
    return a


def r204_direct_pos(a: np.ndarray):
    return a[np.where(a < 0.0)]  # expect: R204


def r204_argwhere_pos(a: np.ndarray, m: np.ndarray):
    idx = np.argwhere(m)  # expect: R204
    return a[idx[:, 0]]


def r204_first_axis_pos(a: np.ndarray, b: np.ndarray):
    idx = np.nonzero(a > 0.0)[0]  # expect: R204
    return b[idx]


def r204_neg(a: np.ndarray):  # reject: R204
    return np.nonzero(a > 0.0)


def r204_neg_count(a: np.ndarray):  # reject: R204
    idx = np.nonzero(a > 0.0)
    return len(idx[0])


# -- R205 mutating a view that becomes a copy -------------------------------------------------


def r205_pos(M: np.ndarray, r: np.ndarray):
    d = np.diag(M)
    d[:] = d + r  # expect: R205
    return M


def r205_more(a: np.ndarray, M: np.ndarray):
    a.ravel()[0] = 1.0  # expect: R205
    a.flat[1] = 1.0  # expect: R205
    b = a.flatten()
    b[0] = 2.0  # expect: R205
    f = np.flipud(M)
    f[0] = 0.0  # expect: R205
    return a


def r205_neg(M: np.ndarray):  # reject: R205
    d = np.diag(M)
    return d.sum() + np.fliplr(M)[0, 0]


# -- R206 reshape inside a hot loop -----------------------------------------------------------


def r206_pos(a: np.ndarray, n, m, n_steps):
    for _ in range(n_steps):
        b = a.reshape(n, m)  # expect: R206
        a = np.tanh(b)
    return a


def r206_function_pos(a: np.ndarray, n, n_steps):
    for _ in range(n_steps):
        a = np.reshape(a, (n, -1))  # expect: R206
    return a


def r206_neg(a: np.ndarray, n, m, n_steps):  # reject: R206
    b = a.reshape(n, m)
    for _ in range(n_steps):
        np.tanh(b, out=b)
    return b


# -- R301 SciPy -------------------------------------------------------------------------------


def r301_hot_pos(frames: list, b, a):
    out = []
    for x in frames:
        out.append(scipy.signal.lfilter(b, a, x))  # expect: R301
    return out


def r301_neg(x):  # reject: R301
    return scipy_helpers.lfilter(x)


# -- R302 / R303 / R305 linear algebra and FFT ------------------------------------------------


def r302_pos(A: np.ndarray):
    q, r = np.linalg.qr(A)  # expect: R302
    u, s, vt = np.linalg.svd(r)  # expect: R302
    return q, s


def r302_neg(A: np.ndarray):  # reject: R302
    return np.linalg.eigh(A)


def fft(x):
    return x


def r303_pos(x: np.ndarray):
    return np.fft.rfft(x)  # expect: R303


def r303_neg(x):  # reject: R303
    return fft(x)


def r305_pos(A: np.ndarray, b: np.ndarray):
    L = np.linalg.cholesky(A)  # expect: R305
    return np.linalg.solve(L, b)  # expect: R305


def r305_neg(A: np.ndarray, b: np.ndarray):  # reject: R305
    return np.linalg.lstsq(A, b)


# -- R304 random numbers with several GPUs (this project is assessed with --gpus 2) -----------


def r304_pos(n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)  # expect: R304
    return x + np.random.rand(n)  # expect: R304


def r304_neg(n):  # reject: R304
    return [random.random() for _ in range(n)]


# -- aliases ----------------------------------------------------------------------------------


def alias_from_import(n):
    a = zeros((n, 4))
    for row in a:  # expect: R103
        print(row)


def alias_sum_as(a):
    return npsum(a)  # expect: R002


def alias_xp(n):
    b = xp.ones(n)
    return b[::2]  # expect: R106
'''

MPI_WORK = '''\
import numpy as np
from mpi4py import MPI  # expect: R108


def exchange(n):
    comm = MPI.COMM_WORLD
    local = np.zeros(n)
    total = np.empty_like(local)
    comm.Allreduce(local, total, op=MPI.SUM)
    return total
'''

MPI_PLAIN_IMPORT = '''\
import mpi4py  # expect: R108
import numpy as np


def make(n):
    return np.zeros(n)
'''

# A launcher: imports mpi4py but does no array work.
MPI_LAUNCHER = '''\
import subprocess

from mpi4py import MPI  # reject: R108


def launch(script):
    if MPI.COMM_WORLD.Get_rank() == 0:
        subprocess.run(["python", script], check=True)
'''

# Array work, and mpi4py only in a docstring, a string and a comment.
MPI_MENTION = '''\
"""Ported away from mpi4py: `from mpi4py import MPI` is gone."""  # reject: R108

import numpy as np

NOTE = "import mpi4py"  # reject: R108


def halo(u):  # reject: R108
    # from mpi4py import MPI  (no longer needed)
    return np.roll(u, 1)
'''

BRIDGE = '''\
import cupy as cp
import numpy as np


def r111_pos(frames, n_steps):
    out = []
    for _ in range(n_steps):
        for f in frames:
            g = cp.sqrt(cp.asarray(f))  # expect: R111
            out.append(g.get())
            out.append(cp.asnumpy(g))
            out.append(np.asarray(g))
    return out


def r111_neg(host, n_steps):  # reject: R111
    g = cp.asarray(host)
    for _ in range(n_steps):
        g = cp.sqrt(g)
    return cp.asnumpy(g)
'''

# `import cupynumeric as np` counts like numpy.
CUPYNUMERIC = '''\
import cupynumeric as np


def cn_loop(n):
    a = np.ones(n)
    out = np.zeros(n)
    for i in range(a.shape[0]):
        out[i] = a[i] + 1.0  # expect: R101
    return sum(out), np.sum(a)  # expect: R110, R002
'''

# A hot path through two calls across two modules: driver -> kernels.step -> helpers.measure.
PKG_DRIVER = '''\
import numpy as np

from . import helpers
from .kernels import step


def run(n, n_steps):
    u = np.zeros(n)
    for _ in range(n_steps):
        u = step(u)
    return helpers.final_norm(u)
'''

PKG_KERNELS = '''\
from .helpers import measure


def step(u):
    scale = measure(u)
    return u * scale
'''

PKG_HELPERS = '''\
import numpy as np


def measure(u: np.ndarray):
    return 1.0 / float(np.abs(u).max())  # expect: R104


def final_norm(u: np.ndarray):  # reject: R104
    return float(np.linalg.norm(u))
'''

PROJECT = {
    "snippets.py": SNIPPETS,
    "mpi_work.py": MPI_WORK,
    "mpi_plain_import.py": MPI_PLAIN_IMPORT,
    "mpi_launcher.py": MPI_LAUNCHER,
    "mpi_mention.py": MPI_MENTION,
    "bridge.py": BRIDGE,
    "cn.py": CUPYNUMERIC,
    "pkg/__init__.py": "",
    "pkg/driver.py": PKG_DRIVER,
    "pkg/kernels.py": PKG_KERNELS,
    "pkg/helpers.py": PKG_HELPERS,
}

CODES = [f"R00{i}" for i in range(1, 8)] + [f"R1{i:02d}" for i in range(1, 12)]
CODES += [f"R20{i}" for i in range(1, 7)] + [f"R30{i}" for i in range(1, 6)]

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
        f.line for f in result.findings
        if f.file == file and f.function == function and f.code == code
    )


# -- the markers hold -------------------------------------------------------------------------


def test_project_is_assessed_whole(project: Assessment) -> None:
    assert sorted(project.files) == sorted(PROJECT)
    assert project.skipped == []


@pytest.mark.parametrize("mark", _params("expect"))
def test_expected_finding(project: Assessment, mark: Mark) -> None:
    lines = found(project, mark.file, mark.function, mark.code)
    assert mark.line in lines, (
        f"{mark.code} expected at {mark.file}:{mark.line} in {mark.function}; "
        f"{mark.code} there: {lines}"
    )


@pytest.mark.parametrize("mark", _params("reject"))
def test_rejected_finding(project: Assessment, mark: Mark) -> None:
    if mark.whole_function:
        lines = found(project, mark.file, mark.function, mark.code)
        assert lines == [], f"{mark.code} must not be reported in {mark.function}: {lines}"
    else:
        hits = [
            f for f in project.findings
            if f.file == mark.file and f.line == mark.line and f.code == mark.code
        ]
        assert hits == [], f"{mark.code} must not be reported at {mark.file}:{mark.line}"


def test_every_code_has_a_positive_and_a_negative() -> None:
    expected = {m.code for m in MARKS if m.kind == "expect"}
    rejected = {m.code for m in MARKS if m.kind == "reject"}
    assert set(CODES) - expected == set()
    # R304 also has a single-GPU negative: test_r304_not_reported_on_one_gpu.
    assert set(CODES) - rejected == set()


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
    assert len(found(project, "snippets.py", function, "R101")) == n


def test_r111_one_finding_per_nest(project: Assessment) -> None:
    # four conversions in a two-deep nest: one finding, at the first offending line
    assert found(project, "bridge.py", "r111_pos", "R111") == [9]


def test_scales_reported_once_per_function(project: Assessment) -> None:
    # r005_pos has several shifted views and arithmetic; r002_pos two reductions
    assert found(project, "snippets.py", "r002_pos", "R002") == [
        m.line for m in MARKS if m.function == "r002_pos" and m.code == "R002"
    ]
    for f in project.findings:
        if f.kind == "SCALES":
            same = found(project, f.file, f.function, f.code)
            assert same == [f.line], f


# -- hot paths --------------------------------------------------------------------------------


def test_r104_hot_through_two_calls_across_modules(project: Assessment) -> None:
    [finding] = [
        f for f in project.findings if f.code == "R104" and f.file == "pkg/helpers.py"
    ]
    assert finding.function == "measure"
    assert finding.hot and finding.counts
    assert "float(" in finding.source_line


def test_boundary_conversion_is_not_hot(project: Assessment) -> None:
    # float(np.sum(a)) after the loop: a boundary value, neither R104 nor on the hot path
    assert found(project, "snippets.py", "r104_neg_boundary", "R104") == []
    r002 = [
        f for f in project.findings
        if f.function == "r104_neg_boundary" and f.code == "R002"
    ]
    assert r002 and not r002[0].hot


@pytest.mark.parametrize("file", ["mpi_launcher.py", "mpi_mention.py"])
def test_no_r108_without_mpi_beside_array_work(project: Assessment, file: str) -> None:
    assert [f for f in project.findings if f.file == file and f.code == "R108"] == []


def test_r108_counts_although_at_module_level(project: Assessment) -> None:
    [finding] = [f for f in project.findings if f.code == "R108" and f.file == "mpi_work.py"]
    assert finding.function == "<module>"
    assert finding.counts


# -- R304 needs several GPUs ------------------------------------------------------------------

RANDOM_ONE_GPU = '''\
import numpy as np


def draws(n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    return x + np.random.rand(n)
'''


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

THREE_BLOCKS = '''\
import numpy as np


def evens(a: np.ndarray):
    return a[::2]


def total(a: np.ndarray):
    return sum(a)


def fortran(a: np.ndarray, n, m):
    return a.reshape(n, m, order="F")
'''

TWO_BLOCKS = '''\
import numpy as np


def evens(a: np.ndarray):
    return a[::2]


def total(a: np.ndarray):
    return sum(a)
'''

MPI_ONLY = '''\
import numpy as np
from mpi4py import MPI


def reduce_all(a: np.ndarray):
    out = np.empty_like(a)
    MPI.COMM_WORLD.Allreduce(a, out)
    return out
'''

REFACTOR_ONLY = '''\
import numpy as np


def diffuse(u: np.ndarray, n_steps):
    for _ in range(n_steps):
        tmp = np.zeros_like(u)
        tmp[1:-1] = 0.5 * (u[:-2] + u[2:])
        u[:] = tmp
    return u
'''

CLEAN = '''\
import numpy as np


def diffuse(u: np.ndarray, n_steps):
    tmp = np.zeros_like(u)
    for _ in range(n_steps):
        tmp[1:-1] = 0.5 * (u[:-2] + u[2:])
        u[:] = tmp
    return u
'''

# CLEAN plus a library function (nothing calls it) using np.interp, which the manifest marks
# not implemented.
CLEAN_WITH_INTERP = CLEAN + '''

def resample(x: np.ndarray, xp: np.ndarray, fp: np.ndarray):
    return np.interp(x, xp, fp)
'''


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
def test_verdict(
    tmp_path: Path, source: str, verdict: str, rule: int, blocks: int, refactor: int
) -> None:
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
