# R206 — reshape inside a hot loop.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r206.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r206_pos(a: np.ndarray, n, m, n_steps):
    for _ in range(n_steps):
        b = a.reshape(n, m)  # expect: R206
        a = np.tanh(b)
    return a


def r206_function_pos(a: np.ndarray, n, n_steps):
    for _ in range(n_steps):
        a = np.reshape(a, (n, -1))  # expect: R206
    return a


def r206_neg(a: np.ndarray, n, m, n_steps):  # reject: R206
    b = a.reshape(n, m)
    for _ in range(n_steps):
        np.tanh(b, out=b)
    return b
