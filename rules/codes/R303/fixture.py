# R303 — fft.*.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r303.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np


def fft(x):
    return x


def r303_pos(x: np.ndarray):
    return np.fft.rfft(x)  # expect: R303


def r303_neg(x):  # reject: R303
    return fft(x)
