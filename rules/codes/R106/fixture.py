# R106 — non-unit step slicing.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r106.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r106_pos(a: np.ndarray):
    return a[::2]  # expect: R106


def r106_more(a: np.ndarray, k):
    b = a[1::2]  # expect: R106
    c = a[::-1]  # expect: R106
    d = a[::k]  # expect: R106
    return b, c, d, a[:, ::2]  # expect: R106


def r106_every_site(items):
    return items[::2]  # expect: R106


def r106_caller(n):
    return r106_every_site(np.arange(n))


def r106_neg_unknown(items):  # reject: R106
    return items[::2]


def r106_neg_list(xs: list):  # reject: R106
    return xs[::2]


def r106_pos_mixed_sites(items):
    # One caller passes an array: an array argument makes the parameter an array inside.
    return items[1::2]  # expect: R106


def r106_mixed_caller(n):
    return r106_pos_mixed_sites(np.arange(n)), r106_pos_mixed_sites([1, 2, 3])


def r106_neg_unit(a: np.ndarray, n):  # reject: R106
    return a[0:n:1] + a[1:-1] + a[::1]
