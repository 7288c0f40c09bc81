# R302 — linalg.qr / linalg.svd.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r302.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r302_pos(A: np.ndarray):
    q, r = np.linalg.qr(A)  # expect: R302
    u, s, vt = np.linalg.svd(r)  # expect: R302
    return q, s


def r302_neg(A: np.ndarray):  # reject: R302
    return np.linalg.eigh(A)
