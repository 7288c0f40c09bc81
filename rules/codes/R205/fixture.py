# R205 — mutating a view that becomes a copy.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r205.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


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
