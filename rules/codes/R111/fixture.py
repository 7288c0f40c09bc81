# R111 — cuPyNumeric and CuPy mixed in a hot loop.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r111.py beside the other codes' fixtures (markers: tests/markers.py).

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
