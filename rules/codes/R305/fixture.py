# R305 — linalg.solve / linalg.cholesky.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r305.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r305_pos(A: np.ndarray, b: np.ndarray):
    L = np.linalg.cholesky(A)  # expect: R305
    return np.linalg.solve(L, b)  # expect: R305


def r305_neg(A: np.ndarray, b: np.ndarray):  # reject: R305
    return np.linalg.lstsq(A, b)
