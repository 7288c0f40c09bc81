# R102 — np.vectorize.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r102.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np
from mylib import vectorize as my_vectorize
from numpy import vectorize


def r102_pos(a: np.ndarray):
    f = np.vectorize(lambda v: v + 1)  # expect: R102
    return f(a)


@np.vectorize  # expect: R102
def r102_decorated(v):
    return v * 2


@vectorize  # expect: R102
def r102_decorated_from_import(v):
    return v * 3


def r102_neg(a):  # reject: R102
    return my_vectorize(abs)(a)
