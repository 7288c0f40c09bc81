# R005 — stencil slicing.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r005.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r005_pos(g: np.ndarray, new: np.ndarray):
    new[1:-1, 1:-1] = 0.25 * (  # expect: R005
        g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:]
    )
    return new


def r005_neg(u: np.ndarray, v: np.ndarray, out: np.ndarray):  # reject: R005
    out[1:-1] = u[1:-1] + v[1:-1]
    return out
