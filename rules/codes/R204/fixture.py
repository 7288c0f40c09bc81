# R204 — nonzero then indexing.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r204.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


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
