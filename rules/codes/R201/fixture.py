# R201 — allocation inside a loop.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r201.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r201_pos(u: np.ndarray, n_steps):
    for _ in range(n_steps):
        tmp = np.zeros_like(u)  # expect: R201
        tmp[1:-1] = u[:-2] + u[2:]
        u[:] = tmp
    return u


def r201_more(a: np.ndarray, n_steps, n):
    rng = np.random.default_rng(1)
    for _ in range(n_steps):
        b = a.copy()  # expect: R201
        c = rng.normal(size=n)  # expect: R201
        d = np.random.randn(n)  # expect: R201
        e = np.arange(n)  # expect: R201
        f = np.linspace(0, 1, n)  # expect: R201
        g = np.full(n, 1.0)  # expect: R201
        h = np.array([1.0, 2.0])  # expect: R201
        a = b + c + d + e + f + g + h[0]
    return a


def r201_neg_hoisted(u: np.ndarray, n_steps):  # reject: R201
    tmp = np.zeros_like(u)
    for _ in range(n_steps):
        tmp[1:-1] = u[:-2] + u[2:]
        u[:] = tmp
    return u


def r201_neg_setup(n):  # reject: R201
    fields = []
    for _ in range(3):
        fields.append(np.zeros(n))
    named = {}
    for name in ["u", "v", "w"]:
        named[name] = np.ones(n)
    return fields, named
