# R007 — boolean-mask indexing.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r007.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


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
