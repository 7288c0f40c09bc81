# R003 — matrix product.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r003.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r003_pos(A: np.ndarray, B: np.ndarray):
    C = A @ B  # expect: R003
    return np.einsum("ij,jk->ik", C, B)


def r003_dot_pos(a: np.ndarray, b: np.ndarray):
    return a.dot(b)  # expect: R003


def r003_neg(A: np.ndarray, B: np.ndarray):  # reject: R003
    return A * B
