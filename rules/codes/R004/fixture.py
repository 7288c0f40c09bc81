# R004 — vectorized conditional.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r004.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r004_pos(a: np.ndarray):
    return np.where(a > 0.0, a, 0.0)  # expect: R004


def r004_putmask_pos(a: np.ndarray, m: np.ndarray):
    np.putmask(a, m, 0.0)  # expect: R004
    return a


def r004_neg(a: np.ndarray):  # reject: R004
    idx = np.where(a > 0.0)
    return idx
