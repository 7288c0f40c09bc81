# R002 — reduction.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r002.py beside the other codes' fixtures (markers: tests/markers.py).

import statistics

import numpy as np


def r002_pos(n):
    a = np.ones(n)
    s = np.sum(a)  # expect: R002
    return s + a.mean()


def r002_method_pos(a: np.ndarray):
    return a.max()  # expect: R002


def r002_norm_pos(r: np.ndarray):
    return np.linalg.norm(r)  # expect: R002


def r002_neg(xs):  # reject: R002
    return statistics.mean(xs)
