# R001 — vectorized elementwise expression.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r001.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r001_pos(n, w):
    t = np.linspace(0.0, 1.0, n)
    y = np.exp(-t) * np.cos(w * t)  # expect: R001
    return y


def r001_mask_pos(a: np.ndarray, lo, hi):
    return (a > lo) & (a < hi)  # expect: R001


def r001_neg(n, k):  # reject: R001
    m = n * 2 + k
    return m - 1
