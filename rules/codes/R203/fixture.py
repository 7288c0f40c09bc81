# R203 — stacking in a loop.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r203.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r203_pos(rows: list, n):
    acc = np.zeros((0, n))
    for row in rows:
        acc = np.vstack([acc, row])  # expect: R203
    return acc


def r203_more(a: np.ndarray, n_steps):
    out = np.zeros(0)
    for _ in range(n_steps):
        out = np.concatenate([out, a])  # expect: R203
        out = np.append(out, 1.0)  # expect: R203
    return out


def r203_neg(rows: list):  # reject: R203
    parts = []
    for row in rows:
        parts.append(row)
    return np.vstack(parts)
