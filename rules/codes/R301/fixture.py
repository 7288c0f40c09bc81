# R301 — SciPy.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r301.py beside the other codes' fixtures (markers: tests/markers.py).

import scipy.signal  # expect: R301
import scipy_helpers  # reject: R301


def r301_hot_pos(frames: list, b, a):
    out = []
    for x in frames:
        out.append(scipy.signal.lfilter(b, a, x))  # expect: R301
    return out


def r301_neg(x):  # reject: R301
    return scipy_helpers.lfilter(x)
