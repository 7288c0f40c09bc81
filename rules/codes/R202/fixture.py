# R202 — rebinding x = x op y in a loop.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r202.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r202_pos(x: np.ndarray, v: np.ndarray, dt, n_steps):
    for _ in range(n_steps):
        x = x + dt * v  # expect: R202
    return x


def r202_sqrt_pos(x: np.ndarray, y: np.ndarray, n_steps):
    for _ in range(n_steps):
        x = np.sqrt(x) + y  # expect: R202
    return x


def r202_neg_inplace(x: np.ndarray, v: np.ndarray, dt, n_steps):  # reject: R202
    for _ in range(n_steps):
        x += dt * v
    return x


def r202_neg_scalar(n_steps):  # reject: R202
    s = 0
    for _ in range(n_steps):
        s = s + 1
    return s


def r202_neg_outside_loop(x: np.ndarray, y: np.ndarray):  # reject: R202
    x = x + y
    return x


def r202_neg_swap(n, n_steps):  # reject: R202
    a = np.zeros(n)
    b = np.ones(n)
    for _ in range(n_steps):
        b[:] = np.tanh(a)
        a, b = b, a
    return a
