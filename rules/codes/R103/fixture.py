# R103 — iterating an array.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r103.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def r103_rows(n):
    arr = np.zeros((n, 3))
    rows = []
    for row in arr:  # expect: R103
        rows.append(row)
    return rows


def r103_enumerate(a: np.ndarray, out):
    for i, v in enumerate(a):  # expect: R103
        out.append((i, v))
    return out


def r103_arange(n):
    acc = []
    for x in np.arange(n):  # expect: R103
        acc.append(x)
    return acc


def r103_comprehension(a: np.ndarray):
    return [v * 2 for v in a]  # expect: R103


def r103_zip(a: np.ndarray, b: np.ndarray):
    return [x + y for x, y in zip(a, b)]  # expect: R103


def r103_neg_list_range_param(names):  # reject: R103
    out = []
    for name in ["a", "b", "c"]:
        out.append(name)
    for i in range(10):
        out.append(i)
    for item in names:
        out.append(item)
    return out


def r103_neg_dict(table: dict):  # reject: R103
    for key in table:
        print(key)
