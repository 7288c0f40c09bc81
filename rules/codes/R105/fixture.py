# R105 — branching on an array inside a loop.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r105.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r105_while_pos(A: np.ndarray, x: np.ndarray, b: np.ndarray, tol):
    r = b - A @ x
    while np.linalg.norm(r) > tol:  # expect: R105
        x += 0.1 * r
        r = b - A @ x
    return x


def r105_if_any_pos(u: np.ndarray, n_steps):
    for _ in range(n_steps):
        u = np.sqrt(u)
        if np.any(u > 1.0):  # expect: R105
            break
    return u


def r105_err_pos(u: np.ndarray, n_steps, tol):
    for _ in range(n_steps):
        u = np.tanh(u)
        err = np.max(np.abs(u))
        if err < tol:  # expect: R105
            break
    return u


def r105_neg_float(r: np.ndarray, n_steps, tol):  # reject: R105
    for _ in range(n_steps):
        r = np.tanh(r)
        x = float(np.linalg.norm(r))  # expect: R104
        if x < tol:
            break
    return r


def r105_neg_shape_tests(a: np.ndarray, n_steps):  # reject: R105
    for _ in range(n_steps):
        if a.ndim == 2 and len(a) > 3:
            a = np.tanh(a)
        if a.shape[0] > 3:
            break
    return a
