# R107 — object dtype.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r107.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r107_pos(xs):
    return np.array(xs, dtype=object)  # expect: R107


def r107_more(a: np.ndarray, n):
    b = a.astype("O")  # expect: R107
    c = a.astype(object)  # expect: R107
    d = np.empty(n, dtype="O")  # expect: R107
    return b, c, d


def r107_neg(n, a: np.ndarray):  # reject: R107
    return np.zeros(n, dtype=np.float32), a.astype("float64")
