# R104 — host materialization in a hot loop.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r104.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r104_pos(a: np.ndarray, n_iter):
    hist = []
    for _ in range(n_iter):
        a = np.tanh(a)
        hist.append(float(np.sum(a)))  # expect: R104
    return hist


def r104_over_array(a: np.ndarray):
    out = []
    for row in a:  # expect: R103
        out.append(float(row.sum()))  # expect: R104
    return out


def r104_item_pos(a: np.ndarray):
    out = []
    for row in range(a.shape[0]):
        out.append(a[row].sum().item())  # expect: R104
    return out


def r104_more(a: np.ndarray, n_steps):
    out = []
    for _ in range(n_steps):
        out.append(a.tolist())  # expect: R104
        out.append(bool(a.any()))  # expect: R104
        out.append(complex(a.sum()))  # expect: R104
    return out


def r104_neg_boundary(a: np.ndarray, n_iter):  # reject: R104
    for _ in range(n_iter):
        a = np.tanh(a)
    return float(np.sum(a))


def r104_neg_scalars(n_steps):  # reject: R104
    out = []
    for i in range(n_steps):
        out.append(float(i) + int("3"))
    return out


class Solver:
    def run(self, a: np.ndarray, n_steps):
        for _ in range(n_steps):
            a = self.update(a)
        return a

    def update(self, a: np.ndarray):
        return float(a.sum()) * a  # expect: R104
