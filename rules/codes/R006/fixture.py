# R006 — preallocated output.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r006.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r006_pos(a: np.ndarray, b: np.ndarray, c: np.ndarray):
    np.add(a, b, out=c)  # expect: R006
    return c


def r006_swap_pos(n, n_steps):
    cur = np.zeros(n)
    nxt = np.zeros(n)
    for _ in range(n_steps):
        nxt[1:-1] = 0.5 * (cur[:-2] + cur[2:])
        cur, nxt = nxt, cur  # expect: R006
    return cur


def r006_rotation_pos(n, n_steps):
    a, b, c = np.zeros(n), np.ones(n), np.zeros(n)
    for _ in range(n_steps):
        a[:] = b + c
        a, b, c = b, c, a  # expect: R006
    return a


def r006_neg(a: np.ndarray, b: np.ndarray):  # reject: R006
    c = np.add(a, b)
    return c


def r006_neg_not_a_permutation(n, n_steps):  # reject: R006
    cur, nxt, other = np.zeros(n), np.zeros(n), np.ones(n)
    for _ in range(n_steps):
        nxt[1:-1] = 0.5 * (cur[:-2] + cur[2:])
        cur, nxt = nxt, other
    return cur
