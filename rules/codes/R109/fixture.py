# R109 — order= keyword.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r109.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r109_pos(a: np.ndarray, n, m):
    return a.reshape(n, m, order="F")  # expect: R109


def r109_more(a: np.ndarray, xs, n):
    b = np.asarray(xs, order="C")  # expect: R109
    c = a.ravel(order="F")  # expect: R109
    d = a.flatten(order="C")  # expect: R109
    e = np.zeros(n, order="F")  # expect: R109
    f = np.array(xs, order="C")  # expect: R109
    return b, c, d, e, f


def make_plan(order):
    return order


def r109_neg(a: np.ndarray, n, m):  # reject: R109
    make_plan(order="F")
    return a.reshape(n, m), sorted([3, 1], reverse=True)
