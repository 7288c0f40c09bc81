# R110 — Python builtins on arrays.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r110.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r110_sum_pos(a: np.ndarray):
    return sum(a)  # expect: R110


def r110_max_pos(n):
    a = np.ones(n)
    return max(a)  # expect: R110


def r110_in_pos(a: np.ndarray, v):
    return v in a  # expect: R110


def r110_more(a: np.ndarray, m: np.ndarray, v):
    r1 = min(a)  # expect: R110
    r2 = any(m)  # expect: R110
    r3 = all(m)  # expect: R110
    r4 = sorted(a)  # expect: R110
    r5 = list(a)  # expect: R110
    r6 = tuple(a)  # expect: R110
    r7 = iter(a)  # expect: R110
    r8 = reversed(a)  # expect: R110
    r9 = v not in a  # expect: R110
    return r1, r2, r3, r4, r5, r6, r7, r8, r9


def r110_neg(a: np.ndarray, b: np.ndarray, i):  # reject: R110
    n = len(a)
    m = max(a[i], b[i])
    return n, m


def r110_neg_lists(xs: list, d: dict, v):  # reject: R110
    return sum(xs), max(xs), v in d, sorted(xs), sum([1, 2, 3])
